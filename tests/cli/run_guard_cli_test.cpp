// A run never costs its inputs or another run's files, on the real binary: a report or summary
// path that is one of the run's inputs is refused before the work (bench's --json over its --data,
// pretrain's --json-summary over its records); a second run in an --output_dir in use is refused
// while the first goes on, and a directory where it writes a file before the first step; a bert_config.json edited in place is a changed flag on resume; an
// epsilon that fp32 cannot hold, an empty or repeated --mode and a value-less flag followed by
// another flag are one-line errors.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::bertbench_path;
using testing::golden;
using testing::run_bertbench;
using testing::slurp;

struct GuardDir {
    testing::TmpDir tmp;
    const fs::path& dir = tmp.path;
    explicit GuardDir(const std::string& name) : tmp("bb_guard_" + name) {
        config(0.0);
        fs::copy_file(golden("pretraining/public_128_s12345_d2.tfrecord"), dir / "t.tfrecord");
    }
    void config(double dropout) const {
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "intermediate_size": 64, "max_position_embeddings": 512, "type_vocab_size": 2,
                  "hidden_dropout_prob": )"
            << dropout << "}";
    }
    std::string p(const std::string& name) const { return tmp.file(name); }
    std::string pretrain(const std::string& out, int steps) const {
        return "pretrain --bert_config_file=" + p("bert_config.json") +
               " --input_file=" + p("t.tfrecord") + " --output_dir=" + out +
               " --train_batch_size=4 --num_train_steps=" + std::to_string(steps) +
               " --num_warmup_steps=1 --learning_rate=1e-3 --save_checkpoints_steps=2"
               " --nodo_eval --threads=1";
    }
};

std::string error_of_run(const testing::RunResult& r) {
    const size_t at = r.out.find("error: ");
    return at == std::string::npos ? "" : r.out.substr(at, r.out.find('\n', at) - at);
}

TEST(RunGuardCli, ReportsNeverOverwriteTheRunsInputs) {
    const GuardDir w("inputs");
    const std::string data = slurp(w.p("t.tfrecord"));
    const auto b =
        run_bertbench("bench --threads=1 --bert_config_file=" + w.p("bert_config.json") +
                      " --mode=infer --steps=2 --warmup=1 --noceiling --data=" + w.p("t.tfrecord") +
                      " --json=" + w.p("t.tfrecord"));
    EXPECT_EQ(b.exit_code, 1) << b.out;
    EXPECT_NE(error_of_run(b).find("--json=" + w.p("t.tfrecord") +
                                   ": is the same file as the input --data"),
              std::string::npos)
        << b.out;
    const auto c = run_bertbench(
        "bench --threads=1 --bert_config_file=" + w.p("bert_config.json") +
        " --mode=infer --steps=2 --warmup=1 --noceiling --md=" + w.p("bert_config.json"));
    EXPECT_EQ(c.exit_code, 1) << c.out;
    const auto s =
        run_bertbench(w.pretrain(w.p("run"), 2) + " --json-summary=" + w.p("t.tfrecord"));
    EXPECT_EQ(s.exit_code, 1) << s.out;
    EXPECT_NE(error_of_run(s).find("--json-summary=" + w.p("t.tfrecord") +
                                   ": is the same file as the input"),
              std::string::npos)
        << s.out;
    EXPECT_EQ(slurp(w.p("t.tfrecord")), data);
    EXPECT_FALSE(fs::exists(w.p("run")));
}

// A directory where the run writes one of its files (curves.svg, written at the end) is refused
// before the first step, not after the training.
TEST(RunGuardCli, AnOutputNameTakenByADirectoryIsRefusedBeforeTraining) {
    const GuardDir w("isdir");
    fs::create_directories(w.p("run/curves.svg"));
    const auto r = run_bertbench(w.pretrain(w.p("run"), 2));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(error_of_run(r), "error: --output_dir=" + w.p("run") + ": " + w.p("run/curves.svg") +
                                   " is a directory, expected a file name or nothing (the run writes its "
                                   "curves.svg there)")
        << r.out;
    EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << r.out;
    EXPECT_TRUE(testing::matching_files(w.p("run"), R"(model\.ckpt-.*)").empty());
}

