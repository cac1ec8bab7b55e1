// NVIDIA DeepLearningExamples PyTorch BERT's command lines (issue 25 item 6) on the real binary,
// pasted as scripts/run_pretraining.sh and scripts/run_squad.sh build them, paths and sizes
// shrunk: run_pretraining.py phase 1 on a directory of HDF5 shards (its *training* files), phase 2
// from phase 1's checkpoint in the same --output_dir, each with --json-summary in dllogger's
// format; run_squad.py's train+eval line and its eval line; mixed scripts' flags and bad values
// as one-line errors. Tiny model (L2 H64 A2 I128) on the golden HDF5 shards and SQuAD files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "io/safetensors.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::golden;
using testing::bertbench_path;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// The LOG entries of a dllogger JSON stream (every line "DLLL " + a JSON object); `metadata`
// gets the metrics of the METADATA entries before them, as dllogger.metadata() writes them.
std::vector<json> dllogger_lines(const std::string& path, std::vector<std::string>* metadata = nullptr) {
    std::vector<json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        EXPECT_EQ(line.rfind("DLLL {", 0), 0u) << line;
        const json entry = json::parse(line.substr(5));
        for (const char* k : {"timestamp", "datetime", "elapsedtime"})
            EXPECT_TRUE(entry[k].is_string()) << line;
        if (entry["type"] == "METADATA") {
            EXPECT_TRUE(out.empty()) << line;
            EXPECT_TRUE(entry["metadata"].contains("unit")) << line;
            if (metadata) metadata->push_back(entry["metric"]);
            continue;
        }
        EXPECT_EQ(entry["type"], "LOG");
        out.push_back(entry);
    }
    return out;
}

// The entries whose data has `key`.
std::vector<json> with_key(const std::vector<json>& lines, const std::string& key) {
    std::vector<json> out;
    for (const json& l : lines)
        if (l["data"].contains(key)) out.push_back(l);
    return out;
}

// $BERT_PREP_WORKING_DIR as NVIDIA's data preparation leaves it: phase 1's and phase 2's shard
// directories (two *training* shards and a test shard that is not read; one seq-512 shard), a
// bert_config.json of the tiny model, the vocabulary.
struct NvidiaDirs {
    TmpDir tmp{"bb_nvpt"};
    std::string phase1 = tmp.file("hdf5_seq_128/books_wiki_en_corpus");
    std::string phase2 = tmp.file("hdf5_seq_512/books_wiki_en_corpus");
    std::string config = tmp.file("bert_config.json");
    NvidiaDirs() {
        fs::create_directories(phase1);
        fs::create_directories(phase2);
        for (const char* name : {"books_wiki_en_corpus_training_0.hdf5",
                                 "books_wiki_en_corpus_training_1.hdf5",
                                 "books_wiki_en_corpus_test_0.hdf5"})
            fs::copy_file(golden("hdf5/public_128_s12345_d2.hdf5"), phase1 + "/" + name);
        fs::copy_file(golden("hdf5/public_512_s12345_d1.hdf5"),
                      phase2 + "/books_wiki_en_corpus_training_0.hdf5");
        testing::write_tiny_bert_config(config);
    }
};

// scripts/run_pretraining.sh's phase-1 CMD (fp16, accumulation, all-reduce after accumulation),
// sizes shrunk: 8 sequences per GPU and update in 2 micro-batches, 3 updates, warm-up half of
// them, a checkpoint every 2 updates. `--json-summary FILE` is space-separated, as there;
// --loss_scale=0.0 is the script's default, spelled as a float.
std::string phase1_line(const NvidiaDirs& d, const std::string& ckpts, const std::string& results) {
    return "pretrain --input_dir=" + d.phase1 + " --output_dir=" + ckpts + " --config_file=" +
           d.config + " --bert_model=bert-large-uncased --train_batch_size=8"
           " --max_seq_length=128 --max_predictions_per_seq=20 --max_steps=3"
           " --warmup_proportion=0.5 --num_steps_per_checkpoint=2 --learning_rate=6e-3"
           " --seed=12439 --fp16 --gradient_accumulation_steps=2 --allreduce_post_accumulation"
           " --allreduce_post_accumulation_fp16 --do_train --json-summary " + results +
           "/dllogger.json --loss_scale=0.0 --threads=1";
}

