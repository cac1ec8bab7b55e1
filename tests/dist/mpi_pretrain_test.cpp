// `mpirun -np 2 bertbench pretrain/eval` end to end on the golden records with BERT-tiny (L2 H64
// A2 I128): 2 ranks x 2 sequences equal 1 process x 4 (dropout off, clip after the all-reduce,
// file order) to fp32 reduction-order noise, rank 0 alone writes every output with the global
// figures, eval split over 2 ranks gives exactly the single-process metrics, a run whose rank is
// killed with SIGKILL stops within seconds naming the rank and resumes bit-identically, SIGTERM to
// mpirun checkpoints once and every rank exits interrupted (143), and ranks
// started with different flags or an indivisible global batch stop before training. Skipped
// without mpirun.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mpi_util.hpp"
#include "test_util.hpp"

namespace {
namespace fs = std::filesystem;
using bertbench::testing::bertbench_path;
using bertbench::testing::count_of;
using bertbench::testing::eval_data;
using bertbench::testing::eval_lines;
using bertbench::testing::mpirun_missing;
using bertbench::testing::mpirun_prefix;
using bertbench::testing::read_jsonl;
using bertbench::testing::run_mpi;
using bertbench::testing::run_shell;
using bertbench::testing::shared_dir;
using bertbench::testing::slurp;
using bertbench::testing::train_data;
using bertbench::testing::train_lines;
using nlohmann::json;

struct Workdir {
    fs::path dir;
    explicit Workdir(const std::string& name) {
        dir = fs::temp_directory_path() / ("bb_mpi_" + name + "_" + std::to_string(getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        // dropout off: the masks depend on each rank's local batch (docs/distributed.md)
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128,
                  "max_position_embeddings": 512, "type_vocab_size": 2,
                  "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})";
    }
    ~Workdir() { fs::remove_all(dir); }
    std::string out(const std::string& name) const { return (dir / name).string(); }
};

std::string args(const Workdir& w, const std::string& out, const std::string& extra = "") {
    return " pretrain --bert_config_file=" + w.out("bert_config.json") + " --input_file=" +
           train_data() + " --eval_input_file=" + eval_data() + " --output_dir=" + out +
           " --train_batch_size=4 --num_warmup_steps=3 --learning_rate=2e-3 "
           "--eval_every_samples=24 --max_eval_steps=2 --eval_batch_size=8 --threads=1 --seed=5 " +
           extra;
}

TEST(DistPretrain, SlowTwoRanksMatchOneProcessAndRankZeroWritesGlobalFigures) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("equiv");
    const std::string extra =
        "--num_train_steps=12 --save_checkpoints_steps=6 --shuffle_buffer=0 "
        "--clip_by_global_norm_after_gradient_allreduce";
    const auto one = run_shell(bertbench_path() + args(w, w.out("one"), extra));
    ASSERT_EQ(one.exit_code, 0) << one.out;
    const auto two = run_mpi(2, bertbench_path() + args(w, w.out("two"), extra), 300);
    ASSERT_EQ(two.exit_code, 0) << two.out;
    const std::vector<json> a = read_jsonl(w.out("one") + "/train_log.jsonl"),
                            b = read_jsonl(w.out("two") + "/train_log.jsonl");
    ASSERT_EQ(a.size(), 12u);
    ASSERT_EQ(b.size(), 12u) << "rank 0 alone writes the log";
    // tolerance (numpy.isclose): rtol 1e-5 on the losses (fp32 reduction order; see
    // tests/dist/data_parallel_test.cpp for the weights)
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(b[i]["samples"], a[i]["samples"]);  // global samples: 4 per step
        for (const char* k : {"loss", "mlm_loss", "nsp_loss", "grad_norm"})
            EXPECT_NEAR(b[i][k].get<double>(), a[i][k].get<double>(), 1e-5 * std::abs(a[i][k].get<double>()))
                << k << " at step " << i + 1;
    }
    const std::vector<json> ea = read_jsonl(w.out("one") + "/eval_log.jsonl"),
                            eb = read_jsonl(w.out("two") + "/eval_log.jsonl");
    ASSERT_EQ(ea.size(), eb.size());
    for (size_t i = 0; i < ea.size(); ++i) {
        EXPECT_EQ(eb[i]["examples"], ea[i]["examples"]);  // 2 batches of 8, all ranks together
        EXPECT_NEAR(eb[i]["masked_lm_loss"].get<double>(), ea[i]["masked_lm_loss"].get<double>(), 1e-4);
    }
    const std::string ml = slurp(w.out("two") + "/mlperf.log");
    EXPECT_EQ(count_of(ml, "\"run_start\""), 1u) << "one writer";
    EXPECT_NE(ml.find("\"global_batch_size\", \"value\": 4"), std::string::npos);
    EXPECT_EQ(json::parse(slurp(w.out("two") + "/results.json"))["global_step"], 12);
    EXPECT_TRUE(fs::exists(w.out("two") + "/model.ckpt-12.safetensors"));