TEST(RunGuardCli, ASecondRunInAnOutputDirInUseIsRefused) {
    const GuardDir w("lock");
    const std::string out = w.p("run"), cmd = bertbench_path() + " " + w.pretrain(out, 100000);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::signal(SIGTERM, SIG_DFL);
        ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // the first run holds the directory once it logs its first step
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::error_code ec;
    while (!(fs::exists(out + "/train_log.jsonl", ec) &&
             fs::file_size(out + "/train_log.jsonl", ec) > 0) &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling, not a wait
    const auto second = run_bertbench(w.pretrain(out, 100000));
    ::kill(pid, SIGTERM);  // the first stops with a checkpoint
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_EQ(second.exit_code, 1) << second.out;
    EXPECT_NE(error_of_run(second).find("--output_dir=" + out +
                                        ": another bertbench run is using this directory now"),
              std::string::npos)
        << second.out;
    EXPECT_TRUE(WIFEXITED(status)) << status;
    EXPECT_TRUE(testing::matching_files(out, R"(mlperf\.log\.failed-start-.*)").empty());
}

// A run paused by --stop_steps and continued is one run in mlperf.log: the pause adds no
// evaluation off the run's cadence and no run_stop (MLPerf's result summarizer scores the first
// run_stop of a log, which was the pause's "aborted"); the continuation's end writes the one.
TEST(RunGuardCli, APausedRunLogsOneRunStopAndNoExtraEvaluation) {
    const GuardDir w("pause");
    std::string line = w.pretrain(w.p("run"), 8);
    line.replace(line.find(" --nodo_eval"), 12, " --do_eval --eval_input_file=" + w.p("t.tfrecord") +
                                                     " --max_eval_steps=2 --eval_batch_size=4 "
                                                     "--eval_every_samples=24 --target_mlm_accuracy=0.99");
    const auto first = run_bertbench(line + " --stop_steps=3");
    ASSERT_EQ(first.exit_code, 0) << first.out;
    const auto second = run_bertbench(line);
    ASSERT_EQ(second.exit_code, 0) << second.out;
    const std::string log = slurp(w.p("run") + "/mlperf.log");
    EXPECT_EQ(testing::count_of(log, "\"key\": \"run_stop\""), 1u) << log;
    EXPECT_EQ(testing::count_of(log, "\"key\": \"run_start\""), 1u) << log;
    // evaluations at 24 samples (6 steps) and at the end (8 steps, 32 samples), none at the pause (12)
    EXPECT_EQ(testing::count_of(log, "\"key\": \"eval_accuracy\""), 2u) << log;
    EXPECT_EQ(log.find("\"epoch_num\": 12"), std::string::npos) << log;
}

// An eval set smaller than --eval_batch_size: the forward-only arena is planned for its records,
// not for the flag (a batch of 100000 against a 100-record set was planned for 100000 sequences and
// failed "out of memory"), and the evaluation is the same as with a batch of exactly its records.
TEST(RunGuardCli, AnEvalBatchLargerThanTheEvalSetIsPlannedForItsRecords) {
    const GuardDir w("eval_batch");
    const std::string eval = " --do_eval --eval_input_file=" + golden("eval_pick/public_128_eval100.tfrecord");
    std::string line = w.pretrain(w.p("big"), 2);
    line.replace(line.find(" --nodo_eval"), 12, eval + " --eval_batch_size=100000");
    const auto big = run_bertbench(line);
    ASSERT_EQ(big.exit_code, 0) << big.out;
    EXPECT_NE(big.out.find("forward-only for eval batch 100000: the eval set's 100 records)"), std::string::npos)
        << big.out;
    line = w.pretrain(w.p("exact"), 2);
    line.replace(line.find(" --nodo_eval"), 12, eval + " --eval_batch_size=100");
    const auto exact = run_bertbench(line);
    ASSERT_EQ(exact.exit_code, 0) << exact.out;
    EXPECT_NE(slurp(w.p("big") + "/eval_results.txt").find("masked_lm_accuracy = "), std::string::npos);
    EXPECT_EQ(slurp(w.p("big") + "/eval_results.txt"), slurp(w.p("exact") + "/eval_results.txt"));
}

// A run resumed with another --steps_per_update: the flag is named, not the checkpoint blamed (a
// step not a multiple of it once said "another --steps_per_update" among damage; one that is, its
// update count "damaged or not this run's", with the hint to move a good checkpoint away).
TEST(RunGuardCli, AnotherStepsPerUpdateOnResumeIsNamed) {
    for (const int stop : {3, 4}) {
        const GuardDir w("spu" + std::to_string(stop));
        const std::string first = w.pretrain(w.p("run"), 8) + " --save_checkpoints_steps=" + std::to_string(stop);
        ASSERT_EQ(run_bertbench(first + " --stop_steps=" + std::to_string(stop)).exit_code, 0);
        const auto r = run_bertbench(w.pretrain(w.p("run"), 8) + " --steps_per_update=2");
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_of_run(r).find("--steps_per_update: expected 1 as in the checkpoint "), std::string::npos)
            << r.out;
        EXPECT_EQ(error_of_run(r).find("damaged"), std::string::npos) << r.out;
    }
}

