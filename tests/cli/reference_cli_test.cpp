// The reference scripts' command lines, pasted with only paths and sizes changed, run the real
// binary ($BB_BERTBENCH): MLPerf TF1 run_pretraining.py (GPU, eval and TPU forms), PerfZero's
// TF2 flags (GPU and TPU variants) and NVIDIA's NGC TF run_pretraining.py (phase 1). Each runs, or fails with its one real reason; accelerator
// flags are listed once as "accepted, no effect on a CPU run"; bad flags are reported all at once.
// Tiny model (L2 H64 A2 I128), seq 128, on the golden MLPerf-schema records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/run_util.hpp"
#include "core/py_json.hpp"
#include "dist/mpi_util.hpp"
#include "io/tf_bundle.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::eval_data;
using testing::run_bertbench;
using testing::shared_dir;
using testing::slurp;
using testing::train_data;

// A directory holding bert_config.json, data/part-00000 and -00001 (copies of the golden
// records) and init.safetensors (freshly initialised weights of the tiny model).
struct RefWorkdir : testing::TinyRunDir {
    explicit RefWorkdir(const std::string& name) : TinyRunDir("refcli_" + name, 2, 7) {}
    std::string data() const { return (dir / "data" / "part*").string(); }
    std::string out(const std::string& name) const { return file(name); }
};

// MLPerf TF1 run_pretraining.py, GPU form (mlcommons/training README), sizes shrunk.
std::string mlperf_gpu(const RefWorkdir& w, const std::string& out) {
    return "pretrain --bert_config_file=" + w.config() + " --output_dir=" + out +
           " --input_file=\"" + w.data() + "\" --nodo_eval --do_train --eval_batch_size=8"
           " --learning_rate=0.0001 --init_checkpoint=" + w.init() +
           " --iterations_per_loop=1000 --max_predictions_per_seq=20 --max_seq_length=128"
           " --num_train_steps=4 --num_warmup_steps=2 --optimizer=lamb --save_checkpoints_steps=2"
           " --start_warmup_step=0 --num_gpus=8 --train_batch_size=4 --threads=1";
}

TEST(ReferenceCli, MlperfTf1GpuForm) {
    const RefWorkdir w("gpu");
    const std::string out = w.out("run");
    const auto r = run_bertbench(mlperf_gpu(w, out));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "accepted, no effect on a CPU run: --iterations_per_loop=1000\n"), 1u)
        << r.out;
    EXPECT_NE(r.out.find("--num_gpus=8: 1 process computes the global batch of 4"),
              std::string::npos) << r.out;
    bool init_loaded = false;  // a log line reports the checkpoint's tensors loaded
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        init_loaded |= line.find(w.init()) != std::string::npos &&
                       line.find("loaded") != std::string::npos;
    EXPECT_TRUE(init_loaded) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["status"], "completed (no evaluation)");
    EXPECT_EQ(res["global_step"], 4);
    EXPECT_EQ(res["global_batch_size"], 4);
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-2.safetensors"));
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-4.safetensors"));
    // Both part files were read (config.json lists the expanded glob).
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["train_files"].size(), 2u);
    EXPECT_EQ(cfg["flags"]["clip_mode"], "per_micro_batch");
    EXPECT_EQ(cfg["flags"]["clip_norm"], 1.0);
    // MLPerf's optimization.py with --clip_by_global_norm_after_gradient_allreduce moves the clip
    // into its LAMB: AdamWeightDecayOptimizer then trains unclipped
    std::string adamw = mlperf_gpu(w, w.out("adamw"));
    adamw.replace(adamw.find("--optimizer=lamb"), 16,
                  "--optimizer=adamw --clip_by_global_norm_after_gradient_allreduce");
    const auto a = run_bertbench(adamw);
    ASSERT_EQ(a.exit_code, 0) << a.out;
    EXPECT_EQ(count_of(a.out, "--clip_by_global_norm_after_gradient_allreduce with --optimizer=adamw: "
                              "no gradient clipping"), 1u) << a.out;
    const json acfg = json::parse(slurp(w.out("adamw") + "/config.json"));
    EXPECT_EQ(acfg["flags"]["clip_mode"], "after_accumulation");
    EXPECT_TRUE(acfg["flags"]["clip_norm"].is_null());
}

// MLPerf's eval line (mlcommons/training README: --do_eval --nodo_train --init_checkpoint=<its
// starting checkpoint> --output_dir=<the training dir>), sizes shrunk. It is not a resume: as
// TF's Estimator it evaluates the latest checkpoint in the directory, or --init_checkpoint (a
// TF-style prefix of bertbench's file) where there is none, writes eval_results.txt/.json and
// leaves the training run's files as they were; with nothing to evaluate it fails.
std::string mlperf_eval(const RefWorkdir& w, const std::string& out, const std::string& init) {
    return "pretrain --bert_config_file=" + w.config() + " --output_dir=" + out +
           " --input_file=" + eval_data() + " --do_eval --nodo_train --eval_batch_size=8" +
           (init.empty() ? std::string() : " --init_checkpoint=" + init) +
           " --iterations_per_loop=1000 --max_eval_steps=2 --max_predictions_per_seq=20"
           " --max_seq_length=128 --num_gpus=1 --num_train_steps=4 --num_warmup_steps=2"
           " --optimizer=lamb --save_checkpoints_steps=2 --start_warmup_step=0"
           " --train_batch_size=4 --nouse_tpu --threads=1";
}

