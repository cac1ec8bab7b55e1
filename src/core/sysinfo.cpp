#include "core/sysinfo.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "git_stamp.h"  // generated at build time: BB_GIT_COMMIT, BB_GIT_DIRTY

namespace bertbench::sysinfo {
namespace {
std::string proc_field(const char* file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind(key, 0) == 0) {
            const size_t colon = line.find(':');
            if (colon == std::string::npos) continue;
            size_t start = line.find_first_not_of(" \t", colon + 1);
            return start == std::string::npos ? "" : line.substr(start);
        }
    }
    return "";
}
// The largest VmHWM read: the kernel's counter restarts at a reset, and reads the resident size
// when its high-water mark was not updated since (memory freed since may lower it).
std::atomic<double> g_peak_seen_mb{0};
}  // namespace

double peak_rss_mb() {
    const std::string v = proc_field("/proc/self/status", "VmHWM");  // "123456 kB"
    const double mb = v.empty() ? 0.0 : std::stod(v) / 1024.0;
    for (double seen = g_peak_seen_mb.load(); mb > seen && !g_peak_seen_mb.compare_exchange_weak(seen, mb);) {
    }
    return mb;
}

void reset_peak_rss() {
    peak_rss_mb();  // kept in g_peak_seen_mb
    ::malloc_trim(0);
    std::ofstream f("/proc/self/clear_refs");  // also resets getrusage's ru_maxrss
    if (f) f << "5";
}

double process_peak_rss_mb() {
    peak_rss_mb();
    return g_peak_seen_mb.load();
}

std::string cpu_model() { return proc_field("/proc/cpuinfo", "model name"); }

int cpus_available() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    return CPU_COUNT(&set);
}

std::string cpus_binding_hint() {
    const int n = cpus_available(), all = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    if (!std::getenv("OMPI_COMM_WORLD_SIZE") || n >= all) return "";
    return fmt::format("; mpirun bound this rank to {} of the machine's {} CPUs (hint: mpirun --bind-to none, or "
                       "--map-by slot:PE=<threads> for that many per rank)", n, all);
}

uint64_t memory_bytes() {
    const std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "131891224 kB"
    uint64_t bytes = mem.empty() ? 0 : std::stoull(mem) * 1024;
    std::ifstream cg("/sys/fs/cgroup/memory.max");  // "max" or a byte count
    std::string limit;
    if (cg >> limit && !limit.empty() && limit.size() < 20 &&
        limit.find_first_not_of("0123456789") == std::string::npos) {
        const uint64_t l = std::stoull(limit);
        if (bytes == 0 || l < bytes) bytes = l;
    }
    return bytes;
}

std::string openmp_wait() {
    std::string out;
    for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
        if (const char* v = std::getenv(var))  // (one appended string: GCC 12's -Wrestrict misfires on a + chain)
            out += fmt::format("{}{}={}", out.empty() ? "" : " ", var, v);
    return out.empty() ? "libgomp default" : out;
}

nlohmann::json system_info() {
    std::istringstream flags(proc_field("/proc/cpuinfo", "flags"));
    nlohmann::json isa = nlohmann::json::array();
    for (std::string f; flags >> f;) {
        for (const char* want : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni",
                                 "avx_vnni", "amx_tile"})
            if (f == want) isa.push_back(f);
    }
    const std::string mem = proc_field("/proc/meminfo", "MemTotal");
    return {{"cpu_model", cpu_model()},
            {"cpu_cores", cpus_available()},
            {"isa_flags", isa},
            {"memory_gib", mem.empty() ? 0.0 : std::stod(mem) / (1024.0 * 1024.0)},
            {"openmp_wait", openmp_wait()}};
}

nlohmann::json build_info() {
    return {{"version", BB_VERSION},
            {"git_commit", BB_GIT_COMMIT},
            {"git_dirty", BB_GIT_DIRTY != 0},  // uncommitted changes in src, bench or CMake files
            {"compiler", "g++ " __VERSION__},
            {"build_type", BB_BUILD_TYPE},
            {"cxx_flags", BB_CXX_FLAGS},
            {"sanitizer",
#ifdef BB_SANITIZE
             true
#else
             false
#endif
            }};
}

bool is_optimized_build() {
#ifdef BB_SANITIZE
    return false;
#else
    return std::string(BB_BUILD_TYPE) == "Release" || std::string(BB_BUILD_TYPE) == "RelWithDebInfo";
#endif
}

}  // namespace bertbench::sysinfo