// bert_config's layer_norm_eps, which the checkpoint records only where it is not BERT's 1e-12:
// resumed with the key left out (the default), the change is named, not resumed silently with
// another model; resumed with it added, a one-line error, not the JSON library's exception.
TEST(RunGuardCli, AnotherLayerNormEpsOnResumeIsNamed) {
    for (const bool added : {false, true}) {
        const GuardDir w(added ? "eps_added" : "eps_removed");
        const auto with_eps = [&](bool eps) {
            std::string c = slurp(w.p("bert_config.json"));
            if (eps) c.insert(c.rfind('}'), ", \"layer_norm_eps\": 1e-05");
            std::ofstream(w.p("bert_config.json")) << c;
        };
        with_eps(!added);
        ASSERT_EQ(run_bertbench(w.pretrain(w.p("run"), 8) + " --stop_steps=2").exit_code, 0);
        w.config(0.0);
        with_eps(added);
        const auto r = run_bertbench(w.pretrain(w.p("run"), 8));
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_of_run(r).find("layer_norm_eps"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("json.exception"), std::string::npos) << r.out;
    }
}

// A run whose end is not on an optimizer update is refused before anything is written (it once
// trained every step and failed at the end, leaving no checkpoint). (--stop_steps, a PerfZero
// flag, counts updates: always whole ones.)
// NVIDIA's line takes --train_batch_size per rank: resumed with another per-rank batch (as under
// another mpirun -np, which gave the same refusal with only the global numbers), the message
// names the rank count that gives the checkpoint's global batch.
TEST(RunGuardCli, APerRankBatchOnResumeNamesTheRanks) {
    const GuardDir w("perrank");
    const std::string line = "pretrain --bert_config_file=" + w.p("bert_config.json") + " --input_file=" +
                             w.p("t.tfrecord") + " --output_dir=" + w.p("run") +
                             " --max_steps=4 --num_warmup_steps=1 --learning_rate=1e-3 --threads=1";
    ASSERT_EQ(run_bertbench(line + " --train_batch_size=4 --steps_this_run=2").exit_code, 0);
    const auto r = run_bertbench(line + " --train_batch_size=2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_of_run(r).find("--train_batch_size: expected 4 as in the checkpoint"), std::string::npos) << r.out;
    EXPECT_NE(error_of_run(r).find("(the global batch, 1 rank(s) x 2 per rank; the checkpoint's 4 is 2 ranks of 2: "
                                   "mpirun -np 2; hint: "),
              std::string::npos)
        << r.out;
}

TEST(RunGuardCli, StepsNotOnAnUpdateAreRefusedAtStart) {
    const GuardDir w("whole");
    const auto r = run_bertbench(w.pretrain(w.p("run"), 5) + " --steps_per_update=2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_of_run(r).find("--num_train_steps=5: expected a multiple of --steps_per_update=2 (the run stops on "
                                   "an optimizer update; the last 1 micro-step(s) would be gradients never applied) "
                                   "(hint: --num_train_steps=4 or 6)"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("run"))) << r.out;
}

TEST(RunGuardCli, AnEditedConfigIsAChangedFlagOnResume) {
    const GuardDir w("config");
    const std::string base = w.pretrain(w.p("run"), 2);
    ASSERT_EQ(run_bertbench(base).exit_code, 0);
    w.config(0.25);
    const auto r = run_bertbench(w.pretrain(w.p("run"), 4));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_of_run(r).find("bert_config hidden_dropout_prob (checkpoint 0.0, now 0.25)"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(run_bertbench(w.pretrain(w.p("run"), 4) + " --allow_changed_flags").exit_code, 0);
}

// train_log.jsonl has one line per update: a resume whose log lost lines (deleted, cut) says so
// and appends to it as it is; an intact log resumes without a word.
TEST(RunGuardCli, ATrainLogThatLostLinesIsNamedOnResume) {
    const GuardDir w("train_log");
    const std::string run = w.pretrain(w.p("run"), 8), log = w.p("run/train_log.jsonl");
    ASSERT_EQ(run_bertbench(run + " --stop_steps=2").exit_code, 0);
    const auto intact = run_bertbench(run + " --stop_steps=4");
    ASSERT_EQ(intact.exit_code, 0) << intact.out;
    EXPECT_EQ(intact.out.find("train_log.jsonl: expected"), std::string::npos) << intact.out;
    std::string text = slurp(log);
    text.erase(text.rfind('\n', text.size() - 2) + 1);  // step 4's line
    std::ofstream(log) << text;
    const auto cut = run_bertbench(run + " --stop_steps=6");
    ASSERT_EQ(cut.exit_code, 0) << cut.out;
    EXPECT_NE(cut.out.find(log + ": expected its lines up to step 4 (the checkpoint's), found lines up to step 3"),
              std::string::npos) << cut.out;
    fs::remove(log);
    const auto gone = run_bertbench(run + " --threads=0");  // the last --threads counts; not a checked flag
    ASSERT_EQ(gone.exit_code, 0) << gone.out;
    EXPECT_NE(gone.out.find(log + ": expected its lines up to step 6 (the checkpoint's), found none"),
              std::string::npos) << gone.out;
    EXPECT_EQ(testing::count_of(slurp(log), "\n"), 2U);  // steps 7 and 8
    cpu_set_t cpus;
    ASSERT_EQ(sched_getaffinity(0, sizeof cpus, &cpus), 0);
    EXPECT_EQ(nlohmann::json::parse(slurp(w.p("run/config.json")))["threads"], CPU_COUNT(&cpus));  // 0 resolved
}

// A run's end writes results.json and curves.svg before the checkpoint that marks it finished: a
// final checkpoint that cannot be written (here a file-size limit; a kill there is the same) leaves
// results.json "aborted" with the reason, and the same command ends the run from the checkpoint
// before (the other order left a finished checkpoint without results that no rerun would write).
TEST(RunGuardCli, AFinalCheckpointThatFailsLeavesTheRunToEndAgain) {
    const GuardDir w("final_save");
    const std::string run = w.pretrain(w.p("run"), 4);
    ASSERT_EQ(run_bertbench(run + " --stop_steps=2").exit_code, 0);
    // SIGXFSZ ignored: a write past the limit fails with EFBIG; the checkpoint is 12 MB, the logs KBs
    const auto capped =
        testing::run_shell("bash -c \"trap '' XFSZ; ulimit -f 4096; exec " + bertbench_path() + " " + run + "\"");
    ASSERT_NE(capped.exit_code, 0) << capped.out;
    const nlohmann::json aborted = nlohmann::json::parse(slurp(w.p("run/results.json")));
    EXPECT_EQ(aborted["status"], "aborted") << aborted.dump();
    EXPECT_NE(aborted["reason"].get<std::string>().find("model.ckpt-4.safetensors"), std::string::npos)
        << aborted.dump();
    EXPECT_FALSE(fs::exists(w.p("run/model.ckpt-4.safetensors")));
    EXPECT_EQ(aborted["last_checkpoint"], w.p("run/model.ckpt-2.safetensors"));
    const auto again = run_bertbench(run);
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_EQ(again.out.find("already finished"), std::string::npos) << again.out;
    const nlohmann::json done = nlohmann::json::parse(slurp(w.p("run/results.json")));
    EXPECT_EQ(done["status"], "completed (no evaluation)") << done.dump();
    EXPECT_EQ(done["global_step"], 4);
    EXPECT_EQ(done["last_checkpoint"], w.p("run/model.ckpt-4.safetensors"));
    EXPECT_TRUE(fs::exists(w.p("run/model.ckpt-4.safetensors")));
    EXPECT_NE(run_bertbench(run).out.find("already finished"), std::string::npos);
}

TEST(RunGuardCli, ValuesTheRunCannotUseAreOneLineErrors) {
    const GuardDir w("values");
    const std::pair<std::string, std::string> cases[] = {
        {w.pretrain(w.p("run"), 2) + " --log_epsilon=-100",
         "--log_epsilon: expected epsilon = 10^log_epsilon a normal fp32 number"},
        {w.pretrain(w.p("run"), 2) + " --eval_every_samples=-1",
         "--eval_every_samples: expected 0..9007199254740992 (0 = the default cadence), got -1"},
        // past 2^53 samples a checkpoint could not hold the cadence (a resume would refuse it)
        {w.pretrain(w.p("run"), 2) + " --eval_every_samples=9007199254740993",
         "--eval_every_samples: expected 0..9007199254740992"},
        {w.pretrain(w.p("run"), 2) + " --steps_between_eval=4611686018427387904",
         "--steps_between_eval: expected 1.."},
        {"pretrain --output_dir --learning_rate=1e-3",
         "flag --output_dir needs a value, got the flag --learning_rate=1e-3"},
        // a flag without effect here takes no flag as its value either (an unset $TPU_NAME)
        {w.pretrain(w.p("run"), 2) + " --tpu_name --num_train_steps=5",
         "flag --tpu_name needs a value, got the flag --num_train_steps=5"},
        {"bench --mode= --noceiling", "--mode: expected at least one of train, infer, gemm"},
        {"bench --mode=infer,infer --noceiling",
         "--mode: expected each value once, got infer twice"}};
    for (const auto& [args, message] : cases) {
        const auto r = run_bertbench(args);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_NE(error_of_run(r).find(message), std::string::npos) << args << "\n" << r.out;
    }
    EXPECT_FALSE(fs::exists(w.p("run")));
    EXPECT_FALSE(fs::exists("--learning_rate=1e-3"));
}

// Records the model cannot read are named before the run starts, for what they are.
TEST(RunGuardCli, RecordsTheModelCannotReadAreNamedBeforeTheStart) {
    const GuardDir w("records");
    std::ofstream(w.p("one_type.json"))
        << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 64, "max_position_embeddings": 512, "type_vocab_size": 1})";
    std::string cmd = w.pretrain(w.p("run"), 2);
    cmd.replace(cmd.find(w.p("bert_config.json")), w.p("bert_config.json").size(),
                w.p("one_type.json"));
    const auto t = run_bertbench(cmd);
    EXPECT_EQ(t.exit_code, 1) << t.out;
    EXPECT_NE(error_of_run(t).find("record 0: segment_ids["), std::string::npos) << t.out;
    EXPECT_NE(error_of_run(t).find("outside the model's token types [0, 1)"), std::string::npos)
        << t.out;
    EXPECT_NE(error_of_run(t).find("found by the check of every input before the first step"),
              std::string::npos)
        << t.out;
    EXPECT_FALSE(fs::exists(w.p("run")));
    // a JSON file given as records: said to be no TFRecord file, with its first bytes
    std::ofstream(w.p("notrecords.json")) << R"({"version": "1.1", "data": []})";
    std::string json_input = w.pretrain(w.p("run"), 2);
    json_input.replace(json_input.find(w.p("t.tfrecord")), w.p("t.tfrecord").size(),
                       w.p("notrecords.json"));
    const auto j = run_bertbench(json_input);
    EXPECT_EQ(j.exit_code, 1) << j.out;
    EXPECT_NE(error_of_run(j).find(
                  "not a TFRecord file (the first record's length CRC does not match; the "
                  "file starts with 7b 22 76 65"),
              std::string::npos)
        << j.out;
}

}  // namespace
}  // namespace bertbench