TEST(ReferenceCli, MlperfTf1EvalFormEvaluatesWithoutTouchingTheTrainingRun) {
    const RefWorkdir w("evalform");
    const std::string out = w.out("run");
    ASSERT_EQ(run_bertbench(mlperf_gpu(w, out)).exit_code, 0);
    // The training run's files but the eval-only run's two (which a training run with
    // --do_eval also writes).
    const auto run_files = [&] {
        std::vector<std::pair<std::string, std::string>> files;
        for (const auto& e : fs::directory_iterator(out)) {
            const std::string name = e.path().filename().string();
            if (name != "eval_results.txt" && name != "eval_results.json")
                files.emplace_back(name, slurp(e.path().string()));
        }
        std::sort(files.begin(), files.end());
        return files;
    };
    const auto before = run_files();
    const auto unchanged = [&] { return run_files() == before; };

    // The checkpoint named as TF names it (model.ckpt-2, bertbench wrote model.ckpt-2.safetensors),
    // in a directory without checkpoints: that one, and the files only there.
    const std::string fresh = w.out("fresh");
    auto r = run_bertbench(mlperf_eval(w, fresh, out + "/model.ckpt-2"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "evaluating " + out + "/model.ckpt-2.safetensors (--init_checkpoint; "
                              "--output_dir holds no checkpoint)"), 1u)
        << r.out;
    EXPECT_EQ(r.out.find("resuming"), std::string::npos) << r.out;
    EXPECT_TRUE(unchanged());
    EXPECT_FALSE(fs::exists(out + "/eval_results.json"));
    EXPECT_FALSE(fs::exists(fresh + "/eval_log.jsonl"));
    const std::string txt = slurp(fresh + "/eval_results.txt");
    // the reference's graph initialised from --init_checkpoint: its global_step is not restored
    EXPECT_EQ(txt.rfind("global_step = 0\nloss = ", 0), 0u) << txt;
    EXPECT_NE(txt.find("\nmasked_lm_accuracy = "), std::string::npos) << txt;
    json res = json::parse(slurp(fresh + "/eval_results.json"));
    EXPECT_EQ(res["examples"], 16);  // 2 batches of 8
    EXPECT_GT(res["masked_lm_loss"].get<double>(), 0);
    EXPECT_EQ(res["checkpoint"], out + "/model.ckpt-2.safetensors");
    const double at_step2 = res["masked_lm_loss"].get<double>();

    // In the training run's directory, the line as MLPerf's README gives it: the latest
    // checkpoint there (step 4) wins over --init_checkpoint, as the Estimator restores it.
    r = run_bertbench(mlperf_eval(w, out, out + "/model.ckpt-2"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "evaluating " + out + "/model.ckpt-4.safetensors (the latest "
                              "checkpoint in --output_dir=" + out + ", not --init_checkpoint=" +
                              out + "/model.ckpt-2: TF's Estimator restores"), 1u)
        << r.out;
    EXPECT_TRUE(unchanged());
    EXPECT_FALSE(fs::exists(out + "/changed_flags.jsonl"));
    EXPECT_EQ(json::parse(slurp(out + "/eval_results.json"))["global_step"], 4);

    // Without --init_checkpoint: the latest checkpoint of the run, step 4.
    r = run_bertbench(mlperf_eval(w, out, ""));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "evaluating " + out +
                                  "/model.ckpt-4.safetensors (the latest checkpoint "
                                  "in --output_dir=" +
                                  out + ")"),
              1u)
        << r.out;
    EXPECT_TRUE(unchanged());
    res = json::parse(slurp(out + "/eval_results.json"));
    EXPECT_EQ(res["global_step"], 4);
    EXPECT_NE(res["masked_lm_loss"].get<double>(), at_step2);
    EXPECT_EQ(slurp(out + "/eval_results.txt").rfind("global_step = 4\n", 0), 0u);

    // `bertbench eval` on the same checkpoint gives the same metrics.
    const auto e = run_bertbench("eval --init_checkpoint=" + out + "/model.ckpt-4.safetensors" +
                                 " --input_file=" + eval_data() + " --max_eval_steps=2 --threads=1" +
                                 " --json=" + w.out("eval.json"));
    ASSERT_EQ(e.exit_code, 0) << e.out;
    EXPECT_EQ(json::parse(slurp(w.out("eval.json")))["masked_lm_loss"], res["masked_lm_loss"]);

    // So does any other --init_checkpoint: a TF checkpoint (whatever its name) or a .pt.
    for (const auto& [name, step] : std::vector<std::pair<std::string, int>>{{"tf/model.ckpt-300", 0},
                                                                            {"model.pt", 0}}) {
        const std::string converted = w.out("converted/" + name);
        ASSERT_EQ(run_bertbench("convert --input=" + out + "/model.ckpt-4.safetensors --output=" + converted)
                      .exit_code, 0);
        const std::string dir = w.out("fresh_" + std::to_string(step));
        r = run_bertbench(mlperf_eval(w, dir, converted));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(json::parse(slurp(dir + "/eval_results.json"))["global_step"], step) << name;
        EXPECT_EQ(slurp(dir + "/eval_results.txt").rfind("global_step = " + std::to_string(step) + "\n", 0), 0u)
            << name;
    }

    // Nothing to evaluate: no checkpoint given, none in the directory. One line, exit 1, nothing
    // created.
    const std::string empty = w.out("empty");
    r = run_bertbench(mlperf_eval(w, empty, ""));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("expected a checkpoint to evaluate, got none"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(empty));
    // The line without --nodo_train: bertbench's --do_train defaults to true, the reference's to
    // false; it trains, and says so once.
    std::string trains = mlperf_eval(w, w.out("trains"), "");
    trains.replace(trains.find(" --nodo_train"), 13, "");
    r = run_bertbench(trains);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "warning: --do_eval without --do_train: bertbench trains"), 1u) << r.out;
    EXPECT_TRUE(fs::exists(w.out("trains") + "/model.ckpt-4.safetensors"));
    EXPECT_EQ(count_of(run_bertbench(mlperf_eval(w, w.out("fresh3"), out + "/model.ckpt-4")).out,
                       "warning: --do_eval without"), 0u);

    // A checkpoint that is not there (and none in --output_dir): the error names it.
    r = run_bertbench(mlperf_eval(w, w.out("fresh2"), out + "/model.ckpt-99"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(out + "/model.ckpt-99"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.out("fresh2")));
    // eval_results.json taken by a directory: refused before the evaluation, nothing written
    fs::create_directories(w.out("taken") + "/eval_results.json");
    r = run_bertbench(mlperf_eval(w, w.out("taken"), out + "/model.ckpt-4"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.out.find("evaluating"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.out("taken") + "/eval_results.txt"));
    EXPECT_TRUE(unchanged());
}

TEST(ReferenceCli, MlperfTf1TpuForm) {
    const RefWorkdir w("tpu");
    const std::string out = w.out("run");
    const std::string cmd =
        "pretrain --bert_config_file=" + w.config() + " --output_dir=" + out +
        " --input_file=\"" + w.data() + "\" --nodo_eval --do_train --eval_batch_size=8"
        " --init_checkpoint=" + w.init() + " --iterations_per_loop=3 --lamb_beta_1=0.88"
        " --lamb_beta_2=0.88 --lamb_weight_decay_rate=0.0166629 --learning_rate=0.00288293"
        " --log_epsilon=-6 --max_eval_steps=2 --max_predictions_per_seq=20 --max_seq_length=128"
        " --num_tpu_cores=128 --num_train_steps=6 --num_warmup_steps=2 --optimizer=lamb"
        " --save_checkpoints_steps=3 --start_warmup_step=-1 --steps_per_update=1"
        " --train_batch_size=4 --use_tpu --tpu_name=my-tpu --tpu_zone=europe-west4-a"
        " --gcp_project=my-project --nouse_tpu --keep_checkpoint_max=1 --threads=1";
    const auto r = run_bertbench(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "accepted, no effect on a CPU run: "), 1u) << r.out;
    EXPECT_NE(r.out.find("--tpu_name=my-tpu, --tpu_zone=europe-west4-a, --gcp_project=my-project, "
                         "--nouse_tpu"), std::string::npos) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["global_step"], 6);
    EXPECT_FALSE(fs::exists(out + "/model.ckpt-3.safetensors"));  // --keep_checkpoint_max=1
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-6.safetensors"));
    // The mapped LAMB hyper-parameters reach the MLPerf log.
    const std::string ml = slurp(out + "/mlperf.log");
    EXPECT_NE(ml.find("\"opt_lamb_beta_1\", \"value\": 0.88"), std::string::npos) << ml;
    EXPECT_NE(ml.find("\"start_warmup_step\", \"value\": -1"), std::string::npos) << ml;
}

