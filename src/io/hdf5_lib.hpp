// libhdf5 as bertbench calls it (hdf5_shard.cpp reads, hdf5_writer.cpp writes): one process-wide
// mutex around every call, automatic error printing off on the calling thread, dynamic filter
// plugins off (a file must not make the process load a shared library), the innermost message of a
// failed call's error stack for our one-line errors, and owned handles. Internal to src/io.
#pragma once

#include <hdf5.h>

#include <mutex>
#include <string>

#include "core/error.hpp"

namespace bertbench::io::h5 {

inline std::mutex& hdf5_mutex() {
    static std::mutex m;
    return m;
}

// Once per process, under the lock: dynamic filter plugins off (a file must not make the process
// load a shared library; an unknown filter is refused by name before any read anyway).
inline bool harden_library() {
    const bool ok = H5PLset_loading_state(0) >= 0;
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

// Holds the library lock with error printing off for this thread, and clears the stack on exit.
// Before the library's first call: no clean-up of its own at exit (H5dont_atexit). A file whose
// write failed (a full disk) cannot be closed, and libhdf5 1.10's exit handler crashed closing it
// again after our one-line error; every file we open is closed by its Handle, so nothing is lost.
struct Hdf5Lock {
    std::lock_guard<std::mutex> lock{hdf5_mutex()};
    Hdf5Lock() {
        static const bool no_atexit = H5dont_atexit() >= 0;
        (void)no_atexit;
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        static const bool hardened = harden_library();
        BB_CHECK(hardened);
    }
    ~Hdf5Lock() { H5Eclear2(H5E_DEFAULT); }
};

// Held (inside an Hdf5Lock) while libhdf5 reads `path`: libhdf5 1.10 follows some addresses of a
// damaged file without checking them against its end and faults (h5py crashes on such a file too).
// A SIGSEGV or SIGBUS of this thread meanwhile ends the process with one line naming the file and
// exit status 1, instead of a crash; a fault of another thread goes to the handler it had.
class Hdf5CrashGuard {
  public:
    explicit Hdf5CrashGuard(const std::string& path);
    ~Hdf5CrashGuard();
    Hdf5CrashGuard(const Hdf5CrashGuard&) = delete;
    Hdf5CrashGuard& operator=(const Hdf5CrashGuard&) = delete;

  private:
    std::string message_;
};

// The innermost message on the current error stack ("file signature not found"), then clears it.
inline std::string hdf5_error() {
    std::string msg;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_DOWNWARD,
        [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
            if (e != nullptr && e->desc != nullptr && e->desc[0] != '\0')
                *static_cast<std::string*>(data) = e->desc;
            return 0;
        },
        &msg);
    H5Eclear2(H5E_DEFAULT);
    if (msg.empty()) msg = "unknown error";
    for (char& c : msg)
        if (c == '\n' || c == '\r') c = ' ';
    return "libhdf5: " + msg;
}

// An owned hid_t closed with its kind's close function.
class Handle {
  public:
    Handle() = default;
    Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Handle() { reset(); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle& operator=(Handle&& o) noexcept {
        reset();
        id_ = o.id_;
        close_ = o.close_;
        o.id_ = -1;
        return *this;
    }
    hid_t get() const { return id_; }
    bool ok() const { return id_ >= 0; }
    hid_t release() {  // the caller closes it from now on
        const hid_t id = id_;
        id_ = -1;
        return id;
    }
    void reset() {
        if (id_ >= 0 && close_ != nullptr) close_(id_);
        id_ = -1;
    }

  private:
    hid_t id_ = -1;
    herr_t (*close_)(hid_t) = nullptr;
};

}  // namespace bertbench::io::h5