    // Eval split over 2 ranks equals one process exactly (the whole eval set: 100 records).
    const std::string ev = " eval --init_checkpoint=" + w.out("one") + "/model.ckpt-12.safetensors" +
                           " --bert_config_file=" + w.out("bert_config.json") + " --input_file=" +
                           eval_data() + " --eval_batch_size=8 --max_eval_steps=0 --threads=1 --json=";
    const auto e1 = run_shell(bertbench_path() + ev + w.out("e1.json"));
    ASSERT_EQ(e1.exit_code, 0) << e1.out;
    const auto e2 = run_mpi(2, bertbench_path() + ev + w.out("e2.json"), 120);
    ASSERT_EQ(e2.exit_code, 0) << e2.out;
    const json j1 = json::parse(slurp(w.out("e1.json"))), j2 = json::parse(slurp(w.out("e2.json")));
    EXPECT_EQ(j1["examples"], 100);
    EXPECT_EQ(j2["examples"], j1["examples"]);
    EXPECT_EQ(j2["predictions"], j1["predictions"]);
    EXPECT_EQ(j2["masked_lm_accuracy"], j1["masked_lm_accuracy"]);
    EXPECT_EQ(j2["next_sentence_accuracy"], j1["next_sentence_accuracy"]);
    EXPECT_NEAR(j2["masked_lm_loss"].get<double>(), j1["masked_lm_loss"].get<double>(), 1e-6);
}

// The ranks of an mpirun started by spawn_mpirun: its children (mpirun is their local daemon).
std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream f(e.path() / "stat");
        std::string stat;
        std::getline(f, stat);
        const size_t close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 2));
        char state;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return out;
}

int rank_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/environ");
    std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string key = std::string("OMPI_COMM_WORLD_RANK=");
    const size_t p = env.find(key);
    return p == std::string::npos ? -1 : std::atoi(env.c_str() + p + key.size());
}

pid_t spawn_mpirun(const std::string& cmdline, const std::string& log) {
    const pid_t pid = fork();
    if (pid == 0) {
        FILE* f = std::fopen(log.c_str(), "w");
        if (f) {
            dup2(fileno(f), 1);
            dup2(fileno(f), 2);
        }
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        execl("/bin/sh", "sh", "-c", ("exec " + cmdline).c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    return pid;
}

// Waits for pid until the deadline; its exit status, or -1 if it is still running.
int wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll interval, not a sync
    }
    return -1;
}

