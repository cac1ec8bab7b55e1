// `bertbench pretrain` / `bertbench eval` end to end, running the real binary ($BB_BERTBENCH) on the
// golden MLPerf-schema records with a tiny model (L2 H64 A2 I128): a run killed with SIGKILL after
// a checkpoint and resumed logs bit-identical losses to an uninterrupted run (with gradient
// accumulation and online eval); SIGTERM checkpoints and exits 143; bad inputs are one-line errors
// with a non-zero exit and no partial files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../cli/run_util.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint.hpp"
#include "test_util.hpp"

namespace bertbench::train {
namespace {
namespace fs = std::filesystem;
using bertbench::testing::eval_lines;
using bertbench::testing::read_jsonl;
using bertbench::testing::run_bertbench;
using bertbench::testing::shared_dir;
using bertbench::testing::slurp;
using bertbench::testing::spawn_bertbench;
using bertbench::testing::train_lines;
using bertbench::testing::wait_for_file;
using bertbench::testing::wait_for_text;
using nlohmann::json;

std::string train_data() { return shared_dir() + "/golden/pretraining/public_128_s12345_d2.tfrecord"; }
std::string eval_data() { return shared_dir() + "/golden/eval_pick/public_128_eval100.tfrecord"; }

// A fresh directory with a tiny bert_config.json in it.
struct Workdir {
    fs::path dir;
    explicit Workdir(const std::string& name) {
        dir = fs::temp_directory_path() / ("bb_pretrain_" + name + "_" + std::to_string(getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128,
                  "max_position_embeddings": 512, "type_vocab_size": 2})";
    }
    ~Workdir() { fs::remove_all(dir); }
    std::string config() const { return (dir / "bert_config.json").string(); }
    std::string out(const std::string& name) const { return (dir / name).string(); }
};

std::vector<std::string> base_args(const Workdir& w, const std::string& out) {
    return {"pretrain", "--bert_config_file=" + w.config(), "--input_file=" + train_data(),
            "--eval_input_file=" + eval_data(), "--output_dir=" + out, "--train_batch_size=4",
            "--steps_per_update=2", "--num_train_steps=16", "--num_warmup_steps=4",
            "--learning_rate=2e-3", "--save_checkpoints_steps=4", "--keep_checkpoint_max=2",
            "--eval_every_samples=24", "--max_eval_steps=2", "--eval_batch_size=8",
            "--threads=1", "--seed=5"};
}

std::string join(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += "'" + a + "' ";
    return s;
}

bool has_temp_files(const std::string& dir) {
    if (!fs::exists(dir)) return false;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    return false;
}

TEST(PretrainE2E, KilledAndResumedIsBitIdenticalSlow) {
    const Workdir w("resume");
    const std::string a = w.out("a"), b = w.out("b");
    const auto ra = run_bertbench(join(base_args(w, a)));
    ASSERT_EQ(ra.exit_code, 0) << ra.out;
    const std::vector<std::string> want = train_lines(a);
    ASSERT_EQ(want.size(), 8u);  // 16 micro-steps / 2 per update

    // Kill b (SIGKILL) as soon as its first checkpoint (micro-step 4) is on disk.
    const pid_t pid = spawn_bertbench(base_args(w, b), w.out("b1.log"));
    ASSERT_TRUE(wait_for_file(b + "/model.ckpt-4.safetensors", pid)) << slurp(w.out("b1.log"));
    const bool killed = kill(pid, SIGKILL) == 0;
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(killed && WIFSIGNALED(status))
        << "the run ended before it could be killed:\n" << slurp(w.out("b1.log"));
    EXPECT_LT(train_lines(b).size(), want.size());
    // What the killed process may have logged after its checkpoint (at 16 samples): a's
    // evaluation at 24 samples, which the resumed run logs again.
    {
        std::istringstream in(slurp(a + "/mlperf.log"));
        std::ofstream log(b + "/mlperf.log", std::ios::app);
        for (std::string line; std::getline(in, line);)
            if (line.find("\"epoch_num\": 24") != std::string::npos && line.find("\"eval_") != std::string::npos)
                log << line << '\n';
    }

    const auto rb = run_bertbench(join(base_args(w, b)));
    ASSERT_EQ(rb.exit_code, 0) << rb.out;
    EXPECT_NE(rb.out.find("resuming from"), std::string::npos) << rb.out;
    EXPECT_NE(rb.out.find("mlperf.log: cut back to its"), std::string::npos) << rb.out;
    const std::vector<std::string> got = train_lines(b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "update " << i + 1;
    EXPECT_EQ(eval_lines(b), eval_lines(a));
    EXPECT_EQ(eval_lines(a).size(), 3u);  // at 24 and 48 samples, and at the end (64)

    // Outputs a person and the MLPerf checker read.
    const json res = json::parse(slurp(a + "/results.json"));
    EXPECT_EQ(res["status"], "target not reached");
    EXPECT_EQ(res["global_step"], 16);
    EXPECT_EQ(res["updates"], 8);
    EXPECT_GT(res["train_sequences_per_second"].get<double>(), 0);
    const std::string ml = slurp(a + "/mlperf.log");
    for (const char* key : {"\"init_start\"", "\"run_start\"", "\"block_start\"", "\"eval_accuracy\"",
                            "\"run_stop\"", "\"global_batch_size\", \"value\": 8"})
        EXPECT_NE(ml.find(key), std::string::npos) << key;
    EXPECT_NE(slurp(a + "/curves.svg").find("</svg>"), std::string::npos);
    // b's log, killed and resumed, holds a's events in the same order (their times and source
    // lines aside), each evaluation once, and one more: where its second process resumed (at the
    // checkpoint's 16 samples), which scripts/mlperf_log_check.py fails (MLPerf times one
    // uninterrupted process) and a's log passes.
    const auto events = [](const std::string& path) {
        std::vector<json> e;
        std::istringstream in(slurp(path));
        for (std::string line; std::getline(in, line);) {
            json j = json::parse(line.substr(line.find('{')));
            j.erase("time_ms");
            j["metadata"].erase("file");
            j["metadata"].erase("lineno");
            e.push_back(j);
        }
        return e;
    };
    const std::vector<json> ea = events(a + "/mlperf.log");
    std::vector<json> eb = events(b + "/mlperf.log");
    const auto resume = std::find_if(eb.begin(), eb.end(), [](const json& e) { return e["key"] == "bertbench_resume"; });
    ASSERT_NE(resume, eb.end()) << slurp(b + "/mlperf.log");
    EXPECT_EQ((*resume)["value"], 16);
    EXPECT_EQ((*resume)["metadata"]["step"], 4);
    eb.erase(resume);
    ASSERT_EQ(eb.size(), ea.size()) << slurp(b + "/mlperf.log");
    for (size_t i = 0; i < ea.size(); ++i) EXPECT_EQ(eb[i], ea[i]) << "event " << i;
    const auto ca = bertbench::testing::check_mlperf_log(a + "/mlperf.log", "--division=open");
    EXPECT_EQ(ca.exit_code, 0) << ca.out;
    const auto cb = bertbench::testing::check_mlperf_log(b + "/mlperf.log", "--division=open");
    EXPECT_EQ(cb.exit_code, 1) << cb.out;
    EXPECT_NE(cb.out.find("bertbench_resume: a new process resumed the run here (at 16 samples)"), std::string::npos)
        << cb.out;
    // keep_checkpoint_max=2: only the last two of 4, 8, 12, 16 remain.
    EXPECT_FALSE(fs::exists(a + "/model.ckpt-8.safetensors"));
    EXPECT_TRUE(fs::exists(a + "/model.ckpt-12.safetensors"));
    EXPECT_TRUE(fs::exists(a + "/model.ckpt-16.safetensors"));
    EXPECT_FALSE(has_temp_files(a));
    EXPECT_FALSE(has_temp_files(b));

    // Offline eval of the final checkpoint equals the run's last online eval.
    const auto re = run_bertbench("eval --init_checkpoint=" + a + "/model.ckpt-16.safetensors "
                                  "--input_file=" + eval_data() +
                                  " --eval_batch_size=8 --max_eval_steps=2 --threads=1 --json=" +
                                  w.out("eval.json"));
    ASSERT_EQ(re.exit_code, 0) << re.out;
    const json ej = json::parse(slurp(w.out("eval.json")));
    const json last = json::parse(eval_lines(a).back());
    EXPECT_EQ(ej["masked_lm_accuracy"], last["masked_lm_accuracy"]);
    EXPECT_EQ(ej["masked_lm_loss"], last["masked_lm_loss"]);
    EXPECT_EQ(ej["examples"], 16);

    // Running the finished command again does nothing.
    const auto again = run_bertbench(join(base_args(w, a)));
    EXPECT_EQ(again.exit_code, 0);
    EXPECT_NE(again.out.find("already finished"), std::string::npos) << again.out;
}

// A hex signal-set field ("SigBlk:", "SigCgt:") of /proc/<pid>/task/<tid>/status.
uint64_t signal_set(const std::string& status_file, const std::string& field) {
    std::istringstream in(slurp(status_file));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size()), nullptr, 16);
    ADD_FAILURE() << field << " not in " << status_file;
    return 0;
}

TEST(PretrainE2E, SigtermCheckpointsAndExits143) {
    const Workdir w("sigterm");
    const std::string out = w.out("run");
    std::vector<std::string> args = base_args(w, out);
    args.push_back("--num_train_steps=100000");
    args.push_back("--nodo_eval");
    args.push_back("--threads=0");  // all CPUs: libgomp's worker threads exist too
    const pid_t pid = spawn_bertbench(args, w.out("log"));
    ASSERT_TRUE(wait_for_file(out + "/model.ckpt-4.safetensors", pid)) << slurp(w.out("log"));

    // No thread of the run may take SIGINT/SIGTERM through a handler (a handler's frame on a
    // thread inside oneDNN's sgemm corrupts the heap): none is caught, and every thread blocks
    // both except the watcher while it sits in sigwait (the kernel unblocks the waited set then).
    const uint64_t stop_bits = (uint64_t{1} << (SIGINT - 1)) | (uint64_t{1} << (SIGTERM - 1));
    const std::string proc = "/proc/" + std::to_string(pid);
    EXPECT_EQ(signal_set(proc + "/status", "SigCgt:") & stop_bits, 0u);
    int threads = 0, waiting = 0;
    for (const auto& task : fs::directory_iterator(proc + "/task")) {
        const std::string dir = task.path().string();
        ++threads;
        const bool in_sigwait = slurp(dir + "/wchan").find("sigtimedwait") != std::string::npos ||
                                slurp(dir + "/syscall").rfind("128 ", 0) == 0;  // x86-64 number
        if (in_sigwait) {
            ++waiting;
            continue;
        }
        EXPECT_EQ(signal_set(dir + "/status", "SigBlk:") & stop_bits, stop_bits)
            << "thread " << task.path().filename();
    }
    EXPECT_EQ(waiting, 1);
    EXPECT_GE(threads, 3);  // main, signal watcher, reader (+ libgomp workers with 2+ CPUs)

    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string log = slurp(w.out("log"));
    ASSERT_TRUE(WIFEXITED(status)) << log;
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << log;  // interrupted, not finished
    EXPECT_NE(log.find("stopping after this optimizer update"), std::string::npos) << log;
    EXPECT_NE(log.find("Resume by running the same command again"), std::string::npos) << log;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["status"], "interrupted");
    const int64_t step = res["global_step"].get<int64_t>();
    EXPECT_GE(step, 4);
    const std::string ckpt = out + "/model.ckpt-" + std::to_string(step) + ".safetensors";
    ASSERT_TRUE(fs::exists(ckpt));
    EXPECT_FALSE(has_temp_files(out));
    // The run's time is taken when it stopped, before its checkpoint was written; the
    // checkpoint carries the same figure on to the resumed segment.
    const json st = json::parse(io::SafetensorsReader(ckpt).metadata().at("train_state"));
    EXPECT_EQ(res["wall_time_s"], st["elapsed_s"]);
}

