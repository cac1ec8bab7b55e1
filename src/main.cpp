// bertbench: one binary, one subcommand per stage of the MLPerf BERT workload.
// Errors reach here as bertbench::Error and are printed as one line; the exit code is then 1.
// Under mpirun the job prints it once (dist::fail_job), not once per rank.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"
#include "ops/kernels.hpp"

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int, char**);
    const char* batch_flags = nullptr;  // what an out-of-memory hint names (nullptr: no batch)
    bool under_mpirun = false;  // its ranks share the work (docs/distributed.md; version: each rank's
                                // machine); else refused under mpirun -np N > 1
};

const Command kCommands[] = {
    {"version", "print build and system information", bertbench::cli::cmd_version, nullptr, true},
    {"tokenize", "BERT WordPiece tokenization of stdin lines to JSON (tokenization.py)", bertbench::cli::cmd_tokenize},
    {"prepare", "make pretraining TFRecords (create_pretraining_data.py, byte-identical)", bertbench::cli::cmd_prepare,
     nullptr, true},
    {"pretrain", "pretrain BERT to a target masked-LM accuracy (run_pretraining.py), resumable", bertbench::cli::cmd_pretrain,
     "in micro-batches (more accumulation steps: --steps_per_update; NVIDIA's --gradient_accumulation_steps; "
     "PerfZero's and NGC's --num_accumulation_steps) or --eval_batch_size", true},
    {"eval", "masked-LM/NSP accuracy and loss of a checkpoint on TFRecords", bertbench::cli::cmd_eval,
     "--eval_batch_size", true},
    {"bench", "benchmark training/inference throughput and the GEMM ceiling", bertbench::cli::cmd_bench,
     "--batch_size", true},
    {"pick-eval", "pick the eval subset of a TFRecord (pick_eval_samples.py)", bertbench::cli::cmd_pick_eval},
    {"convert", "checkpoints between TensorFlow, Hugging Face and bertbench safetensors", bertbench::cli::cmd_convert},
    {"squad", "SQuAD features and prediction decoding (run_squad.py, byte-identical)", bertbench::cli::cmd_squad,
     "--train_batch_size or --predict_batch_size", true},
    {"squad-eval", "official SQuAD metric (evaluate-v1.1.py / evaluate-v2.0.py output)", bertbench::cli::cmd_squad_eval},
};