// Without --max_seq_length and --max_predictions_per_seq the script trains on a shard's arrays as
// they are (its defaults 512 and 80 check nothing): the phase-2 shard's 512 and 76 here.
TEST(NvidiaPyTorchCli, OmittedWidthsAreTheShards) {
    const NvidiaDirs d;
    const std::string ckpts = d.tmp.file("ckpts");
    // with two flags run_pretraining.py parses and never reads: its float --num_train_epochs and
    // --profile-start, no effect
    auto r = run_bertbench("pretrain --input_dir=" + d.phase2 + " --output_dir=" + ckpts +
                           " --config_file=" + d.config + " --train_batch_size=2 --max_steps=1"
                           " --do_train --json-summary= --num_train_epochs=3.0 --profile-start=0 --threads=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "--num_train_epochs: no effect (NVIDIA run_pretraining.py parses it"), 1u) << r.out;
    EXPECT_EQ(count_of(r.out, "the sequence length and predictions per row from the data, as its "
                              "loader takes them"), 1u) << r.out;
    const json cfg = json::parse(slurp(ckpts + "/config.json"));
    EXPECT_EQ(cfg["flags"]["max_seq_length"], 512);
    EXPECT_EQ(cfg["flags"]["max_predictions_per_seq"], 76);
}

// Without --json-summary both scripts write dllogger's stream to results/dllogger.json (their
// default, relative to the working directory); --json-summary='' writes none.
TEST(NvidiaPyTorchCli, JsonSummaryDefaultsToResultsDllogger) {
    const NvidiaDirs d;
    std::string line = phase1_line(d, d.tmp.file("ckpts"), "");
    line.erase(line.find(" --json-summary "), std::string(" --json-summary /dllogger.json").size());
    ASSERT_EQ(line.find("json-summary"), std::string::npos) << line;
    const std::string in = d.tmp.file("cwd"), none = d.tmp.file("cwd_none");
    fs::create_directories(in);
    fs::create_directories(none);
    auto r = run_shell("cd '" + in + "' && " + bertbench_path() + " " + line);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string stream = slurp(in + "/results/dllogger.json");
    EXPECT_EQ(stream.rfind("DLLL {", 0), 0u) << stream.substr(0, 200);
    EXPECT_NE(stream.find("\"final_loss\""), std::string::npos) << stream.substr(0, 400);
    r = run_shell("cd '" + none + "' && " + bertbench_path() + " " + line + " --output_dir=" + d.tmp.file("ckpts2") +
                  " --json-summary=");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_FALSE(fs::exists(none + "/results")) << r.out;
}

// --steps_this_run stops the run short of --max_steps without finishing it: the same line with a
// later stop (here its default, -1: --max_steps) continues from the checkpoint, as NVIDIA's
// rerun with --resume_from_checkpoint does.
TEST(NvidiaPyTorchCli, StepsThisRunStopsAResumableRun) {
    const NvidiaDirs d;
    const std::string ckpts = d.tmp.file("ckpts"), line = phase1_line(d, ckpts, d.tmp.file("results"));
    auto r = run_bertbench(line + " --steps_this_run=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    json res = json::parse(slurp(ckpts + "/results.json"));
    EXPECT_EQ(res["global_step"], 2);  // 1 update x 2 micro-steps
    EXPECT_NE(res["status"].get<std::string>().find("stopped at step 2 of 6"), std::string::npos) << res.dump();
    EXPECT_NE(r.out.find("pretrain stopped (--steps_this_run), not finished: step 2,"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("with a later --steps_this_run (or none) continues the run"), std::string::npos) << r.out;
    // the same stop again: no update in this process, so no rate in its dllogger summary (null, where
    // a NaN made the line unreadable to a strict JSON parser)
    const std::string stream = d.tmp.file("results") + "/dllogger.json";
    r = run_bertbench(line + " --steps_this_run=1 --resume_from_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(dllogger_lines(stream).back()["data"]["training_sequences_per_second"].is_null())
        << dllogger_lines(stream).back().dump();
    // its schedule's flags cannot change in the middle of the run
    std::string other = line;
    other.replace(other.find("--warmup_proportion=0.5"), 23, "--warmup_proportion=0.7");
    r = run_bertbench(other + " --steps_this_run=-1 --resume_from_checkpoint");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("warmup_proportion"), std::string::npos) << r.out;
    // any negative value is its -1 (`if args.steps_this_run < 0: args.steps_this_run = args.max_steps`)
    r = run_bertbench(line + " --steps_this_run=-2 --resume_from_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("nothing to do"), std::string::npos) << r.out;
    res = json::parse(slurp(ckpts + "/results.json"));
    EXPECT_EQ(res["global_step"], 6);
    EXPECT_EQ(testing::read_jsonl(ckpts + "/train_log.jsonl").size(), 3u);  // updates 1, 2, 3
    // the resumed process's rate, as NVIDIA's: its 2 updates' sequences over its own time
    const json summary = dllogger_lines(stream).back()["data"];
    EXPECT_EQ(res["segment_samples"], 2 * res["global_batch_size"].get<int>());
    EXPECT_LT(res["segment_wall_time_s"].get<double>(), res["wall_time_s"].get<double>());
    EXPECT_DOUBLE_EQ(summary["raw_train_time"].get<double>(), res["segment_wall_time_s"].get<double>());
    EXPECT_DOUBLE_EQ(summary["training_sequences_per_second"].get<double>(),
                     2 * res["global_batch_size"].get<double>() / res["segment_wall_time_s"].get<double>());
    // its checkpoints at the updates that are multiples of --num_steps_per_checkpoint=2 after the
    // resume too (update 2 = step 4), as an uninterrupted run's; then the final one
    for (const char* step : {"2", "4", "6"})
        EXPECT_TRUE(fs::exists(ckpts + "/model.ckpt-" + step + ".safetensors")) << step << "\n" << r.out;
    r = run_bertbench(line + " --resume_from_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("nothing to do"), std::string::npos) << r.out;  // finished now
    // past --max_steps=3: NVIDIA's trains on at a NaN rate; here the run ends at 3, said once
    r = run_bertbench(line + " --steps_this_run=5 --resume_from_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "warning: --steps_this_run=5: past the run's end, micro-step 6, where "
                              "bertbench stops"), 1u) << r.out;
    EXPECT_NE(r.out.find("nothing to do"), std::string::npos) << r.out;
}

// Phase 2's CMD: seq 512, --phase2 --resume_from_checkpoint --phase1_end_step=<phase 1's updates>,
// and the flags the current script (HEAD) adds: --num_workers, --disable_jit_fusions.
std::string phase2_line(const NvidiaDirs& d, const std::string& ckpts, const std::string& results,
                        const std::string& phase1_end_step) {
    return "pretrain --input_dir=" + d.phase2 + " --output_dir=" + ckpts + " --config_file=" +
           d.config + " --bert_model=bert-large-uncased --train_batch_size=4"
           " --max_seq_length=512 --max_predictions_per_seq=76 --max_steps=2"
           " --warmup_proportion=0.5 --num_steps_per_checkpoint=2 --learning_rate=4e-3"
           " --seed=12439 --fp16 --gradient_accumulation_steps=2 --allreduce_post_accumulation"
           " --allreduce_post_accumulation_fp16 --do_train --phase2 --resume_from_checkpoint"
           " --phase1_end_step=" + phase1_end_step + " --json-summary " + results +
           "/dllogger.json --num_workers=4 --disable_jit_fusions --threads=1";
}

TEST(NvidiaPyTorchCli, RunPretrainingPhase1ThenPhase2) {
    const NvidiaDirs d;
    const std::string ckpts = d.tmp.file("checkpoints"), results = d.tmp.file("results");
    auto r = run_bertbench(phase1_line(d, ckpts, results));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // every flag of the line that changes nothing is said so (this one is not in the no-effect list:
    // NGC TF's line, which shares it, reads it)
    EXPECT_EQ(count_of(r.out, "--allreduce_post_accumulation: no effect on NVIDIA PyTorch run_pretraining.py's line"),
              1u) << r.out;
    EXPECT_EQ(count_of(r.out, "NVIDIA PyTorch run_pretraining.py meaning of the flags (--input_dir "
                           "given): --train_batch_size=8 per GPU (here per rank) and update / "
                           "--gradient_accumulation_steps=2 = micro-batches of 4 x 1 rank = global "
                           "batch 8 per update (bertbench --train_batch_size=4 --steps_per_update=2)"
                           "; --input_dir: its 2 *training* file(s); --max_steps=3 updates -> "
                           "--num_train_steps=6; --warmup_proportion=0.5 -> --num_warmup_steps=4; "
                           "the rate as its PolyWarmUpScheduler"), 1u) << r.out;
    EXPECT_NE(r.out.find("--fp16"), std::string::npos) << r.out;  // listed as without effect
    // argparse's float 0.0: NVIDIA's dynamic loss scaling, none on this run
    EXPECT_NE(r.out.find("--loss_scale=0.0 (NVIDIA's dynamic scaling for --fp16): no loss scaling"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("unexpected argument"), std::string::npos) << r.out;
    const json cfg = json::parse(slurp(ckpts + "/config.json"));
    EXPECT_EQ(cfg["flags"]["batch_flags_meaning"], "nvidia_pytorch");
    EXPECT_EQ(cfg["flags"]["train_batch_size"], 4);
    EXPECT_EQ(cfg["flags"]["steps_per_update"], 2);
    EXPECT_EQ(cfg["flags"]["num_train_steps"], 6);
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 4);  // round(0.5 x 3) = 2 updates
    EXPECT_EQ(cfg["flags"]["poly_power"], 0.5);
    EXPECT_EQ(cfg["flags"]["keep_checkpoint_max"], 3);
    EXPECT_EQ(cfg["flags"]["clip_by_global_norm_after_gradient_allreduce"], true);
    ASSERT_EQ(cfg["train_files"].size(), 2u);  // the test shard is not read
    for (const auto& f : cfg["train_files"])
        EXPECT_NE(f.get<std::string>().find("_training_"), std::string::npos) << f;
    const json res = json::parse(slurp(ckpts + "/results.json"));
    EXPECT_EQ(res["global_step"], 6);
    EXPECT_EQ(res["updates"], 3);
    EXPECT_EQ(res["samples"], 24);
    EXPECT_TRUE(fs::exists(ckpts + "/model.ckpt-4.safetensors"));  // every 2 updates
    EXPECT_TRUE(fs::exists(ckpts + "/model.ckpt-6.safetensors"));
    // PolyWarmUpScheduler's rate (schedulers.py, stepped before each update from the optimizer's
    // step count): update u of max_steps T = 3, warm-up 0.5, lr 6e-3 gets 6e-3 (u/T)/0.5 while
    // u/T < 0.5, then 6e-3 (1 - u/T)^0.5: the first > 0, the last 0
    const auto polywarmup = [](double u, double T, double w, double lr) {
        return static_cast<float>(u / T < w ? lr * (u / T) / w : lr * std::pow(1.0 - u / T, 0.5));
    };
    const auto p1_log = testing::read_jsonl(ckpts + "/train_log.jsonl");
    ASSERT_EQ(p1_log.size(), 3u);
    for (size_t u = 1; u <= 3; ++u)
        EXPECT_FLOAT_EQ(p1_log[u - 1]["learning_rate"].get<float>(), polywarmup(static_cast<double>(u), 3, 0.5, 6e-3))
            << "update " << u;
    EXPECT_EQ(p1_log[2]["learning_rate"].get<double>(), 0.0);
    // dllogger: the config, a loss entry per update (--log_freq 1), the final loss, the summary.
    std::vector<std::string> metadata;
    auto lines = dllogger_lines(results + "/dllogger.json", &metadata);
    EXPECT_EQ(metadata, (std::vector<std::string>{"e2e_train_time", "training_sequences_per_second",
                                                  "final_loss", "raw_train_time"}));
    ASSERT_GE(lines.size(), 6u);
    EXPECT_EQ(lines[0]["step"], "PARAMETER");
    EXPECT_TRUE(lines[0]["data"]["Config"].is_array());
    EXPECT_EQ(with_key(lines, "batch_size_per_gpu").at(0)["data"]["batch_size_per_gpu"], 4);
    const auto losses = with_key(lines, "average_loss");
    ASSERT_EQ(losses.size(), 2u);
    EXPECT_EQ(losses[0]["step"], json::array({0, 1}));
    // {"checkpoint_step": update} after the loss entry of each update it saves at (2 and the last, 3)
    std::vector<json> saved_after;
    for (size_t i = 1; i < lines.size(); ++i)
        if (lines[i]["data"].contains("checkpoint_step"))
            saved_after.push_back(json::array({lines[i]["data"]["checkpoint_step"], lines[i - 1]["step"]}));
    EXPECT_EQ(json(saved_after), json::parse("[[2, [0, 2]], [3, [0, 3]]]"));
    EXPECT_GT(losses[0]["data"]["average_loss"].get<double>(), 0);
    EXPECT_EQ(with_key(lines, "final_loss").at(0)["step"], json::array({0, 3}));
    const json& last = lines.back();
    EXPECT_EQ(last["step"], json::array());
    for (const char* k : {"e2e_train_time", "training_sequences_per_second", "final_loss",
                          "raw_train_time"})
        EXPECT_TRUE(last["data"][k].is_number()) << k << " " << last.dump();
    // NVIDIA's times: raw = this process's training (results.json's run_start..run_stop: the whole
    // run here, one process), e2e = set-up + it; the rate = the sequences of every update / raw
    const json p1_res = json::parse(slurp(ckpts + "/results.json"));
    const double raw = last["data"]["raw_train_time"].get<double>();
    EXPECT_DOUBLE_EQ(raw, p1_res["segment_wall_time_s"].get<double>());
    EXPECT_DOUBLE_EQ(raw, p1_res["wall_time_s"].get<double>());
    EXPECT_DOUBLE_EQ(last["data"]["e2e_train_time"].get<double>(), p1_res["initialization_s"].get<double>() + raw);
    EXPECT_EQ(p1_res["segment_samples"], p1_res["global_batch_size"].get<int>() * 3);
    EXPECT_DOUBLE_EQ(last["data"]["training_sequences_per_second"].get<double>(),
                     p1_res["global_batch_size"].get<double>() * 3 / raw);

    // Phase 2 in the same checkpoint directory: a run of its own in <dir>/phase2 from phase 1's
    // last checkpoint, phase 1's files untouched.
    const std::string phase1_results = slurp(ckpts + "/results.json");
    r = run_bertbench(phase2_line(d, ckpts, results, "3"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "--phase2: phase 2 trains in " + ckpts + "/phase2 from " + ckpts +
                           "/model.ckpt-6.safetensors (its weights and LAMB's moments, the bias "
                           "correction restarting"),
              1u) << r.out;
    EXPECT_EQ(r.out.find("--phase1_end_step=3: phase 1"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(ckpts + "/results.json"), phase1_results);
    const json res2 = json::parse(slurp(ckpts + "/phase2/results.json"));
    EXPECT_EQ(res2["global_step"], 4);
    const auto p2_log = testing::read_jsonl(ckpts + "/phase2/train_log.jsonl");
    ASSERT_EQ(p2_log.size(), 2u);  // phase 2's updates counted from 1 again
    for (size_t u = 1; u <= 2; ++u)
        EXPECT_FLOAT_EQ(p2_log[u - 1]["learning_rate"].get<float>(), polywarmup(static_cast<double>(u), 2, 0.5, 4e-3))
            << "phase 2 update " << u;
    EXPECT_EQ(res2["samples"], 8);
    EXPECT_EQ(json::parse(slurp(ckpts + "/phase2/config.json"))["flags"]["init_checkpoint"],
              ckpts + "/model.ckpt-6.safetensors");
    // Phase 1's second moments carried over: after phase 2's 2 updates v >= beta_2^2 * v_phase1
    // everywhere (v = beta_2 v + (1 - beta_2) g^2), which moments started at zero would not give.
    {
        const char* v_name = "bert/encoder/layer_0/attention/self/query/kernel/adam_v";
        const std::vector<float> v1 =
            io::SafetensorsReader(ckpts + "/model.ckpt-6.safetensors").read_f32(v_name);
        const std::vector<float> v2 =
            io::SafetensorsReader(ckpts + "/phase2/model.ckpt-4.safetensors").read_f32(v_name);
        ASSERT_EQ(v1.size(), v2.size());
        size_t below = 0;
        for (size_t i = 0; i < v1.size(); ++i) below += v2[i] < 0.999 * 0.999 * v1[i] * (1 - 1e-6);
        EXPECT_EQ(below, 0u) << "of " << v1.size();
    }
    lines = dllogger_lines(results + "/dllogger.json");  // phase 2's, as NVIDIA's rewrites it
    EXPECT_EQ(with_key(lines, "final_loss").at(0)["step"], json::array({0, 2}));

    // The line again resumes phase 2 (finished); a --phase1_end_step that is not phase 1's
    // update count is said in one warning.
    r = run_bertbench(phase2_line(d, ckpts, results, "7038"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "--phase2: resuming phase 2 in " + ckpts + "/phase2"), 1u) << r.out;
    EXPECT_EQ(count_of(r.out, "--phase1_end_step=7038: phase 1 in " + ckpts + " ended after 3 "
                           "optimizer updates"), 1u) << r.out;
    EXPECT_EQ(json::parse(slurp(ckpts + "/phase2/results.json"))["global_step"], 4);
    // NVIDIA's rerun without --resume_phase2 restarts the step (warm-up, bias correction); here
    // the schedule continues, said once; with the flag, NVIDIA's continues too: nothing to say.
    const std::string restart = "warning: --phase2: phase 2 resumes in " + ckpts + "/phase2 with its "
                                "learning-rate schedule and LAMB's bias correction continued";
    EXPECT_EQ(count_of(r.out, restart), 1u) << r.out;
    r = run_bertbench(phase2_line(d, ckpts, results, "3") + " --resume_phase2");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "--phase2: resuming phase 2 in " + ckpts + "/phase2"), 1u) << r.out;
    EXPECT_EQ(r.out.find("warning: "), std::string::npos) << r.out;

    // --init_checkpoint on the phase-1 line: NVIDIA's script reads it only with
    // --resume_from_checkpoint, and then takes its optimizer state too, the steps from 0.
    const std::string first_loss = testing::read_jsonl(ckpts + "/train_log.jsonl")[0]["loss"].dump();
    const std::string ignored = d.tmp.file("ignored");
    r = run_bertbench(phase1_line(d, ignored, results) + " --init_checkpoint=" + ckpts +
                      "/model.ckpt-6.safetensors");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "warning: --init_checkpoint=" + ckpts + "/model.ckpt-6.safetensors "
                              "without --resume_from_checkpoint: not read"), 1u) << r.out;
    EXPECT_EQ(testing::read_jsonl(ignored + "/train_log.jsonl")[0]["loss"].dump(), first_loss);
    const std::string from = d.tmp.file("from");
    r = run_bertbench(phase1_line(d, from, results) + " --resume_from_checkpoint --init_checkpoint=" +
                      ckpts + "/model.ckpt-6.safetensors");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("optimizer moments from " + ckpts + "/model.ckpt-6.safetensors"),
              std::string::npos) << r.out;
    EXPECT_NE(testing::read_jsonl(from + "/train_log.jsonl")[0]["loss"].dump(), first_loss);
    EXPECT_EQ(json::parse(slurp(from + "/results.json"))["global_step"], 6);  // from step 0
    // --resume_phase2 on a phase 2 not yet started: NVIDIA's would keep phase 1's step count;
    // here phase 2 starts at update 0 (its learning rates as the first phase 2's), with a warning.
    r = run_bertbench(phase2_line(d, from, results, "3") + " --resume_phase2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "warning: --resume_phase2 before phase 2 has a checkpoint in " + from +
                              "/phase2: NVIDIA's script would keep phase 1's update count"), 1u) << r.out;
    const auto fresh_log = testing::read_jsonl(from + "/phase2/train_log.jsonl");
    ASSERT_EQ(fresh_log.size(), 2u);
    for (size_t u = 1; u <= 2; ++u)
        EXPECT_EQ(fresh_log[u - 1]["learning_rate"], p2_log[u - 1]["learning_rate"]) << "update " << u;

    // Phase 2 with no phase 1 before it: one line naming the directory, nothing created.
    const std::string none = d.tmp.file("none");
    r = run_bertbench(phase2_line(d, none, results, "3"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("--phase2: expected phase 1's checkpoint in --output_dir=" + none),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(none));
}

// bertbench's own schedule flag on NVIDIA's line replaces its PolyWarmUpScheduler, said with its
// units; a line without --do_train (which NVIDIA's script refuses) trains with a warning; a
// fractional --max_steps trains the updates it rounds up to.
TEST(NvidiaPyTorchCli, OwnScheduleFlagsAndAMissingDoTrainAreSaid) {
    const NvidiaDirs d;
    std::string line = phase1_line(d, d.tmp.file("ckpts"), d.tmp.file("results"));
    line.replace(line.find(" --do_train"), 11, "");
    line.replace(line.find("--max_steps=3"), 13, "--max_steps=2.5");
    line.replace(line.find("--warmup_proportion=0.5"), 23, "--num_warmup_steps=2");
    auto r = run_bertbench(line);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "warning: --do_train not given: NVIDIA PyTorch run_pretraining.py raises"), 1u) << r.out;
    // (its T is only kept by its own scheduler, which bertbench's flag replaced)
    EXPECT_NE(r.out.find("--max_steps=3 updates (its 2.5 rounded up) -> --num_train_steps=6"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("bertbench's own --num_warmup_steps given: not its PolyWarmUpScheduler but TF's schedule, "
                         "in micro-steps (a linear warm-up over --num_warmup_steps=2"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("the rate as its PolyWarmUpScheduler"), std::string::npos) << r.out;
    // with its own scheduler, T keeps the fraction
    std::string poly = phase1_line(d, d.tmp.file("ckpts_poly"), d.tmp.file("results_poly"));
    poly.replace(poly.find("--max_steps=3"), 13, "--max_steps=2.5");
    r = run_bertbench(poly);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--max_steps=3 updates (its 2.5 rounded up; its schedule's T stays 2.5)"), std::string::npos)
        << r.out;
}

// One script's flags, one meaning; each refusal is one line naming the flag, before any work.
TEST(NvidiaPyTorchCli, MixedOrBadFlagsAreOneLineErrors) {
    const NvidiaDirs d;
    const std::string out = d.tmp.file("a/b");
    const std::string base = "pretrain --config_file=" + d.config + " --output_dir=" + out +
                             " --max_seq_length=128 --max_predictions_per_seq=20 --threads=1 --do_train";
    const std::vector<std::pair<std::string, std::string>> cases{
        {" --input_dir=" + d.phase1 + "/books_wiki_en_corpus_training_0.hdf5",
         "--input_dir=" + d.phase1 + "/books_wiki_en_corpus_training_0.hdf5: expected a directory"},
        {" --input_dir=" + d.tmp.file("."), "expected HDF5 shards whose names contain \"training\""},
        {" --input_dir=" + d.phase1 + " --gradient_accumulation_steps=2 --num_accumulation_steps=2",
         "--num_accumulation_steps: expected the flags of one script"},
        {" --input_dir=" + d.phase1 + " --use_xla", "--use_xla: expected the flags of one script"},
        {" --input_dir=" + d.phase1 + " --max_steps=3 --num_train_steps=6",
         "--num_train_steps and --max_steps: expected one of them"},
        {" --input_dir=" + d.phase1 + " --train_batch_size=7 --gradient_accumulation_steps=2",
         "--train_batch_size=7: expected a positive multiple of --gradient_accumulation_steps=2"},
        {" --input_dir=" + d.phase1 + " --resume_step=4",
         "unknown flag --resume_step (not supported: bertbench resumes from the latest"},
        {" --input_dir=" + d.phase1 + " --eval_script=evaluate-v1.1.py",
         "unknown flag --eval_script (run_squad.py's flag: bertbench squad takes it)"},
        // Another script's `--name value`: the value is not a second error.
        {" --input_dir=" + d.phase1 + " --frobnicate results/dllogger.json",
         "unknown flag --frobnicate"},
        {" --input_dir " + d.phase1 + " --json-summary " + d.tmp.file("."),
         "--json-summary=" + d.tmp.file(".") + ": is a directory"},
        {" --input_dir=" + d.phase1 + " --log_freq=0", "--log_freq=0: expected a positive number"},
        // the --output_dir the run makes (it trained, then could not write the stream there)
        {" --input_dir=" + d.phase1 + " --json-summary " + out,
         "--json-summary=" + out + ": is --output_dir=" + out + ", a directory the run writes into"},
    };
    for (const auto& [extra, want] : cases) {
        const auto r = run_bertbench(base + extra);
        EXPECT_EQ(r.exit_code, 1) << extra << "\n" << r.out;
        EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
        EXPECT_EQ(r.out.find("bad flags"), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
        EXPECT_FALSE(fs::exists(d.tmp.file("a"))) << extra;
    }
}

// The tiny model's pretrained weights as NVIDIA's scripts take them: a .pt file (HF names).
std::string pretrained_pt(const TmpDir& tmp, const std::string& config) {
    testing::save_initialized_checkpoint(config, tmp.file("init.safetensors"), 3);
    const auto r = run_bertbench("convert --to=pt --input=" + tmp.file("init.safetensors") +
                                 " --output=" + tmp.file("bert_uncased.pt"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return tmp.file("bert_uncased.pt");
}

// scripts/run_squad.sh's CMD in its "train eval" mode, then in its "eval" mode with the
// fine-tuned checkpoint, sizes shrunk (seq 128, stride 64, one GPU).
// --resume_from_checkpoint --init_checkpoint=<a .pt>: NVIDIA's script restores FusedLAMB's
// moments from it, which bertbench does not read from a PyTorch file: refused before anything is
// read or written, naming the file and what bertbench's own line does instead.
TEST(NvidiaPyTorchCli, ResumeFromAPtCheckpointIsRefusedAtOnce) {
    const NvidiaDirs d;
    const std::string pt = pretrained_pt(d.tmp, d.config), ckpts = d.tmp.file("ckpts");
    const auto r = run_bertbench(phase1_line(d, ckpts, d.tmp.file("results")) +
                                 " --resume_from_checkpoint --init_checkpoint=" + pt);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
    EXPECT_NE(r.out.find("error: --init_checkpoint=" + pt + ": expected the optimizer's moments to carry "
                         "over (<tensor>/adam_m and /adam_v, as a bertbench training checkpoint has "
                         "them), got a PyTorch checkpoint (its optimizer state is not read)"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("initialised from"), std::string::npos) << r.out;  // weights not read first
    EXPECT_FALSE(fs::exists(ckpts));
}

std::string run_squad_line(const NvidiaDirs& d, const std::string& init, const std::string& out,
                           bool train) {
    const std::string squad = golden("squad_pipeline");
    return "squad --init_checkpoint=" + init +
           (train ? " --do_train --train_file=" + squad + "/train-v1.1.json --train_batch_size=8"
                  : std::string()) +
           " --do_predict --predict_file=" + squad +
           "/dataset-v1.1.json --predict_batch_size=8"
           " --eval_script=" +
           squad +
           "/evaluate-v1.1.py --do_eval --do_lower_case"
           " --bert_model=bert-large-uncased --learning_rate=3e-4 --seed=1 --num_train_epochs=2.0"
           " --max_seq_length=128 --doc_stride=64 --output_dir=" +
           out + " --vocab_file=" + golden("vocab.txt") + " --config_file=" + d.config +
           " --max_steps=-1 --fp16"
           " --json-summary=" +
           out + "/dllogger.json --threads=1";
}

TEST(NvidiaPyTorchCli, RunSquadTrainEvalThenEvalLines) {
    const NvidiaDirs d;
    const std::string pt = pretrained_pt(d.tmp, d.config);
    const std::string out = d.tmp.file("squad");
    auto r = run_bertbench(run_squad_line(d, pt, out, true));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "NVIDIA PyTorch run_squad.py meaning of the flags (--max_steps given): "
                           "--train_batch_size=8 per GPU (here per rank) and update x 1 rank = 8 "
                           "sequences per update, computed as one batch (bertbench "
                           "--train_batch_size=8); whole epochs over the features and its "
                           "warmup_linear schedule with FusedAdam (--fp16); prediction without "
                           "--do_train uses --init_checkpoint, as that script\n"), 1u) << r.out;
    // Its loop's length and its optimizer's schedule: int(2.0) epochs over the features in
    // batches of 8 (the last one of an epoch partial there), the learning rate of apex's
    // LinearWarmUpScheduler (--fp16), which steps before each update, over t_total =
    // int(69 examples / 8) * 2.0 = 16 with warm-up 0.1 (optimization.py's warmup_linear).
    const int64_t features = json::parse(slurp(out + "/config.json"))["num_train_features"];
    const auto log = testing::read_jsonl(out + "/train_log.jsonl");
    ASSERT_EQ(static_cast<int64_t>(log.size()), 2 * ((features + 7) / 8));
    const auto nvidia_lr = [](int64_t update) {
        const double x = static_cast<double>(update) / 16.0;
        return static_cast<float>(x < 0.1 ? 3e-4 * x / 0.1 : 3e-4 * std::max((x - 1) / (0.1 - 1), 0.0));
    };
    for (size_t i = 0; i < log.size(); ++i)
        EXPECT_FLOAT_EQ(log[i]["learning_rate"].get<float>(), nvidia_lr(static_cast<int64_t>(i) + 1))
            << "update " << i + 1;
    EXPECT_NE(r.out.find("--do_eval"), std::string::npos) << r.out;  // listed, no effect
    EXPECT_NE(r.out.find("{\"exact_match\": "), std::string::npos) << r.out;
    std::vector<std::string> metadata;
    const auto lines = dllogger_lines(out + "/dllogger.json", &metadata);
    EXPECT_EQ(metadata.size(), 7u);  // run_squad.py's: the summary's metrics and their units
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0]["step"], "PARAMETER");
    // run_squad.py's PARAMETER entries in its order: the header, its torch.load, training's, prediction's
    std::vector<std::string> params;
    for (const json& l : lines)
        if (l["step"] == "PARAMETER") params.push_back(l["data"].begin().key());
    EXPECT_EQ(params, (std::vector<std::string>{
                          "Config", "SEED", "loading_checkpoint", "loaded_checkpoint",
                          "model_weights_num", "train_start", "training_samples", "training_features",
                          "train_batch_size", "steps", "infer_start", "eval_samples", "eval_features",
                          "predict_batch_size", "eval_start", "sample_number"}));
    const auto param = [&](const char* k) { return with_key(lines, k).at(0)["data"][k]; };
    // BertForQuestionAnswering's parameters, the vocabulary padded to 30528: embeddings and their
    // LayerNorm, 2 layers (Q, K, V, output, LayerNorm, intermediate, output, LayerNorm), pooler, qa_outputs
    const int64_t h = 64, inter = 128;
    EXPECT_EQ(param("model_weights_num"),
              (30528 + 512 + 2 + 2) * h + 2 * (4 * (h * h + h) + 2 * h + h * inter + inter + inter * h + h + 2 * h) +
                  h * h + h + 2 * h + 2);
    EXPECT_EQ(param("training_samples"), 69);
    EXPECT_EQ(param("training_features"), features);
    EXPECT_EQ(param("train_batch_size"), 8);
    EXPECT_TRUE(param("steps").is_number_float());  // int(69 / 8 / 1) * 2.0, a float there
    EXPECT_EQ(param("steps"), 16.0);
    const int64_t eval_features = json::parse(slurp(out + "/predict_speed.json"))["sequences"];
    EXPECT_EQ(param("eval_features"), eval_features);
    EXPECT_EQ(param("predict_batch_size"), 8);
    EXPECT_EQ(param("sample_number"), 0);  // before each batch that starts at a multiple of 1000
    // the summaries come last, after the prediction's entries
    EXPECT_EQ(lines[lines.size() - 3]["data"].begin().key(), "e2e_train_time");
    for (const char* k : {"e2e_train_time", "training_sequences_per_second", "final_loss",
                          "e2e_inference_time", "inference_sequences_per_second", "exact_match",
                          "F1"}) {
        const auto with = with_key(lines, k);
        ASSERT_EQ(with.size(), 1u) << k;
        EXPECT_TRUE(with[0]["data"][k].is_number()) << k;
    }
    EXPECT_EQ(with_key(lines, "exact_match")[0]["data"]["exact_match"],
              json::parse(slurp(out + "/eval_results.json"))["exact_match"]);
    // --max_steps=-1 (its default): the training features x --num_train_epochs over the training time
    EXPECT_DOUBLE_EQ(with_key(lines, "training_sequences_per_second")[0]["data"]["training_sequences_per_second"],
                     features * 2.0 / json::parse(slurp(out + "/results.json"))["segment_wall_time_s"].get<double>());
    // run_squad.py logs step_loss after each micro-batch whose index within its epoch is a
    // multiple of --log_freq (50 by default): the first of each epoch here, at [epoch, global_step]
    const int64_t per_epoch = (features + 7) / 8;
    ASSERT_LT(per_epoch, 50);
    const auto losses = with_key(lines, "step_loss");
    ASSERT_EQ(losses.size(), 2u);
    EXPECT_EQ(losses[0]["step"], json::array({0, 1}));
    EXPECT_EQ(losses[1]["step"], json::array({1, per_epoch + 1}));
    EXPECT_EQ(losses[1]["data"]["step_loss"], log[static_cast<size_t>(per_epoch)]["loss"]);
    EXPECT_EQ(with_key(lines, "final_loss")[0]["data"]["final_loss"], log.back()["loss"]);
    // run_squad.sh's benchmark line (--max_steps=N > 0): N + 1 updates run, and its
    // training_sequences_per_second counts N updates of the global batch over the training time
    std::string bench = run_squad_line(d, pt, d.tmp.file("squad_steps"), true);
    bench.replace(bench.find("--max_steps=-1"), 14, "--max_steps=2");
    ASSERT_EQ(run_bertbench(bench).exit_code, 0);
    const json steps_res = json::parse(slurp(d.tmp.file("squad_steps") + "/results.json"));
    EXPECT_EQ(steps_res["global_step"], 3);
    const double rate = with_key(dllogger_lines(d.tmp.file("squad_steps") + "/dllogger.json"),
                                 "training_sequences_per_second")[0]["data"]["training_sequences_per_second"];
    EXPECT_DOUBLE_EQ(rate, 8.0 * 2 / steps_res["segment_wall_time_s"].get<double>());

    // The eval line loads --init_checkpoint, as NVIDIA's script, even where --output_dir holds a
    // fine-tuned checkpoint (google's Estimator would take that one): the pretrained .pt has no
    // span head and is refused naming it.
    r = run_bertbench(run_squad_line(d, pt, out, false));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(pt), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cls/squad/output"), std::string::npos) << r.out;
    // With the fine-tuned model the training line left as run_squad.py does (pytorch_model.bin in
    // --output_dir), into a fresh directory: the training run's predictions.
    const std::string ckpt = out + "/pytorch_model.bin";
    ASSERT_TRUE(fs::exists(ckpt)) << r.out;
    const std::string eval_out = d.tmp.file("squad_eval");
    r = run_bertbench(run_squad_line(d, ckpt, eval_out, false));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "predicting with " + ckpt + " (--init_checkpoint, as NVIDIA's "
                              "run_squad.py)"), 1u) << r.out;
    EXPECT_EQ(slurp(eval_out + "/predictions.json"), slurp(out + "/predictions.json"));
    // A --predict_batch_size beyond the features runs one batch of them (the arena is not sized
    // for a million sequences).
    std::string huge = run_squad_line(d, ckpt, d.tmp.file("squad_huge"), false);
    huge.replace(huge.find("--predict_batch_size=8"), 22, "--predict_batch_size=1000000");
    r = run_bertbench(huge);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(fs::exists(d.tmp.file("squad_huge") + "/predictions.json"));
    // --skip_checkpoint: no pytorch_model.bin.
    const std::string skipped = d.tmp.file("squad_skip");
    r = run_bertbench(run_squad_line(d, pt, skipped, true) + " --skip_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_FALSE(fs::exists(skipped + "/pytorch_model.bin"));

    // run_squad.py's --log_freq is an int (run_pretraining.py's a float).
    r = run_bertbench(run_squad_line(d, pt, d.tmp.file("log_freq"), true) + " --log_freq=1.5");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: --log_freq=1.5: expected a positive integer (NVIDIA run_squad.py's argparse type=int"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d.tmp.file("log_freq")));
    // its argparse requires --init_checkpoint (random weights were fine-tuned without a word)
    std::string no_init = run_squad_line(d, pt, d.tmp.file("no_init"), true);
    no_init.erase(no_init.find("--init_checkpoint=" + pt), std::string("--init_checkpoint=" + pt).size());
    r = run_bertbench(no_init);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: --init_checkpoint: required on NVIDIA's run_squad.py line"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(d.tmp.file("no_init")));
    // run_pretraining.py's flags on squad name the command that takes them.
    r = run_bertbench(run_squad_line(d, pt, d.tmp.file("limited"), true) + " --phase2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("unknown flag --phase2 (run_pretraining.py's flag: bertbench pretrain "
                         "takes it)"), std::string::npos) << r.out;
    // --max_steps=5 (run_squad.sh's benchmark mode): its loop breaks when global_step > 5, after
    // the sixth update; the schedule is the whole run's.
    const std::string limited = d.tmp.file("limited");
    r = run_bertbench(run_squad_line(d, pt, limited, true) + " --max_steps=5");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto limited_log = testing::read_jsonl(limited + "/train_log.jsonl");
    ASSERT_EQ(limited_log.size(), 6u);
    EXPECT_EQ(limited_log.back()["learning_rate"], log[5]["learning_rate"]);
    // Without --fp16: BertAdam, whose schedule reads its step before the increment (0 first).
    std::string fp32_line = run_squad_line(d, pt, d.tmp.file("bert_adam"), true) + " --max_steps=3";
    fp32_line.replace(fp32_line.find(" --fp16"), 7, "");
    r = run_bertbench(fp32_line);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("BertAdam (eps 1e-6)"), std::string::npos) << r.out;
    const auto bert_adam_log = testing::read_jsonl(d.tmp.file("bert_adam") + "/train_log.jsonl");
    ASSERT_EQ(bert_adam_log.size(), 4u);
    for (size_t i = 0; i < bert_adam_log.size(); ++i)
        EXPECT_FLOAT_EQ(bert_adam_log[i]["learning_rate"].get<float>(), nvidia_lr(static_cast<int64_t>(i)))
            << "update " << i + 1;
    // BertAdam's warm-up range, [0, 1), refused before the features are written
    for (const std::string v : {"1", "-0.1", "1.5"}) {
        const std::string dir = d.tmp.file("bert_adam_warmup_" + v);
        std::string line = run_squad_line(d, pt, dir, true) + " --warmup_proportion=" + v;
        line.replace(line.find(" --fp16"), 7, "");
        r = run_bertbench(line);
        EXPECT_EQ(r.exit_code, 1) << v << ": " << r.out;
        EXPECT_NE(r.out.find("error: --warmup_proportion=" + v + ": expected a fraction in [0, 1) (NVIDIA's BertAdam)"),
                  std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(dir + "/train.tf_record")) << v;
    }
    // its `args.max_steps > 0 and ...`: 0 (or any value <= 0) is no limit, as its default -1
    r = run_bertbench(run_squad_line(d, pt, d.tmp.file("no_limit"), true) + " --max_steps=0 --skip_checkpoint");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(testing::read_jsonl(d.tmp.file("no_limit") + "/train_log.jsonl").size(), log.size());
    // ... and NaN, and inf (a float there: "nan" > 0 is false)
    for (const std::string v : {"nan", "inf"}) {
        const std::string dir = d.tmp.file("no_limit_" + v);
        r = run_bertbench(run_squad_line(d, pt, dir, true) + " --max_steps=" + v + " --skip_checkpoint");
        ASSERT_EQ(r.exit_code, 0) << v << ": " << r.out;
        EXPECT_EQ(testing::read_jsonl(dir + "/train_log.jsonl").size(), log.size()) << v;
    }
}

}  // namespace
}  // namespace bertbench