// NVIDIA NGC TF's line (--use_xla marks it) with 2 micro-batches per update and without
// --allreduce_post_accumulation: Horovod's DistributedOptimizer averages every micro-batch's
// gradient over the ranks before its clip, so 2 ranks x 2 sequences equal 1 process x 4.
TEST(DistPretrain, SlowNgcHorovodClipAveragesEachMicroBatchFirst) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("ngcclip");
    const std::string extra =
        "--use_xla --num_accumulation_steps=2 --num_train_steps=5 --shuffle_buffer=0 --nodo_eval "
        "--learning_rate=2e-2 ";
    std::string one_args = args(w, w.out("one"), extra), two_args = args(w, w.out("two"), extra);
    two_args.replace(two_args.find("--train_batch_size=4"), 20, "--train_batch_size=2");  // per rank
    const auto one = run_shell(bertbench_path() + one_args);
    ASSERT_EQ(one.exit_code, 0) << one.out;
    const auto two = run_mpi(2, bertbench_path() + two_args, 300);
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_EQ(json::parse(slurp(w.out("two") + "/config.json"))["flags"]["clip_mode"], "averaged_micro_batch");
    const std::vector<json> a = read_jsonl(w.out("one") + "/train_log.jsonl"),
                            b = read_jsonl(w.out("two") + "/train_log.jsonl");
    ASSERT_EQ(a.size(), 5u);
    ASSERT_EQ(b.size(), 5u);
    int clipped = 0;  // clip norm 2 against the micro-batch norms: some updates clip
    for (size_t i = 0; i < a.size(); ++i) {
        clipped += a[i]["grad_norm"].get<double>() > 2.0;
        for (const char* k : {"loss", "grad_norm"})
            EXPECT_NEAR(b[i][k].get<double>(), a[i][k].get<double>(), 1e-5 * std::abs(a[i][k].get<double>()))
                << k << " at update " << i + 1;
    }
    EXPECT_GT(clipped, 0);
}

TEST(DistPretrain, SlowRankKilledStopsTheJobNamingItAndResumeIsBitIdentical) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("kill");
    const std::string extra = "--steps_per_update=2 --num_train_steps=24 --save_checkpoints_steps=4";
    const std::string a = w.out("a"), b = w.out("b");
    const auto ra = run_mpi(2, bertbench_path() + args(w, a, extra), 300);
    ASSERT_EQ(ra.exit_code, 0) << ra.out;
    const std::vector<std::string> want = train_lines(a);
    ASSERT_EQ(want.size(), 12u);

    // mpirun without timeout(1) in between, so that the ranks are its children.
    std::string prefix = mpirun_prefix(2, 300);
    prefix = prefix.substr(prefix.find("mpirun"));
    const pid_t mpirun =
        spawn_mpirun(prefix + bertbench_path() + args(w, b, extra), w.out("b1.log"));
    // the first checkpoint (step 4) exists: kill rank 1
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (!fs::exists(b + "/model.ckpt-4.safetensors") && std::chrono::steady_clock::now() < deadline &&
           waitpid(mpirun, nullptr, WNOHANG) == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // poll interval, not a sync
    pid_t victim = -1;
    for (pid_t c : children_of(mpirun))
        if (rank_of(c) == 1) victim = c;
    ASSERT_GT(victim, 0) << "rank 1 not found (the run ended first?):\n" << slurp(w.out("b1.log"));
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    const auto killed_at = std::chrono::steady_clock::now();
    const int status = wait_until(mpirun, killed_at + std::chrono::seconds(30));
    if (status < 0) kill(mpirun, SIGKILL), waitpid(mpirun, nullptr, 0);
    ASSERT_GE(status, 0) << "the job hung after rank 1 died:\n" << slurp(w.out("b1.log"));
    EXPECT_LT(std::chrono::steady_clock::now() - killed_at, std::chrono::seconds(10));
    EXPECT_NE(status, 0);
    const std::string log = slurp(w.out("b1.log"));
    EXPECT_NE(log.find("rank 1"), std::string::npos) << log;
    EXPECT_LT(train_lines(b).size(), want.size());

    const auto rb = run_mpi(2, bertbench_path() + args(w, b, extra), 300);
    ASSERT_EQ(rb.exit_code, 0) << rb.out;
    EXPECT_NE(rb.out.find("resuming from"), std::string::npos) << rb.out;
    const std::vector<std::string> got = train_lines(b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "update " << i + 1;
    EXPECT_EQ(eval_lines(b), eval_lines(a));
}

// A run stopped on one process resumes under 2 ranks, and back: the weights and optimizer state
// carry over, every rank starts the next epoch (said in one warning, by rank 0), and the run finishes.
TEST(DistPretrain, SlowResumeWithAnotherRankCountStartsTheNextEpoch) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("ranks");
    const std::string out = w.out("run"), base = args(w, out, "--num_train_steps=12 --save_checkpoints_steps=4");
    auto r = run_shell(bertbench_path() + base + " --stop_steps=4");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_mpi(2, bertbench_path() + base + " --stop_steps=8", 300);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("resuming from"), std::string::npos) << r.out;
    const std::string warning = "was written by a job with another number of ranks";
    const size_t at = r.out.find(warning);
    EXPECT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(warning, at + 1), std::string::npos) << "said once, by rank 0\n" << r.out;
    EXPECT_EQ(json::parse(slurp(out + "/results.json"))["global_step"], 8) << r.out;
    r = run_shell(bertbench_path() + base);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["global_step"], 12) << r.out;
    EXPECT_EQ(read_jsonl(out + "/train_log.jsonl").size(), 12u);
}