// PerfZero's TF2 BERT flags (the MLPerf TF2 benchmark), sizes shrunk: global batch 8 per update
// = 2 micro-batches of 4; 8 updates per epoch = 16 micro-steps of schedule; stop after 6 updates;
// first eval after 3 updates (24 samples), then every 2 (16 samples).
std::string perfzero(const RefWorkdir& w, const std::string& out) {
    return "pretrain --all_reduce_alg=nccl --bert_config_file=" + w.config() +
           " --beta_1=0.91063 --beta_2=0.96497 --device_warmup --do_eval --eval_batch_size=8"
           " --init_checkpoint=" + w.init() + " --input_files=\"" + w.data() + "\""
           " --learning_rate=0.00035221 --max_predictions_per_seq=20 --max_seq_length=128"
           " --model_dir=" + out + " --num_accumulation_steps=2 --num_gpus=8"
           " --num_steps_per_epoch=8 --num_train_epochs=1 --optimizer_type=lamb"
           " --steps_before_eval_start=3 --steps_between_eval=2 --steps_per_loop=658"
           " --stop_steps=6 --train_batch_size=8 --verbosity=0 --warmup_steps=2"
           " --max_eval_steps=1 --threads=1";
}

TEST(ReferenceCli, PerfZeroTf2Form) {
    const RefWorkdir w("perfzero");
    const std::string out = w.out("run");
    const auto r = run_bertbench(perfzero(w, out));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("accepted, no effect on a CPU run: --all_reduce_alg=nccl, "
                         "--device_warmup, --steps_per_loop=658, --verbosity=0"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 micro-batches of 4 sequences"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--num_gpus=8: 1 process computes the global batch of 8"),
              std::string::npos) << r.out;
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["flags"]["train_batch_size"], 4);
    EXPECT_EQ(cfg["flags"]["steps_per_update"], 2);
    EXPECT_EQ(cfg["flags"]["num_train_steps"], 16);   // 8 updates x 1 epoch x 2 micro-steps
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 4);   // 2 updates
    EXPECT_EQ(cfg["flags"]["lamb_beta_1"], 0.91063);
    EXPECT_EQ(cfg["flags"]["lamb_beta_2"], 0.96497);
    EXPECT_EQ(cfg["global_batch_size"], 8);
    EXPECT_EQ(cfg["eval_every_samples"], 16);         // 2 updates x 8
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["global_step"], 12);                // --stop_steps=6 updates
    // Evaluations where the reference's `step % steps_between_eval == 0 and step >=
    // steps_before_eval_start` holds: after updates 4 (32 samples) and 6 (48, also the stop).
    std::istringstream lines(slurp(out + "/eval_log.jsonl"));
    std::string line;
    std::vector<int64_t> at;
    while (std::getline(lines, line)) at.push_back(json::parse(line)["samples"].get<int64_t>());
    EXPECT_EQ(at, (std::vector<int64_t>{32, 48}));
    EXPECT_EQ(cfg["flags"]["first_eval_samples"], 32);
    // The rate follows optimizer.iterations, an update counter: update u gets WarmUp's value at
    // u - 1 (0, then lr0 / 2 with --warmup_steps=2), then PolynomialDecay's over 8 updates.
    std::istringstream train(slurp(out + "/train_log.jsonl"));
    std::vector<double> lr;
    while (std::getline(train, line)) lr.push_back(json::parse(line)["learning_rate"].get<double>());
    ASSERT_EQ(lr.size(), 6u);
    EXPECT_EQ(lr[0], 0.0);
    EXPECT_EQ(lr[1], static_cast<double>(0.00035221f * 0.5f));
    EXPECT_EQ(lr[2], static_cast<double>(0.00035221f * (1.0f - 2.0f / 8.0f)));
    EXPECT_EQ(cfg["flags"]["schedule_update_counter"], 2);
}