// A stop signal that arrives during an evaluation ends the run as soon as that evaluation is
// done, at its step, not one optimizer update later (which for BERT-large on a CPU is minutes).
// The evaluation runs the 100-record eval set 60 times over (6,000 sequences, seconds on one
// thread); the signal goes when mlperf.log (flushed per line) has its eval_start.
TEST(PretrainE2E, SignalDuringEvaluationStopsAfterItSlow) {
    const Workdir w("sigeval");
    const std::string out = w.out("run");
    std::vector<std::string> args = base_args(w, out);
    const std::string one = eval_data();
    std::string evals = one;
    for (int i = 1; i < 60; ++i) evals.append(1, ',').append(one);
    for (const std::string& extra : std::vector<std::string>{"--num_train_steps=1000", "--eval_every_samples=8",
                                                             "--max_eval_steps=0", "--eval_batch_size=32",
                                                             "--eval_input_file=" + evals})
        args.push_back(extra);
    const pid_t pid = spawn_bertbench(args, w.out("log"));
    ASSERT_TRUE(wait_for_text(out + "/mlperf.log", "\"key\": \"eval_start\"", pid)) << slurp(w.out("log"));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    // and once more from this process as soon as it took the first, as timeout(1) signals the
    // command and its process group: the same request, not a second one that kills the run
    ASSERT_TRUE(wait_for_text(w.out("log"), "stopping after this optimizer update", pid)) << slurp(w.out("log"));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string log = slurp(w.out("log"));
    ASSERT_TRUE(WIFEXITED(status)) << log;
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << log;
    EXPECT_NE(log.find("again from process " + std::to_string(getpid()) + " within a second: the same stop request"),
              std::string::npos) << log;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["status"], "interrupted");
    // The first evaluation is due after the first update (8 samples, global step 2); it completed
    // and was logged, and the run stopped there with its checkpoint.
    EXPECT_EQ(res["global_step"], 2) << log;
    const auto evals_logged = read_jsonl(out + "/eval_log.jsonl");
    ASSERT_EQ(evals_logged.size(), 1u) << log;
    EXPECT_EQ(evals_logged[0]["step"], 2);
    EXPECT_EQ(evals_logged[0]["examples"], 6000);
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-2.safetensors")) << log;
    // the block the run had opened for its next evaluation is closed: the resumed process opens
    // its own (as after a --stop_steps pause)
    const std::string ml = slurp(out + "/mlperf.log");
    EXPECT_EQ(testing::count_of(ml, "\"key\": \"block_start\""), testing::count_of(ml, "\"key\": \"block_stop\"")) << ml;
    EXPECT_EQ(testing::count_of(ml, "\"key\": \"run_stop\""), 0u) << ml;
    // An evaluation that ran past 5 s showed its progress (on a fast machine it may not have).
    if (evals_logged[0]["eval_seconds"].get<double>() > 5.5) {
        EXPECT_NE(log.find("evaluating: "), std::string::npos) << log;
    }
}