// One command line, two hosts' views (each rank in its own working directory): a shard missing on
// one of them, or a checkpoint in only one --output_dir, stops the job before the first step
// instead of re-sharding the data or training from two starting points.
TEST(DistPretrain, SlowRanksThatSeeOtherFilesOrCheckpointsStopBeforeTraining) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("views");
    for (const char* host : {"a/data", "b/data", "a/out", "b/out"}) fs::create_directories(w.dir / host);
    for (const char* shard : {"a/data/s1", "a/data/s2", "b/data/s1"}) fs::copy_file(train_data(), w.dir / shard);
    const auto command = [&](const std::string& output_dir) {
        return bertbench_path() + " pretrain --bert_config_file=" + w.out("bert_config.json") +
               " '--input_file=data/s*' --output_dir=" + output_dir +
               " --train_batch_size=4 --num_train_steps=4 --save_checkpoints_steps=2 --nodo_eval --threads=1";
    };
    const auto two_hosts = [&](const std::string& output_dir) {
        std::string prefix = mpirun_prefix(1, 120);
        return run_shell(prefix + "-wdir " + w.out("a") + " " + command(output_dir) + " : -np 1 -wdir " +
                         w.out("b") + " " + command(output_dir));
    };
    // one --output_dir, but a shard missing on host b
    auto r = two_hosts(w.out("shared"));
    EXPECT_NE(r.exit_code, 0) << r.out;
    const std::string size = std::to_string(fs::file_size(train_data())) + " bytes, sampled FNV-1a ";
    EXPECT_NE(r.out.find("rank 1's input files and step resumed from differ from rank 0's: input files data/s2 is "
                         "absent there, \"" + size), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.dir / "shared/train_log.jsonl"));
    // ... or there under the same name and size with another content (one byte of its first record)
    {
        std::string bytes = slurp(train_data());
        bytes[100] = static_cast<char>(bytes[100] ^ 1);
        std::ofstream(w.dir / "b/data/s2", std::ios::binary) << bytes;
    }
    r = two_hosts(w.out("shared"));
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("input files data/s2 is \"" + size), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.dir / "shared/train_log.jsonl"));
    fs::remove(w.dir / "b/data/s2");
    // the same files, but each host its own --output_dir (node-local), one of them with a
    // checkpoint: stopped before the first step, whether or not there is one to resume from
    fs::remove(w.dir / "a/data/s2");
    for (const bool checkpoint : {false, true}) {
        if (checkpoint) {
            ASSERT_EQ(run_shell("cd " + w.out("a") + " && " + command("out") + " --stop_steps=2").exit_code, 0);
        }
        r = two_hosts("out");
        EXPECT_NE(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find("--output_dir=out: rank 1 does not see the directory rank 0 writes to"), std::string::npos)
            << r.out;
        EXPECT_FALSE(fs::exists(w.dir / "b/out/train_log.jsonl"));
        EXPECT_EQ(fs::exists(w.dir / "a/out/train_log.jsonl"), checkpoint);
    }
}