// A TF2 step flag without --num_accumulation_steps: PerfZero's meaning (K = 1), in the start-up
// line and in config.json alike.
TEST(ReferenceCli, Tf2StepFlagAloneHasPerfZerosMeaning) {
    const RefWorkdir w("tf2_step_alone");
    const std::string out = w.out("run");
    std::string line = mlperf_gpu(w, out);
    line.erase(line.find(" --num_gpus=8"), 13);
    const auto r = run_bertbench(line + " --stop_steps=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("PerfZero/TF2 step flags count optimizer updates (1 micro-step each): stop at micro-step 1"),
              std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(out + "/config.json"))["flags"]["batch_flags_meaning"], "perfzero_tf2");
}

// Without --num_train_epochs and --optimizer_type the line gets TF2's common_flags defaults (3
// epochs, AdamW), said at start-up, not bertbench's.
TEST(ReferenceCli, PerfZeroTf2DefaultsAreTf2s) {
    const RefWorkdir w("perfzero_defaults");
    const std::string out = w.out("run");
    std::string line = perfzero(w, out);
    line.erase(line.find(" --num_train_epochs=1 --optimizer_type=lamb"), 43);
    line.replace(line.find("--stop_steps=6"), 14, "--stop_steps=1");
    const auto r = run_bertbench(line);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--optimizer_type=adamw (its default), --num_train_epochs=3 (its default), --num_train_steps=48"),
              std::string::npos) << r.out;
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["flags"]["num_train_steps"], 48);  // 8 updates x 3 epochs x 2 micro-steps
    EXPECT_EQ(cfg["flags"]["optimizer"], "adamw");
    // Nor --num_steps_per_epoch and --warmup_steps (official/nlp/bert's 1000 updates per epoch and
    // 10000 updates of warm-up), nor --num_train_epochs: TF2's too, in updates of 2 micro-steps
    // (bertbench's own 100000 and 10000 micro-steps were taken before).
    std::string bare = perfzero(w, w.out("bare"));
    for (const char* flag : {" --num_steps_per_epoch=8", " --num_train_epochs=1", " --warmup_steps=2"})
        bare.erase(bare.find(flag), std::string(flag).size());
    bare.replace(bare.find("--stop_steps=6"), 14, "--stop_steps=1");
    const auto b = run_bertbench(bare);
    ASSERT_EQ(b.exit_code, 0) << b.out;
    EXPECT_NE(b.out.find("--num_steps_per_epoch=1000 (its default), --num_train_epochs=3 (its default), "
                         "--num_train_steps=6000, --warmup_steps=10000 (its default): --num_warmup_steps=20000"),
              std::string::npos) << b.out;
    const json bc = json::parse(slurp(w.out("bare") + "/config.json"));
    EXPECT_EQ(bc["flags"]["num_train_steps"], 6000);
    EXPECT_EQ(bc["flags"]["num_warmup_steps"], 20000);
    // --num_train_epochs alone: 1000 updates per epoch; with bertbench's --num_train_steps, which
    // sets the same length, refused
    std::string epochs = perfzero(w, w.out("epochs"));
    epochs.erase(epochs.find(" --num_steps_per_epoch=8"), 24);
    epochs.replace(epochs.find("--stop_steps=6"), 14, "--stop_steps=1");
    const auto e = run_bertbench(epochs);
    ASSERT_EQ(e.exit_code, 0) << e.out;
    EXPECT_EQ(json::parse(slurp(w.out("epochs") + "/config.json"))["flags"]["num_train_steps"], 2000);
    const auto both = run_bertbench(epochs + " --num_train_steps=4");
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.out.find("--num_train_steps and --num_train_epochs: expected one of them"), std::string::npos)
        << both.out;
}

// MLPerf's own TF2 line (mlcommons/training language_model/tensorflow2/bert README): its file flags
// --train_files/--eval_files, a float --warmup_steps, --epsilon (LAMB's) and --stop_threshold (the
// target) map onto bertbench's flags.
TEST(ReferenceCli, MlperfTf2FormMapsItsOwnFlags) {
    const RefWorkdir w("mlperf_tf2");
    const std::string out = w.out("run");
    std::string line = perfzero(w, out);
    line.replace(line.find("--input_files="), 14, "--train_files=");
    line.replace(line.find("--warmup_steps=2"), 16, "--warmup_steps=2.0");
    const auto r = run_bertbench(line + " '--eval_files=" + w.data() + "' --epsilon=1e-6 --stop_threshold=0.9");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--epsilon=1e-06: the optimizer's epsilon (bertbench --log_epsilon=-6)"), std::string::npos) << r.out;
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["flags"]["input_file"], w.data());
    EXPECT_EQ(cfg["flags"]["eval_input_file"], w.data());
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 4);  // 2 updates
    EXPECT_EQ(cfg["flags"]["log_epsilon"], -6.0);
    EXPECT_EQ(cfg["flags"]["target_mlm_accuracy"], 0.9);
    const auto bad = run_bertbench(line + " --warmup_steps=2.5");
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find("--warmup_steps: expected a whole number of updates >= 0, got 2.5"), std::string::npos)
        << bad.out;
    // 0 is given, not "the default": refused (LAMB's epsilon is kept as its log10)
    const auto zero = run_bertbench(line + " --epsilon=0");
    EXPECT_EQ(zero.exit_code, 1) << zero.out;
    EXPECT_NE(zero.out.find("--epsilon: expected a finite value > 0"), std::string::npos) << zero.out;
}

