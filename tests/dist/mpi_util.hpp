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

// The mpirun command with the flags above, without -np and the environment (for a script that
// adds its own -np, e.g. scripts/launch_benchmark.py's BERTBENCH_MPIRUN).
inline std::string mpirun_command(int timeout_s) {
    return "timeout -k 5 " + std::to_string(timeout_s) +
           " mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none "
           "-x ASAN_OPTIONS";
}

inline std::string mpirun_prefix(int np, int timeout_s) {
    return "ASAN_OPTIONS=detect_leaks=0 " + mpirun_command(timeout_s) + " -np " +
           std::to_string(np) + " ";
}

// `mpirun -np N <args>` (args: shell words, the caller quotes), killed after timeout_s.
inline MpiRunResult run_mpi(int np, const std::string& args, int timeout_s = 120) {
    return run_shell(mpirun_prefix(np, timeout_s) + args);
}

}  // namespace bertbench::testing