// `bertbench eval` under mpirun: ranks started with other eval flags stop with one error instead
// of all-reducing sums over different sets into one blended figure.
TEST(DistPretrain, SlowEvalRanksWithDifferentFlagsStop) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("evalflags");
    const std::string out = w.out("run");
    ASSERT_EQ(run_shell(bertbench_path() + args(w, out, "--num_train_steps=2 --nodo_eval")).exit_code, 0);
    const std::string eval = bertbench_path() + " eval --init_checkpoint=" + out +
                             "/model.ckpt-2.safetensors --input_file=" + eval_data() +
                             " --eval_batch_size=8 --threads=1 --max_eval_steps=";
    const auto r = run_shell(mpirun_prefix(1, 120) + eval + "2 : -np 1 " + eval + "5");
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("rank 1's checkpoint, eval files, model and eval flags differ from rank 0's: "
                         "--max_eval_steps is 5 there, 2 on rank 0"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("masked_lm_accuracy"), std::string::npos) << r.out;
    // The same eval on both ranks: rank 0 alone logs (the checkpoint it initialised from, once)
    const auto same = run_mpi(2, eval + "2", 120);
    EXPECT_EQ(same.exit_code, 0) << same.out;
    EXPECT_EQ(count_of(same.out, "initialised from "), 1u) << same.out;
}

// One checkpoint name, other weights of the same size on each host: training and eval stop before
// the first step instead of training replicas of no one model (or blending two models' metrics).
TEST(DistPretrain, SlowRanksWithOtherWeightsUnderOneCheckpointNameStop) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("weights");
    for (const char* seed : {"5", "6"}) {  // two runs alike but for the seed: files of one size
        std::string line = bertbench_path() + args(w, w.out(std::string("run") + seed), "--num_train_steps=2 --nodo_eval");
        line.replace(line.find("--seed=5"), 8, std::string("--seed=") + seed);
        ASSERT_EQ(run_shell(line).exit_code, 0);
    }
    fs::create_directories(w.dir / "a");
    fs::create_directories(w.dir / "b");
    // b: a's header (its metadata's run times may print longer or shorter than run6's) before
    // run6's tensors, which lie at the same offsets (one model): a file of a's size, other weights
    const std::string a = slurp(w.out("run5") + "/model.ckpt-2.safetensors"),
                      b = slurp(w.out("run6") + "/model.ckpt-2.safetensors");
    const auto data_at = [](const std::string& f) {
        uint64_t n = 0;
        std::memcpy(&n, f.data(), 8);  // safetensors: the header's length, little-endian
        return 8 + n;
    };
    ASSERT_EQ(a.size() - data_at(a), b.size() - data_at(b));
    std::ofstream(w.dir / "a/init.safetensors", std::ios::binary) << a;
    // with the header's checksum of the data section b's (eight hex digits in either file)
    const auto crc_at = [](const std::string& f) { return f.find("\"data_crc32c\":\"") + 15; };
    ASSERT_LT(crc_at(a) + 8, data_at(a));
    ASSERT_LT(crc_at(b) + 8, data_at(b));
    std::string header = a.substr(0, data_at(a));
    header.replace(crc_at(a), 8, b.substr(crc_at(b), 8));
    std::ofstream(w.dir / "b/init.safetensors", std::ios::binary) << header + b.substr(data_at(b));
    ASSERT_EQ(fs::file_size(w.dir / "a/init.safetensors"), fs::file_size(w.dir / "b/init.safetensors"));
    ASSERT_NE(slurp(w.out("a/init.safetensors")), slurp(w.out("b/init.safetensors")));
    const auto two_hosts = [&](const std::string& command) {
        return run_shell(mpirun_prefix(1, 120) + "-wdir " + w.out("a") + " " + command + " : -np 1 -wdir " +
                         w.out("b") + " " + command);
    };
    auto r = two_hosts(bertbench_path() + args(w, w.out("again"), "--num_train_steps=2 --nodo_eval") +
                       " --init_checkpoint=init.safetensors");
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("the weights' FNV-1a hash at the start (from init.safetensors) of rank 1 differs from "
                         "rank 0's"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.out("again") + "/train_log.jsonl"));
    r = two_hosts(bertbench_path() + " eval --init_checkpoint=init.safetensors --input_file=" + eval_data() +
                  " --eval_batch_size=8 --max_eval_steps=2 --threads=1");
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("rank 1's checkpoint, eval files, model and eval flags differ from rank 0's: its weights "
                         "(FNV-1a) is \""), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("masked_lm_accuracy"), std::string::npos) << r.out;
    // The same weights, each rank with its own --threads (Intel's launcher splits a node's cores
    // unevenly): it trains, the replicas equal (the checkpoint's check).
    fs::copy_file(w.dir / "a/init.safetensors", w.dir / "b/init.safetensors", fs::copy_options::overwrite_existing);
    std::string one = bertbench_path() + args(w, w.out("threads"), "--num_train_steps=2 --nodo_eval") +
                      " --init_checkpoint=init.safetensors";
    std::string two = one;
    two.replace(two.find("--threads=1"), 11, "--threads=2");
    std::string prefix = mpirun_prefix(1, 120);  // unbound, so that a rank may run 2 threads
    prefix.replace(prefix.find(" -np 1 "), 7, " --bind-to none -np 1 ");
    r = run_shell(prefix + "-wdir " + w.out("a") + " " + one + " : -np 1 -wdir " + w.out("b") + " " + two);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(fs::exists(w.out("threads") + "/model.ckpt-2.safetensors")) << r.out;
}

