// Facts about this process, machine and build, for reports (PerfZero-style system/build info).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace bertbench::sysinfo {

double peak_rss_mb();           // VmHWM of this process since start or the last reset_peak_rss(), MiB
// Starts VmHWM again from the resident size now (Linux >= 4.0; allocator-held free memory returned
// first), for a figure per part of a run; the peak before the reset is kept for the one below.
void reset_peak_rss();
double process_peak_rss_mb();   // the largest VmHWM since the process started, resets included
std::string cpu_model();        // /proc/cpuinfo "model name"
int cpus_available();           // CPUs this process may run on (sched affinity)
// Where mpirun bound this process to fewer CPUs than the machine has (OpenMPI binds each rank to a
// core by default): "; mpirun bound this rank to N of the machine's M CPUs (hint: ...)"; else "".
std::string cpus_binding_hint();
uint64_t memory_bytes();        // physical memory (MemTotal, capped by a cgroup v2 memory.max)
nlohmann::json system_info();   // cpu model, cores, ISA flags of interest, memory, openmp_wait()
// How this process's OpenMP threads wait at barriers: the OMP_WAIT_POLICY / GOMP_SPINCOUNT it runs
// with (main() sets GOMP_SPINCOUNT unless the user chose; docs/engine.md "Wait policy").
std::string openmp_wait();
nlohmann::json build_info();    // version, git commit, compiler, flags, build type, sanitizer
bool is_optimized_build();      // false for Debug or sanitizer builds (benchmarks warn)

}  // namespace bertbench::sysinfo