// The precision flags of the seeds (--dtype=fp16 --loss_scale=dynamic --scale_loss; the TPU
// variant's --dtype=bf16) run or fail naming the precision, and nothing else is wrong with the
// line. They are the precision work's flags: a variant is checked once `pretrain --help` lists
// every flag it uses.
TEST(ReferenceCli, PerfZeroPrecisionFlags) {
    const std::string help = run_bertbench("pretrain --help").out;
    const RefWorkdir w("precision");
    int checked = 0;
    const std::vector<std::pair<std::string, std::vector<std::string>>> variants{
        {" --dtype=fp16 --loss_scale=dynamic --scale_loss", {"dtype", "loss_scale", "scale_loss"}},
        {" --dtype=bf16 --distribution_strategy=tpu --tpu=my-tpu --weight_decay_rate=0.0049573",
         {"dtype"}}};
    for (const auto& [extra, needs] : variants) {
        bool listed = true;
        for (const auto& flag : needs) listed &= help.find("--" + flag + "=") != std::string::npos ||
                                                 help.find("--" + flag + " ") != std::string::npos;
        if (!listed) continue;
        ++checked;
        const auto r = run_bertbench(perfzero(w, w.out("run" + std::to_string(checked))) + extra);
        if (r.exit_code == 0) continue;
        EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
        EXPECT_EQ(r.out.find("unknown flag"), std::string::npos) << r.out;
        EXPECT_TRUE(r.out.find("dtype") != std::string::npos ||
                    r.out.find("fp16") != std::string::npos ||
                    r.out.find("bf16") != std::string::npos) << r.out;
    }
    if (checked == 0) GTEST_SKIP() << "pretrain has no --dtype yet";
}

// NVIDIA NGC TF run_pretraining.py, as scripts/run_pretraining_lamb_phase1.sh runs it (one GPU:
// no mpiexec, no --horovod), sizes shrunk: --train_batch_size=4 per GPU and micro-step x
// --num_accumulation_steps=2 = global batch 8 per update; its step flags count updates (3 updates
// = 6 micro-steps, checkpoints every 2 updates = 4 micro-steps). --input_files_dir and
// --eval_files_dir are directories whose every file is read.
std::string ngc_phase1(const RefWorkdir& w, const std::string& out, const std::string& train_dir) {
    return "pretrain --input_files_dir=" + train_dir + " --eval_files_dir=" + w.out("test") +
           " --output_dir=" + out + " --bert_config_file=" + w.config() +
           " --do_train=True --do_eval=True --train_batch_size=4 --eval_batch_size=8"
           " --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=3"
           " --num_accumulation_steps=2 --num_warmup_steps=1 --save_checkpoints_steps=2"
           " --learning_rate=7.5e-4 --amp --use_xla --allreduce_post_accumulation=True"
           " --max_eval_steps=1 --threads=1";
}