TEST(DistPretrain, SlowSigtermToMpirunCheckpointsOnceAndEveryRankExitsInterrupted) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("term");
    const std::string out = w.out("run");
    std::string prefix = mpirun_prefix(2, 300);
    prefix = prefix.substr(prefix.find("mpirun"));
    const pid_t mpirun = spawn_mpirun(
        prefix + bertbench_path() + args(w, out, "--num_train_steps=100000 --nodo_eval"),
        w.out("log"));
    // training has started (a first line in train_log.jsonl): SIGTERM to mpirun, which forwards it
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
    while (slurp(out + "/train_log.jsonl").empty() && std::chrono::steady_clock::now() < deadline &&
           waitpid(mpirun, nullptr, WNOHANG) == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // poll interval, not a sync
    ASSERT_EQ(kill(mpirun, SIGTERM), 0);
    const int status = wait_until(mpirun, std::chrono::steady_clock::now() + std::chrono::seconds(60));
    if (status < 0) kill(mpirun, SIGKILL), waitpid(mpirun, nullptr, 0);
    const std::string log = slurp(w.out("log"));
    ASSERT_GE(status, 0) << "hung after SIGTERM:\n" << log;
    EXPECT_NE(status, 0) << log;
    // rank 0 checkpointed once, at the step every rank stopped after; the ranks exited 143
    EXPECT_EQ(count_of(log, "stopped by signal 15 after step"), 1u) << log;
    EXPECT_NE(log.find("Exit status 143"), std::string::npos) << log;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["status"], "interrupted");
    const int64_t step = res["global_step"].get<int64_t>();
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-" + std::to_string(step) + ".safetensors"));
    EXPECT_EQ(read_jsonl(out + "/train_log.jsonl").back()["step"], step);
}

TEST(DistPretrain, SlowRanksWithDifferentFlagsOrAnIndivisibleBatchStopBeforeTraining) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("flags");
    // MPMD: rank 0 and rank 1 get different --num_train_steps
    std::string prefix = mpirun_prefix(1, 120);
    const std::string cmd = prefix + bertbench_path() + args(w, w.out("r"), "--num_train_steps=4") +
                            " : -np 1 " + bertbench_path() +
                            args(w, w.out("r"), "--num_train_steps=5");
    const auto r = run_shell(cmd);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.exit_code, 124) << "hung:\n" << r.out;
    EXPECT_NE(r.out.find("rank 1's flags and model config differ from rank 0's: --num_train_steps is 5 there, "
                         "4 on rank 0"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.out("r") + "/train_log.jsonl"));
    // a flag given on one rank is named beside the settings derived from it (--clip_norm here)
    const auto opt = run_shell(prefix + bertbench_path() + args(w, w.out("o"), "--num_train_steps=4") + " : -np 1 " +
                               bertbench_path() + args(w, w.out("o"), "--num_train_steps=4 --optimizer=adamw"));
    EXPECT_NE(opt.exit_code, 0) << opt.out;
    EXPECT_NE(opt.out.find("--optimizer is \"adamw\" there, \"lamb\" on rank 0"), std::string::npos) << opt.out;

    const auto odd = run_mpi(
        2, bertbench_path() + args(w, w.out("odd"), "--num_train_steps=4 --train_batch_size=3"),
        120);
    EXPECT_NE(odd.exit_code, 0) << odd.out;
    EXPECT_NE(odd.exit_code, 124) << "hung:\n" << odd.out;
    EXPECT_NE(odd.out.find("--train_batch_size: 3 is the GLOBAL batch, split over 2 ranks"), std::string::npos)
        << odd.out;
    // PerfZero's line: the batch per update, in its units (it once said "5 is the GLOBAL batch"
    // of a --train_batch_size=10, with a hint that failed again)
    const auto perfzero = run_mpi(
        2, bertbench_path() + args(w, w.out("pz"), "--num_train_steps=4 --train_batch_size=10 --num_accumulation_steps=2"),
        120);
    EXPECT_NE(perfzero.exit_code, 0) << perfzero.out;
    EXPECT_NE(perfzero.out.find("--train_batch_size=10: expected a multiple of --num_accumulation_steps=2 x 2 ranks "
                                "= 4 (PerfZero: the global batch, split into that many micro-batches, each split "
                                "over the ranks) (hint: --train_batch_size=12)"),
              std::string::npos) << perfzero.out;
}