// A run paused mid-block (--stop_steps) and resumed: each block_start's epoch_count is the
// samples its block runs, the resumed one's to the next evaluation (not a whole interval).
TEST(PretrainE2E, ResumedBlockCountsToTheNextEvaluation) {
    const Workdir w("block");
    const std::string out = w.out("run");
    std::vector<std::string> args = base_args(w, out);  // 8 samples an update, evaluations at 24, 48
    ASSERT_EQ(run_bertbench(join(args) + " --stop_steps=1").exit_code, 0);  // paused at 8 samples
    const auto r = run_bertbench(join(args));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::vector<std::pair<int64_t, int64_t>> blocks;
    std::istringstream in(slurp(out + "/mlperf.log"));
    for (std::string line; std::getline(in, line);) {
        const size_t at = line.find(":::MLLOG ");
        if (at == std::string::npos) continue;
        const json e = json::parse(line.substr(at + 9));
        if (e["key"] == "block_start")
            blocks.emplace_back(e["metadata"]["first_epoch_num"].get<int64_t>(),
                                e["metadata"]["epoch_count"].get<int64_t>());
    }
    EXPECT_EQ(blocks, (std::vector<std::pair<int64_t, int64_t>>{{0, 24}, {8, 16}, {24, 24}, {48, 24}}));
}