TEST(ReferenceCli, NgcTfPhase1FormHasNgcBatchMeaning) {
    const RefWorkdir w("ngc");
    fs::create_directories(w.dir / "test");
    fs::copy_file(eval_data(), w.dir / "test" / "eval-00000");
    const std::string out = w.out("run");
    const auto r = run_bertbench(ngc_phase1(w, out, w.out("data")));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out,
                       "NVIDIA NGC TF meaning of the batch flags (--input_files_dir given): "
                       "--train_batch_size=4 per GPU (here per rank) and micro-step x "
                       "--num_accumulation_steps=2 x 1 rank = global batch 8 per update "
                       "(bertbench --train_batch_size=4 --steps_per_update=2); its step flags "
                       "count updates: --num_train_steps=3 -> 6 micro-steps, "
                       "--num_warmup_steps=1 -> 2 micro-steps, --save_checkpoints_steps=2 -> "
                       "4 micro-steps, and the learning rate follows its update counter\n"),
              1u)
        << r.out;
    EXPECT_NE(r.out.find("accepted, no effect on a CPU run (fp32 unless --dtype=bf16): --amp\n"),
              std::string::npos) << r.out;
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["flags"]["batch_flags_meaning"], "nvidia_ngc_tf");
    EXPECT_EQ(cfg["flags"]["train_batch_size"], 4);
    EXPECT_EQ(cfg["flags"]["steps_per_update"], 2);
    EXPECT_EQ(cfg["flags"]["num_train_steps"], 6);
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 2);
    EXPECT_EQ(cfg["global_batch_size"], 8);
    EXPECT_EQ(cfg["number_of_ranks"], 1);
    EXPECT_EQ(cfg["train_files"].size(), 2u);  // every file of the directory
    EXPECT_EQ(cfg["eval_files"].size(), 1u);
    // NGC's optimization.py: LAMB's learning rate decays with power 0.5 (a square root)
    EXPECT_EQ(cfg["flags"]["poly_power"], 0.5);
    // its clip: each micro-batch's gradient of loss / 2 to norm 1, i.e. norm 2 in the micro-batch
    // gradient's units; with --allreduce_post_accumulation each rank clips its own
    EXPECT_EQ(cfg["flags"]["clip_norm"], 2.0);
    EXPECT_EQ(cfg["flags"]["clip_mode"], "per_micro_batch");
    EXPECT_NE(r.out.find("NVIDIA NGC TF's LAMB schedule: the learning rate decays with power 0.5"),
              std::string::npos) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["global_step"], 6);
    EXPECT_EQ(res["samples"], 24);  // 3 updates x 8
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-4.safetensors"));  // 2 updates
    EXPECT_FALSE(fs::exists(out + "/model.ckpt-2.safetensors"));
    // As a TF checkpoint its global_step is NGC's, in updates (its schedule and LAMB read it)
    ASSERT_EQ(run_bertbench("convert --input=" + out + "/model.ckpt-4.safetensors --output=" +
                            w.out("tf/model.ckpt-2") + " --to=tf").exit_code, 0);
    const io::TfBundleReader tf(w.out("tf/model.ckpt-2"));
    ASSERT_NE(tf.find("global_step"), nullptr);
    EXPECT_EQ(tf.read_i64(*tf.find("global_step")), std::vector<int64_t>{2});
    // --do_train with --do_eval: the final evaluation also in run_pretraining.py's
    // eval_results.txt (the eval log's last line's metrics, the Estimator's `loss` too).
    const auto evals = testing::read_jsonl(out + "/eval_log.jsonl");
    ASSERT_FALSE(evals.empty());
    const json& last = evals.back();
    // NGC's global_step counts updates (optimization.py: global_step + 1 on an update step).
    EXPECT_EQ(slurp(out + "/eval_results.txt"),
              "global_step = 3\nloss = " + py_float_repr(last["loss"]) +
                  "\nmasked_lm_accuracy = " + py_float_repr(last["masked_lm_accuracy"]) +
                  "\nmasked_lm_loss = " + py_float_repr(last["masked_lm_loss"]) +
                  "\nnext_sentence_accuracy = " + py_float_repr(last["next_sentence_accuracy"]) +
                  "\nnext_sentence_loss = " + py_float_repr(last["next_sentence_loss"]) + "\n");

    // Without --allreduce_post_accumulation (its default) Horovod's DistributedOptimizer averages
    // every micro-batch's gradient over the ranks before the clip
    std::string averaged = ngc_phase1(w, w.out("averaged"), w.out("data"));
    averaged.replace(averaged.find("--allreduce_post_accumulation=True"), 34, "--noallreduce_post_accumulation");
    averaged.replace(averaged.find("--num_train_steps=3"), 19, "--num_train_steps=1");
    averaged.replace(averaged.find("--do_eval=True"), 14, "--do_eval=False");
    const auto av = run_bertbench(averaged);
    ASSERT_EQ(av.exit_code, 0) << av.out;
    const json avcfg = json::parse(slurp(w.out("averaged") + "/config.json"));
    EXPECT_EQ(avcfg["flags"]["clip_mode"], "averaged_micro_batch");
    EXPECT_EQ(avcfg["flags"]["clip_norm"], 2.0);
    // continuing that run with the other clip is a changed flag, refused as such
    std::string changed = averaged;
    changed.replace(changed.find("--noallreduce_post_accumulation"), 31, "--allreduce_post_accumulation");
    changed.replace(changed.find("--num_train_steps=1"), 19, "--num_train_steps=2");
    const auto ch = run_bertbench(changed);
    EXPECT_EQ(ch.exit_code, 1) << ch.out;
    EXPECT_NE(ch.out.find("--allreduce_post_accumulation (checkpoint false, now true)"), std::string::npos) << ch.out;

    // The eval-only form of the line (--do_train=False) on that run: the same update count.
    std::string eval_only = ngc_phase1(w, out, w.out("data"));
    eval_only.replace(eval_only.find("--do_train=True"), 15, "--do_train=False");
    fs::remove(out + "/eval_results.txt");
    const auto ev = run_bertbench(eval_only);
    ASSERT_EQ(ev.exit_code, 0) << ev.out;
    EXPECT_EQ(slurp(out + "/eval_results.txt").rfind("global_step = 3\n", 0), 0u);

    // NGC's phase-2 line names phase 1's last checkpoint by its update count (model.ckpt-3):
    // that is bertbench's model.ckpt-6 (2 micro-steps per update), not the step-3 name.
    std::string phase2 = ngc_phase1(w, w.out("phase2"), w.out("data"));
    phase2.replace(phase2.find("--num_train_steps=3"), 19, "--num_train_steps=1");
    const auto p2 = run_bertbench(phase2 + " --init_checkpoint=" + out + "/model.ckpt-3");
    ASSERT_EQ(p2.exit_code, 0) << p2.out;
    EXPECT_NE(p2.out.find("--init_checkpoint=" + out + "/model.ckpt-3: NVIDIA NGC TF names a checkpoint by its "
                          "update count; that run (" + out + "/config.json) has 2 micro-steps per update: reading " +
                          out + "/model.ckpt-6.safetensors"),
              std::string::npos) << p2.out;

    // Its AdamWeightDecay decays from lr / (1 - warm-up / steps): 7.5e-4 / (1 - 2/6) = 1.125e-3.
    const auto adam = run_bertbench(ngc_phase1(w, w.out("adam"), w.out("data")) + " --optimizer_type=adam");
    ASSERT_EQ(adam.exit_code, 0) << adam.out;
    const json acfg = json::parse(slurp(w.out("adam") + "/config.json"));
    EXPECT_EQ(acfg["flags"]["poly_power"], 1.0);
    EXPECT_NEAR(acfg["flags"]["decay_learning_rate"].get<double>(), 1.125e-3, 1e-12);

    // A file where NGC takes a directory, a missing directory: one line naming the flag.
    auto bad = run_bertbench(ngc_phase1(w, w.out("bad"), train_data()));
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_EQ(count_of(bad.out, "error: "), 1u) << bad.out;
    EXPECT_NE(bad.out.find("--input_files_dir=" + train_data() + ": expected a directory (NVIDIA's "
                           "script reads every file in it), got a file (hint: --input_file="),
              std::string::npos) << bad.out;
    EXPECT_FALSE(fs::exists(w.out("bad")));
    bad = run_bertbench(ngc_phase1(w, w.out("bad"), w.out("nowhere")));
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find("--input_files_dir=" + w.out("nowhere") + ": expected a directory of "
                           "TFRecord files, got no such directory"), std::string::npos) << bad.out;
    // PerfZero's update-counted step flags on NGC's line: which script's meaning is ambiguous.
    bad = run_bertbench(ngc_phase1(w, w.out("bad"), w.out("data")) + " --warmup_steps=1");
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find("--warmup_steps: expected the flags of one script"), std::string::npos)
        << bad.out;
}