// A flag every rank refuses is one error line for the job (rank 0's, without a rank), not one per
// rank with OpenMPI's "1 more process has sent help message" after them; a flag one rank alone
// refuses names that rank. Nothing is created either way.
TEST(DistPretrain, SlowARefusedFlagIsOneErrorLine) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const Workdir w("refused");
    const auto all = run_mpi(2, bertbench_path() + args(w, w.out("r"), "--bogus=1"), 120);
    EXPECT_EQ(all.exit_code, 1) << all.out;
    EXPECT_EQ(count_of(all.out, "error: "), 1u) << all.out;
    EXPECT_NE(all.out.find("bertbench pretrain: error: unknown flag --bogus\n"), std::string::npos)
        << all.out;
    EXPECT_EQ(all.out.find("more process"), std::string::npos) << all.out;
    EXPECT_FALSE(fs::exists(w.out("r")));

    // MPMD: rank 1 alone has the bad flag.
    const std::string cmd = mpirun_prefix(1, 120) + bertbench_path() +
                            args(w, w.out("s"), "--num_train_steps=2") + " : -np 1 " +
                            bertbench_path() + args(w, w.out("s"), "--num_train_steps=2 --bogus=2");
    const auto one = run_shell(cmd);
    EXPECT_NE(one.exit_code, 0) << one.out;
    EXPECT_NE(one.exit_code, 124) << "hung:\n" << one.out;
    EXPECT_EQ(count_of(one.out, "error: "), 1u) << one.out;
    EXPECT_NE(one.out.find("bertbench pretrain: error: rank 1: unknown flag --bogus\n"),
              std::string::npos) << one.out;

    // An input every rank finds empty (the check of the data before the first step): one error,
    // without a rank, as one process says it.
    std::ofstream(w.out("empty.tfrecord")).close();
    std::string empty = args(w, w.out("t"), "--num_train_steps=2");
    empty.replace(empty.find(train_data()), train_data().size(), w.out("empty.tfrecord"));
    const auto same = run_mpi(2, bertbench_path() + empty, 120);
    EXPECT_EQ(same.exit_code, 1) << same.out;
    EXPECT_EQ(count_of(same.out, "error: "), 1u) << same.out;
    EXPECT_NE(same.out.find("bertbench pretrain: error: --input_file: expected records, got none"),
              std::string::npos) << same.out;

    // --threads beyond the one core OpenMPI binds each of 2 ranks to by default: the binding is
    // named with the flags that lift it (it said only "expected 1..1")
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2) return;  // one core: no binding narrower than the machine
    const auto bound =
        run_mpi(2, bertbench_path() + args(w, w.out("u"), "--num_train_steps=2 --threads=" + std::to_string(cpus)), 120);
    EXPECT_EQ(bound.exit_code, 1) << bound.out;
    EXPECT_NE(bound.out.find("error: --threads=" + std::to_string(cpus) + ": expected 1..1 (CPUs available to this "
                             "process; mpirun bound this rank to 1 of the machine's " + std::to_string(cpus) +
                             " CPUs (hint: mpirun --bind-to none"),
              std::string::npos)
        << bound.out;
}

}  // namespace