void usage(std::FILE* out) {
    std::fprintf(out, "usage: bertbench <command> [flags]   (bertbench <command> --help for its flags)\n\n"
                      "commands:\n");
    for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

// Levenshtein distance, with a transposition counted as one edit ("sqaud" is 1 from "squad").
size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                                d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// libgomp spins up to GOMP_SPINCOUNT (default 300,000 `pause`s, milliseconds on recent CPUs) at every
// barrier and at the end of every parallel region before it sleeps. When the host time-slices our
// vCPUs or other processes are runnable, a spinning thread burns the time slice the thread it waits
// for needs: 2-thread runs became 10-25x slower than 1-thread ones. Not spinning at all
// (OMP_WAIT_POLICY=PASSIVE) costs a futex wake-up of the other thread at every parallel region
// (tens to hundreds of microseconds in a VM), which halved BERT-tiny/mini throughput at batch 1. A
// shorter spin, GOMP_SPINCOUNT=10000 (~160 µs of 16 ns `pause`s on an Emerald Rapids), outlasts
// the few-microsecond gaps between one op's region and the next and a thread's lead over the other
// in most regions, and did not collapse with two busy loops on the host (docs/engine.md, "Wait
// policy"). libgomp reads its environment once, when it is loaded, so unless the user chose a
// policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set, even empty), we set GOMP_SPINCOUNT and re-execute
// ourselves once. If the re-exec fails we simply go on with libgomp's defaults.
void apply_openmp_wait_policy(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

// What a rank runs, compared across the ranks of a job: the command, and whether it only prints its
// help (a flag Flags::parse stops at, before any "--").
std::string rank_role(const char* command, int argc, char** argv) {
    for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
        for (const char* h : {"help", "helpfull", "h"})
            if ((argv[i][0] == '-' && std::strcmp(argv[i] + 1, h) == 0) ||
                (std::strncmp(argv[i], "--", 2) == 0 && std::strcmp(argv[i] + 2, h) == 0))
                return std::string(command) + " --help";
    return command;
}

// Whether everything printed to stdout reached it (errno says why not, when a write failed now).
bool stdout_written() {
    errno = 0;
    std::cout.flush();
    return std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout;
}

}  // namespace

int main(int argc, char** argv) {
    apply_openmp_wait_policy(argv);
    // `bertbench --version` = `bertbench version`; `bertbench help CMD` = `bertbench CMD --help`.
    char version_cmd[] = "version", help_flag[] = "--help";
    char* rewritten[] = {argv[0], version_cmd, help_flag, nullptr};
    if (argc == 2 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
        argv = rewritten;
        argc = 2;
    } else if (argc == 3 && std::strcmp(argv[1], "help") == 0) {
        rewritten[1] = argv[2];
        argv = rewritten;
        argc = 3;
    }
    const bool help = argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
                      std::strcmp(argv[1], "help") == 0;
    const Command* command = nullptr;
    for (const auto& c : kCommands)
        if (!help && std::strcmp(argv[1], c.name) == 0) command = &c;
    // Under mpirun (only then) MPI starts here; errors then name the rank ("rank 1: ...") and stop
    // the whole job (MPI_Abort), so no other rank waits forever in a collective. First every rank
    // the same command (mpirun's MPMD form gives each rank its own line): a rank that ran another,
    // or only printed a help, would leave the others waiting in a collective for good.
    bertbench::dist::init(&argc, &argv);
    if (bertbench::dist::world().size() > 1) {
        const std::string role = help      ? std::string("--help")
                                 : command ? rank_role(command->name, argc, argv)
                                           : fmt::format("the unknown command \"{}\"", argv[1]);
        try {
            bertbench::dist::require_same_on_all_ranks(bertbench::dist::world(), role, "the command",
                                                       "start every rank with the same command");
        } catch (const bertbench::Error& e) {
            bertbench::dist::fail_job("bertbench: error: ", e.what(), 2);
        }
    }
    if (help) {
        usage(argc < 2 ? stderr : stdout);
        const int rc = argc < 2 ? 2 : stdout_written() ? 0 : 1;
        bertbench::dist::finalize();
        return rc;
    }
    if (command != nullptr) {
        const Command& c = *command;
        std::string what;
        try {
            // The environment's engine choices (BB_ISA, BB_ATTENTION) and the machine's memory, read
            // once here and handed to every engine through its options (model::EngineEnvironment);
            // a bad value stops here, with its one-line error, before a command writes anything.
            if (!c.under_mpirun && bertbench::dist::world().size() > 1)
                bertbench::fail("under mpirun -np {}: {} is one process's work (every rank would do all of it "
                                "and write the same outputs); run it without mpirun",
                                bertbench::dist::world().size(), c.name);
            (void)bertbench::ops::kernels();
            bertbench::model::set_engine_environment(
                {bertbench::model::attention_kernel_from_environment(), bertbench::sysinfo::memory_bytes()});
            const int rc = c.run(argc - 1, argv + 1);
            // A result printed to stdout that never reached it (a full disk, /dev/full) fails the
            // command: `eval ... > metrics.json` must not leave an empty file and exit 0
            if (!stdout_written())
                bertbench::fail("stdout: could not write the output: {}",
                                errno != 0 ? std::strerror(errno) : "a write failed (is the disk full?)");
            bertbench::dist::finalize();
            return rc;
        } catch (const bertbench::Error& e) {
            what = e.what();
        } catch (const std::bad_alloc&) {
            // Commands name what they allocate where they can (pretrain's arenas); this is the
            // rest, with the command's own batch flags.
            what = c.batch_flags ? fmt::format("out of memory (hint: a smaller batch, {}; or a smaller model)",
                                               c.batch_flags)
                                 : std::string("out of memory (hint: a smaller input or model)");
        } catch (const std::exception& e) {
            what = e.what();
        }
        const std::string head = std::string("bertbench ") + c.name + ": error: ";
        // Under mpirun: one line for the job, not one per rank, and every rank stops.
        if (bertbench::dist::world().size() > 1) bertbench::dist::fail_job(head, what, 1);
        std::fprintf(stderr, "%s%s\n", head.c_str(), what.c_str());
        bertbench::dist::finalize();
        return 1;
    }
    // A mistyped command ("sqaud") gets the closest one when it is within 2 edits.
    const std::string given = argv[1];
    const char* closest = nullptr;
    size_t best = 3;
    for (const auto& c : kCommands)
        if (const size_t d = edit_distance(given, c.name); d < best) best = d, closest = c.name;
    if (closest != nullptr)
        std::fprintf(stderr, "bertbench: unknown command \"%s\" (did you mean \"%s\"?)\n",
                     argv[1], closest);
    else
        std::fprintf(stderr, "bertbench: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    bertbench::dist::finalize();
    return 2;
}
