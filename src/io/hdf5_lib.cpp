// Hdf5CrashGuard (see hdf5_lib.hpp).
#include "io/hdf5_lib.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace bertbench::io::h5 {
namespace {

// Set while a guard is held (under the library's mutex: one guard at a time).
std::atomic<const std::string*> g_message{nullptr};
pthread_t g_thread;
struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGSEGV, SIGBUS};

void on_fault(int sig) {
    const std::string* m = g_message.load();
    if (m != nullptr && pthread_equal(pthread_self(), g_thread)) {
        (void)!::write(STDERR_FILENO, m->data(), m->size());
        ::_exit(1);
    }
    // Not libhdf5's fault on this thread: the handler it had, the fault taken again on return
    ::sigaction(sig, &g_previous[sig == SIGSEGV ? 0 : 1], nullptr);
}

}  // namespace

Hdf5CrashGuard::Hdf5CrashGuard(const std::string& path)
    : message_("bertbench: error: [hdf5] " + path +
               ": libhdf5 crashed reading it (a damaged file?)\n") {
    g_thread = pthread_self();
    struct sigaction sa {};
    sa.sa_handler = on_fault;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
    g_message.store(&message_);
}

Hdf5CrashGuard::~Hdf5CrashGuard() {
    g_message.store(nullptr);
    for (int i = 0; i < 2; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

}  // namespace bertbench::io::h5