// NGC's step flags left out take its defaults (100000, 10000 and 1000 updates), in updates too:
// x --num_accumulation_steps micro-steps, said at start-up. Its older --use_fp16 is accepted as
// --amp is; an --optimizer_type it does not know is named as spelled.
TEST(ReferenceCli, NgcTfDefaultStepFlagsCountUpdates) {
    const RefWorkdir w("ngc_defaults");
    fs::create_directories(w.dir / "test");
    fs::copy_file(eval_data(), w.dir / "test" / "eval-00000");
    std::string line = ngc_phase1(w, w.out("run"), w.out("data"));
    line.erase(line.find(" --num_warmup_steps=1 --save_checkpoints_steps=2"), 48);
    line.replace(line.find("--num_accumulation_steps=2"), 26, "--num_accumulation_steps=3");
    line.replace(line.find(" --amp"), 6, " --use_fp16");
    const auto r = run_bertbench(line + " --nodo_eval");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("its step flags count updates: --num_train_steps=3 -> 9 micro-steps, "
                         "--num_warmup_steps=10000 (its default) -> 30000 micro-steps, "
                         "--save_checkpoints_steps=1000 (its default) -> 3000 micro-steps"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("accepted, no effect on a CPU run (fp32 unless --dtype=bf16; the older NGC scripts' "
                         "--amp): --use_fp16"), std::string::npos) << r.out;
    const json cfg = json::parse(slurp(w.out("run") + "/config.json"));
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 30000);
    EXPECT_EQ(cfg["flags"]["save_checkpoints_steps"], 3000);
    const auto bad = run_bertbench(line + " --optimizer_type=sgd");
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find("error: --optimizer_type: expected \"lamb\" or \"adam\", got \"sgd\""),
              std::string::npos) << bad.out;
}

// Without any flag of NGC's script, --num_accumulation_steps keeps PerfZero's meaning, and the
// line says so and what NGC's would have been.
TEST(ReferenceCli, NumAccumulationStepsSaysWhichMeaningApplies) {
    const RefWorkdir w("meaning");
    const std::string out = w.out("run");
    const auto r = run_bertbench("pretrain --bert_config_file=" + w.config() + " --input_file=\"" +
                                 w.data() + "\" --output_dir=" + out +
                                 " --train_batch_size=8 --num_accumulation_steps=2"
                                 " --num_train_steps=2 --nodo_eval --threads=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out,
                       "PerfZero/TF2 meaning of --num_accumulation_steps (no flag of NVIDIA "
                       "NGC TF's script such as --input_files_dir given): "
                       "--train_batch_size=8 is the global batch per update = 2 micro-batches "
                       "of 4 sequences (bertbench --train_batch_size=4 --steps_per_update=2); "
                       "NGC's meaning would be 8 x 2 x 1 rank = 16\n"),
              1u)
        << r.out;
    EXPECT_EQ(json::parse(slurp(out + "/config.json"))["flags"]["batch_flags_meaning"],
              "perfzero_tf2");

    // 0 given is a count the scripts divide by, not "not given": refused on either line, before
    // anything is written.
    for (const std::string& ngc_flag : std::vector<std::string>{"", " --input_files_dir=" + w.out("nowhere")}) {
        const auto bad = run_bertbench("pretrain --bert_config_file=" + w.config() + " --input_file=\"" +
                                       w.data() + "\" --output_dir=" + w.out("zero") +
                                       " --train_batch_size=8 --num_accumulation_steps=0 --threads=1" + ngc_flag);
        EXPECT_EQ(bad.exit_code, 1) << bad.out;
        EXPECT_EQ(count_of(bad.out, "error: "), 1u) << bad.out;
        EXPECT_EQ(count_of(bad.out, "error: --num_accumulation_steps: expected >= 1, got 0\n"), 1u) << bad.out;
        EXPECT_FALSE(fs::exists(w.out("zero")));
    }
    // A batch the micro-batches cannot split: said in the user's units, with a hint that works.
    const auto odd = run_bertbench("pretrain --bert_config_file=" + w.config() + " --input_file=\"" + w.data() +
                                   "\" --output_dir=" + w.out("odd") +
                                   " --train_batch_size=9 --num_accumulation_steps=2 --threads=1");
    EXPECT_EQ(odd.exit_code, 1) << odd.out;
    EXPECT_NE(odd.out.find("error: --train_batch_size=9: expected a multiple of --num_accumulation_steps=2 "
                           "(PerfZero: the global batch, split into that many micro-batches) (hint: "
                           "--train_batch_size=10)\n"),
              std::string::npos) << odd.out;
    EXPECT_FALSE(fs::exists(w.out("odd")));
}