TEST(PretrainE2E, NonFiniteLossStopsWithStepAndCheckpoint) {
    const Workdir w("nan");
    std::vector<std::string> args = base_args(w, w.out("run"));
    for (const char* extra : {"--learning_rate=1e30", "--steps_per_update=1", "--num_warmup_steps=0",
                              "--save_checkpoints_steps=1", "--nodo_eval"})
        args.push_back(extra);
    const auto r = run_bertbench(join(args));
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("expected finite"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("last good checkpoint: "), std::string::npos) << r.out;
    // the failing step is named as train_log.jsonl would have numbered it: one past its last line
    const auto logged = read_jsonl(w.out("run") + "/train_log.jsonl");
    const int64_t last_logged = logged.empty() ? 0 : logged.back()["step"].get<int64_t>();
    EXPECT_NE(r.out.find("error: step " + std::to_string(last_logged + 1) + ": "), std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(w.out("run") + "/results.json"))["status"], "aborted");
    EXPECT_FALSE(has_temp_files(w.out("run")));

    // Continued after the error, at a lower rate: the aborted run_stop came after the last
    // checkpoint and is cut back with the rest, so mlperf.log holds one run_stop (this segment's).
    std::vector<std::string> more = base_args(w, w.out("run"));
    for (const char* extra : {"--learning_rate=2e-3", "--steps_per_update=1", "--num_warmup_steps=0",
                              "--save_checkpoints_steps=1", "--nodo_eval", "--allow_changed_flags"})
        more.push_back(extra);
    const auto c = run_bertbench(join(more));
    EXPECT_NE(c.out.find("mlperf.log: cut back to its"), std::string::npos) << c.out;
    const std::string continued = slurp(w.out("run") + "/mlperf.log");
    EXPECT_EQ(testing::count_of(continued, "\"key\": \"run_stop\""), 1u) << c.out;
    // the changed rate logged again where the run resumed; the unchanged keys once
    EXPECT_EQ(testing::count_of(continued, "\"key\": \"opt_base_learning_rate\""), 2u) << continued;
    EXPECT_NE(continued.find("\"key\": \"opt_base_learning_rate\", \"value\": 0.002,"), std::string::npos) << continued;
    EXPECT_EQ(testing::count_of(continued, "\"key\": \"opt_lamb_epsilon\""), 1u) << continued;

    // With --skip_nonfinite_steps the run finishes and counts the skipped steps; each skip's
    // warning names the step of train_log.jsonl's line for it (loss null).
    args.push_back("--skip_nonfinite_steps");
    args.push_back("--num_train_steps=6");
    const auto s = run_bertbench(join(args) + " --output_dir=" + w.out("skip"));
    EXPECT_EQ(s.exit_code, 0) << s.out;
    const int64_t skipped = json::parse(slurp(w.out("skip") + "/results.json"))["skipped_nonfinite_steps"].get<int64_t>();
    EXPECT_GT(skipped, 0);
    int64_t null_lines = 0;
    for (const json& line : read_jsonl(w.out("skip") + "/train_log.jsonl")) {
        if (!line["loss"].is_null()) continue;
        ++null_lines;
        EXPECT_NE(s.out.find("step " + std::to_string(line["step"].get<int64_t>()) + ": "), std::string::npos)
            << line.dump() << "\n" << s.out;
    }
    EXPECT_EQ(null_lines, skipped);
    // A diverged model (every step after the first non-finite) is not skipped to the end: the
    // limit of non-finite micro-steps in a row stops it with the error.
    const auto d = run_bertbench(join(args) + " --output_dir=" + w.out("limit") + " --skip_nonfinite_limit=2");
    EXPECT_EQ(d.exit_code, 1) << d.out;
    EXPECT_NE(d.out.find("(expected finite), 2 micro-steps in a row (--skip_nonfinite_limit=2: the model diverged)"),
              std::string::npos) << d.out;
    EXPECT_EQ(json::parse(slurp(w.out("limit") + "/results.json"))["status"], "aborted");
    const auto n = run_bertbench(join(args) + " --output_dir=" + w.out("neg") + " --skip_nonfinite_limit=-1");
    EXPECT_NE(n.out.find("error: --skip_nonfinite_limit: expected >= 0 (0 = no limit), got -1"), std::string::npos)
        << n.out;
}

