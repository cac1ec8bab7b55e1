// Runs a command line under `mpirun` for the data-parallel tests: root-safe flags for containers,
// oversubscription (ranks may outnumber cores), no CMA single-copy (ptrace is often not allowed in
// containers), a wall-clock limit so a hang fails the test instead of blocking it, and no LSan in
// the ranks (OpenMPI's start-up allocations are never freed).
#pragma once

#include <cstdlib>
#include <string>

#include "../cli/run_util.hpp"

namespace bertbench::testing {

using MpiRunResult = RunResult;

// "" when mpirun can be used, else why not (the test then skips with it).
inline std::string mpirun_missing() {
    if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "mpirun not found (apt-get install openmpi-bin)";
    return "";
}

inline std::string mpirun_prefix(int np, int timeout_s) {
    return "ASAN_OPTIONS=detect_leaks=0 timeout -k 5 " + std::to_string(timeout_s) +
           " mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none "
           "-x ASAN_OPTIONS -np " + std::to_string(np) + " ";
}

// `mpirun -np N <args>` (args: shell words, the caller quotes), killed after timeout_s.
inline MpiRunResult run_mpi(int np, const std::string& args, int timeout_s = 120) {
    return run_shell(mpirun_prefix(np, timeout_s) + args);
}

inline size_t count_of(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
}

}  // namespace bertbench::testing