// NGC's multi-GPU form (mpiexec -np 2 ... --horovod): the global batch counts the ranks and the
// learning rate is multiplied by them, as NGC's script does; rank 0 alone says so, once, and the
// rank count and per-rank batch reach config.json, results.json and mlperf.log.
TEST(ReferenceCli, SlowNgcTfPhase1UnderMpirunCountsTheRanks) {
    if (const std::string why = testing::mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const RefWorkdir w("ngcmpi");
    fs::create_directories(w.dir / "test");
    fs::copy_file(eval_data(), w.dir / "test" / "eval-00000");
    const std::string out = w.out("run");
    const auto r = testing::run_mpi(2, testing::bertbench_path() + " " +
                                           ngc_phase1(w, out, w.out("data")) +
                                           " --horovod --num_gpus=2", 180);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out,
                       "NVIDIA NGC TF meaning of the batch flags (--input_files_dir given): "
                       "--train_batch_size=4 per GPU (here per rank) and micro-step x "
                       "--num_accumulation_steps=2 x 2 ranks = global batch 16 per update "
                       "(bertbench --train_batch_size=8 --steps_per_update=2)"),
              1u)
        << r.out;
    EXPECT_EQ(count_of(r.out, "--horovod on 2 ranks: --learning_rate=0.00075 x 2 = 0.0015"), 1u)
        << r.out;
    EXPECT_EQ(count_of(r.out,
                       "--num_gpus=2: 2 ranks compute the global batch of 16 (4 sequences per "
                       "rank x 2 micro-steps per update)\n"),
              1u)
        << r.out;
    EXPECT_EQ(count_of(r.out,
                       "mpirun: 2 ranks x 4 sequences per micro-step each = 8 per micro-step; "
                       "x 2 micro-steps = global batch 16 per update\n"),
              1u)
        << r.out;
    EXPECT_EQ(count_of(r.out, "accepted, no effect on a CPU run: --use_xla"), 1u) << r.out;
    const json cfg = json::parse(slurp(out + "/config.json"));
    const json res = json::parse(slurp(out + "/results.json"));
    for (const json* j : {&cfg, &res}) {
        EXPECT_EQ((*j)["number_of_ranks"], 2);
        EXPECT_EQ((*j)["per_rank_batch_size"], 4);
        EXPECT_EQ((*j)["global_batch_size"], 16);
    }
    EXPECT_EQ(cfg["flags"]["learning_rate"], 0.0015);
    EXPECT_EQ(res["samples"], 48);  // 3 updates x 16
    const std::string ml = slurp(out + "/mlperf.log");
    EXPECT_EQ(count_of(ml, "\"key\": \"number_of_ranks\", \"value\": 2,"), 1u) << ml;
    EXPECT_EQ(count_of(ml, "\"key\": \"global_batch_size\", \"value\": 16,"), 1u) << ml;
    EXPECT_EQ(count_of(ml, "\"key\": \"opt_base_learning_rate\", \"value\": 0.0015,"), 1u) << ml;
}

TEST(ReferenceCli, BadFlagsAreReportedAtOnceWithTheirClosestMatch) {
    const auto r = run_bertbench(
        "pretrain --model=tiny --output_dir=/nonexistent/x --train_batch_sise=3 --lr=0.1 "
        "--resume_step=4 --max_seq_length=12x --use_tpu=maybe");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
    for (const char* want :
         {"5 bad flags", "--train_batch_sise (did you mean --train_batch_size?)",
          "--lr (did you mean --learning_rate?)",
          "--resume_step (not supported: bertbench resumes from the latest checkpoint",
          "--max_seq_length: expected an integer, got \"12x\"",
          "--use_tpu: expected a boolean"})
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
    EXPECT_FALSE(fs::exists("/nonexistent/x"));

    // Two spellings of one setting with different values.
    const auto two = run_bertbench("pretrain --model=tiny --output_dir=a --model_dir=b");
    EXPECT_EQ(two.exit_code, 1);
    EXPECT_NE(two.out.find("--model_dir=b: names the same setting as --output_dir=a"),
              std::string::npos) << two.out;

    // NGC's adam schedule with as many warm-up steps as steps: its script divides by zero
    const auto warm = run_bertbench("pretrain --model=tiny --output_dir=a --use_xla --optimizer_type=adam "
                                    "--num_accumulation_steps=2 --num_train_steps=3 --num_warmup_steps=3");
    EXPECT_EQ(warm.exit_code, 1);
    EXPECT_NE(warm.out.find("--num_warmup_steps and --num_train_steps: both 3 updates"), std::string::npos)
        << warm.out;
    EXPECT_FALSE(fs::exists("a"));

    // PerfZero's batch split must be exact.
    const auto split = run_bertbench(
        "pretrain --model=tiny --model_dir=a --train_batch_size=10 --num_accumulation_steps=3");
    EXPECT_EQ(split.exit_code, 1);
    EXPECT_NE(split.out.find("--train_batch_size=10: expected a multiple of "
                             "--num_accumulation_steps=3"), std::string::npos) << split.out;
    // PerfZero's --num_train_epochs is an absl integer (NVIDIA run_pretraining.py's is a float)
    const auto epochs = run_bertbench("pretrain --model=tiny --model_dir=a --num_steps_per_epoch=4 --num_train_epochs=2.5");
    EXPECT_EQ(epochs.exit_code, 1);
    EXPECT_NE(epochs.out.find("--num_train_epochs=2.5: expected an integer below 1e9 (PerfZero/TF2's absl "
                              "integer flag)"), std::string::npos) << epochs.out;
    // transformers' and absl's spellings name bertbench's
    const auto hf = run_bertbench("squad --output_dir=a --per_device_eval_batch_size=4 --model_name_or_path=m "
                                  "--flagfile=f");
    EXPECT_EQ(hf.exit_code, 1);
    for (const char* want : {"--per_device_eval_batch_size (did you mean --predict_batch_size?)",
                             "--model_name_or_path (bertbench takes the model as --bert_config_file",
                             "--flagfile (not supported: give the flags on the command line"})
        EXPECT_NE(hf.out.find(want), std::string::npos) << want << "\n" << hf.out;
    EXPECT_FALSE(fs::exists("a"));
}

}  // namespace
}  // namespace bertbench