// A bad input: non-zero exit, one "error:" line containing `want`, no temp files left.
void expect_bad(const Workdir& w, std::vector<std::string> extra, const std::string& want) {
    std::vector<std::string> args = base_args(w, w.out("bad"));
    for (auto& e : extra) args.push_back(std::move(e));
    const auto r = run_bertbench(join(args));
    EXPECT_NE(r.exit_code, 0) << r.out;
    const size_t at = r.out.find("error: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find(want), std::string::npos) << "want \"" << want << "\" in: " << line;
    EXPECT_FALSE(has_temp_files(w.out("bad")));
    EXPECT_FALSE(fs::exists(w.out("bad") + "/results.json"));
}

TEST(PretrainE2E, BadInputsAreOneLineErrors) {
    const Workdir w("bad");
    expect_bad(w, {"--bert_config_file=" + w.out("missing.json")}, "missing.json");
    std::ofstream(w.out("broken.json")) << "{\"hidden_size\": ";
    expect_bad(w, {"--bert_config_file=" + w.out("broken.json")}, "broken.json");
    expect_bad(w, {"--input_file=" + w.out("nothing*.tfrecord")}, "input_file");
    expect_bad(w, {"--max_seq_length=64"}, "64");
    expect_bad(w, {"--learning_rate=1e39"}, "--learning_rate: expected 0 .. 3.40282e+38 (the optimizer's float)");
    std::ofstream(w.out("garbage.safetensors")) << "this is not a safetensors file";
    expect_bad(w, {"--init_checkpoint=" + w.out("garbage.safetensors")}, "garbage.safetensors");
    expect_bad(w, {"--init_checkpoint=" + w.out("absent.safetensors")}, "absent.safetensors");
    expect_bad(w, {"--optimizer=sgd"}, "sgd");
    expect_bad(w, {"--train_batch_sise=4"}, "train_batch_size");  // did you mean

    // A checkpoint of another shape (H32 instead of H64): the differing field is named.
    model::BertConfig other = model::BertConfig::from_json_file(w.config());
    other.hidden_size = 32;
    const model::ParamTable table(other, model::Heads::pretraining);
    std::vector<float> params(table.total_floats(), 0.0f);
    model::save_checkpoint(w.out("h32.safetensors"), table, params);
    expect_bad(w, {"--init_checkpoint=" + w.out("h32.safetensors")}, "hidden_size");

    const auto e = run_bertbench("eval --init_checkpoint=" + w.out("h32.safetensors") +
                                 " --input_file=" + w.out("none*.tfrecord"));
    EXPECT_NE(e.exit_code, 0);
    EXPECT_NE(e.out.find("input_file"), std::string::npos) << e.out;
}


TEST(PretrainE2E, InitFromHuggingFaceSafetensors) {
    const Workdir w("hf");
    // A partial HF BertForPreTraining file: word embeddings (all 0.5) and the MLM output bias.
    std::vector<float> emb(30522 * 64, 0.5f), bias(30522, 0.0f);
    {
        io::SafetensorsWriter hf(w.out("model.safetensors"));
        hf.add("bert.embeddings.word_embeddings.weight", io::DType::F32, {30522, 64}, emb.data(),
               emb.size() * sizeof(float));
        hf.add("cls.predictions.bias", io::DType::F32, {30522}, bias.data(),
               bias.size() * sizeof(float));
        hf.write();
    }
    std::vector<std::string> args = base_args(w, w.out("run"));
    for (const char* extra : {"--nodo_train", "--do_eval", "--max_eval_steps=1"})
        args.push_back(extra);
    args.push_back("--init_checkpoint=" + w.out("model.safetensors"));
    // Without being asked, evaluating weights the file lacks is an error naming the first.
    const auto refused = run_bertbench(join(args));
    EXPECT_NE(refused.exit_code, 0) << refused.out;
    EXPECT_NE(refused.out.find("44 of the model's 46 tensors are not in it (first: "
                               "bert/embeddings/token_type_embeddings)"),
              std::string::npos)
        << refused.out;
    args.push_back("--allow_missing_weights");
    const auto r = run_bertbench(join(args));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("initialised from Hugging Face file"), std::string::npos) << r.out;
    // Every vocabulary row is identical (and the bias 0), so all logits are equal up to rounding:
    // the masked-LM loss is log(V) = log(30522) = 10.3261...
    // The eval-only form writes its own eval_results.json (not the training run's logs).
    const json ev = json::parse(bertbench::testing::slurp(w.out("run") + "/eval_results.json"));
    EXPECT_NEAR(ev["masked_lm_loss"].get<double>(), std::log(30522.0), 1e-3);

    // A wrongly shaped HF tensor is an error naming it.
    {
        io::SafetensorsWriter hf(w.out("bad.safetensors"));
        hf.add("bert.embeddings.word_embeddings.weight", io::DType::F32, {30522, 32}, emb.data(),
               30522 * 32 * sizeof(float));
        hf.write();
    }
    args.back() = "--init_checkpoint=" + w.out("bad.safetensors");
    args.push_back("--output_dir=" + w.out("run2"));
    const auto b = run_bertbench(join(args));
    EXPECT_NE(b.exit_code, 0) << b.out;
    EXPECT_NE(b.out.find("word_embeddings"), std::string::npos) << b.out;
}

// --allow_missing_weights holds for every format: our safetensors and a TF checkpoint lacking one
// weight are refused without it (naming it) and evaluated with it.
TEST(PretrainE2E, AllowMissingWeightsTakesEveryFormat) {
    const Workdir w("missing");
    const model::ParamTable table(model::BertConfig::from_json_file(w.config()), model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 3);
    const std::string dropped = "bert/encoder/layer_1/output/LayerNorm/gamma";
    {
        io::SafetensorsWriter out(w.out("missing.safetensors"));
        out.set_metadata("format", "bertbench");
        for (const model::ParamInfo& p : table.entries()) {
            if (p.name == dropped) continue;
            const auto v = table.view(std::span<const float>(params), p.name);
            out.add(p.name, io::DType::F32, p.shape, v.data(), v.size() * sizeof(float));
        }
        out.write();
    }
    ASSERT_EQ(run_bertbench("convert --input=" + w.out("missing.safetensors") + " --output=" + w.out("tf/model.ckpt-1"))
                  .exit_code, 0);
    for (const std::string& ckpt : {w.out("missing.safetensors"), w.out("tf/model.ckpt-1")}) {
        const std::string cmd = "eval --init_checkpoint=" + ckpt + " --bert_config_file=" + w.config() +
                                " --input_file=" + eval_data() +
                                " --max_eval_steps=1 --threads=1";
        const auto refused = run_bertbench(cmd);
        EXPECT_EQ(refused.exit_code, 1) << refused.out;
        EXPECT_NE(refused.out.find("1 of the model's 46 tensors are not in it (first: " + dropped + ")"),
                  std::string::npos) << refused.out;
        const auto allowed = run_bertbench(cmd + " --allow_missing_weights");
        EXPECT_EQ(allowed.exit_code, 0) << allowed.out;
        EXPECT_NE(allowed.out.find("masked_lm_accuracy"), std::string::npos) << allowed.out;
    }
}

}  // namespace
}  // namespace bertbench::train
