// Intel model zoo's PyTorch BERT-large pretraining benchmark lines (quickstart/language_modeling/
// pytorch/bert_large/training/cpu/run_bert_pretrain_phase{1,2}.sh: `python -m
// intel_extension_for_pytorch.cpu.launch ... run_pretrain_mlperf.py --benchmark ...`), run with the
// launcher's module replaced by scripts/ipex_launch.py, sizes shrunk: the phase-1 line (a config
// without model_type, HDF5 `part` shards, fp32) and the phase-2 line (phase 1's model as a
// save_pretrained directory, seq 512 shards, --bf16). Each writes the launcher's log files, and the
// Throughput line the quickstart greps is the script's formula (40 x batch / the time of
// micro-batches 11..51) over bertbench's measured rate. Lines it cannot map are one-line refusals
// that run and write nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "core/fs.hpp"

namespace bertbench::ipex_launch_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::golden;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// $DATASET_DIR of Intel's guide: 2048_shards_uncompressed_{128,512}/ (two `part` shards each, the
// golden HDF5 twins, and a file the script skips), and a BERT config as MLCommons ships it (no
// model_type: transformers reads it as BERT's by its name, "gelu" the erf form).
struct IntelData {
    TmpDir tmp{"bb_ipex"};
    std::string p128 = tmp.file("2048_shards_uncompressed_128"),
                p512 = tmp.file("2048_shards_uncompressed_512"), config = tmp.file("bert_config.json");
    IntelData() {
        for (const auto& [dir, twin] : {std::pair{p128, "public_128_s12345_d2"},
                                        std::pair{p512, "public_512_s12345_d1"}}) {
            fs::create_directories(dir);
            for (const char* part : {"/part_00000_of_00002.hdf5", "/part_00001_of_00002.hdf5"})
                fs::copy_file(golden(std::string("hdf5/") + twin + ".hdf5"), dir + part);
            write_file_atomic(dir + "/README", "not a shard\n");
        }
        write_file_atomic(config,
                            R"({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", )"
                            R"("hidden_dropout_prob": 0.1, "hidden_size": 64, "initializer_range": 0.02, )"
                            R"("intermediate_size": 128, "max_position_embeddings": 512, )"
                            R"("num_attention_heads": 2, "num_hidden_layers": 2, "type_vocab_size": 2, )"
                            R"("vocab_size": 30522})");
    }
};

// run_bert_pretrain_phase1.sh's line (batch 224 -> 4).
std::string phase1_line(const IntelData& d, const std::string& out) {
    return "--node_id 0 --enable_jemalloc --log_path=" + out +
           " --log_file_prefix=./throughput_log_phase1_fp32 models/language_modeling/pytorch/"
           "bert_large/training/run_pretrain_mlperf.py --input_dir " + d.p128 +
           "/ --eval_dir " + d.tmp.file("eval_set_uncompressed") + "/ --model_type bert --benchmark"
           " --ipex --output_dir " + out + "/model_save --dense_seq_output --config_name " +
           d.config + " --benchmark --train_batch_size=4 --learning_rate=3.5e-4"
           " --opt_lamb_beta_1=0.9 --opt_lamb_beta_2=0.999 --warmup_proportion=0.0"
           " --warmup_steps=0.0 --start_warmup_step=0 --max_steps=13700"
           " --max_predictions_per_seq=76 --do_train --train_mlm_accuracy_window_size=0"
           " --target_mlm_accuracy=0.720 --weight_decay_rate=0.01 --max_samples_termination=4500000"
           " --eval_iter_start_samples=150000 --eval_iter_samples=150000 --eval_batch_size=16"
           " --gradient_accumulation_steps=1 --num_samples_per_checkpoint 1"
           " --min_samples_to_start_checkpoints 1 --log_freq 1";
}

// The run bertbench made under --output_dir, and its results.json.
json only_run(const std::string& model_save, std::string* run_dir) {
    const auto runs = testing::matching_files(model_save, "bertbench-[0-9]{14}");
    EXPECT_EQ(runs.size(), 1u);
    if (runs.empty()) return json();
    *run_dir = runs[0];
    return json::parse(slurp(runs[0] + "/results.json"));
}

// The quickstart's own extraction: grep 'Throughput:' <logs>* | sed ... | awk mean.
std::string quickstart_mean(const std::string& glob) {
    return run_shell("grep 'Throughput:' " + glob +
                     " | sed -e 's/.*Throughput//;s/[^0-9.]//g' | awk 'BEGIN{s=0;i=0}{s+=$1;i++}"
                     "END{printf(\"%.3f\", s/i)}'")
        .out;
}

TEST(IpexLaunch, QuickstartPhase1And2LinesPrintTheScriptsThroughput) {
    const IntelData d;
    const std::string out = d.tmp.file("output");
    auto r = testing::run_script("ipex_launch.py", phase1_line(d, out),
                                 "MALLOC_CONF=oversize_threshold:1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string run;
    const json res = only_run(out + "/model_save", &run);
    ASSERT_FALSE(run.empty());
    // 51 updates of 4 (the rate over the last 41), widths from the data, IPEX Lamb's eps, fp32, the
    // config as transformers reads it (erf GELU).
    EXPECT_EQ(res["updates"], 51);
    EXPECT_EQ(res["global_batch_size"], 4);
    EXPECT_EQ(res["dtype"], "fp32");
    const json cfg = json::parse(slurp(run + "/config.json"));
    EXPECT_EQ(cfg["flags"]["max_seq_length"], 128);
    EXPECT_EQ(cfg["flags"]["max_predictions_per_seq"], 20);
    EXPECT_EQ(cfg["flags"]["log_epsilon"], -8.0);
    EXPECT_EQ(cfg["flags"]["num_train_steps"], 13700);
    EXPECT_EQ(cfg["flags"]["warmup_updates_excluded"], 10);
    EXPECT_EQ(cfg["bert_config"]["hidden_act"], "gelu_erf");
    EXPECT_EQ(cfg["train_files"].size(), 2u);  // the `part` files, not README
    // The launcher's files: <prefix>_<time>_instance_0_cores_<pool>.log with the run's output and
    // the Throughput line, <prefix>_<time>_instances.log with its own lines.
    const auto inst = testing::matching_files(
        out, "throughput_log_phase1_fp32_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    const auto own =
        testing::matching_files(out, "throughput_log_phase1_fp32_[0-9]{14}_instances\\.log");
    ASSERT_EQ(inst.size(), 1u) << r.out;
    ASSERT_EQ(own.size(), 1u) << r.out;
    const std::string want = fmt::format(
        "Throughput: {:.3f} sentence/s", res["train_sequences_per_second"].get<double>() * 40 / 41);
    EXPECT_NE(slurp(inst[0]).find(want + "\n"), std::string::npos) << slurp(inst[0]);
    // --benchmark's 51 updates of the schedule: --stop_steps, the run not finished
    EXPECT_NE(slurp(inst[0]).find("pretrain stopped (--stop_steps), not finished"), std::string::npos);
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    EXPECT_EQ(slurp(own[0]).find("Throughput:"), std::string::npos);
    EXPECT_NE(slurp(own[0]).find("ipex_launch.py: running: "), std::string::npos);
    EXPECT_EQ(quickstart_mean(out + "/throughput_log_phase1_fp32*"),
              want.substr(12, want.find(' ', 12) - 12));

    // run_bert_pretrain_phase2.sh's line: phase 1's model (save_pretrained's directory), seq 512
    // shards, bf16, no config flag (batch 28 -> 2).
    const std::string model = d.tmp.file("checkpoint");
    ASSERT_EQ(run_bertbench("convert --to=hf --input=" + res["last_checkpoint"].get<std::string>() +
                            " --output=" + model).exit_code, 0);
    r = testing::run_script(
        "ipex_launch.py",
        "--node_id 0 --enable_jemalloc --log_path=" + out +
            " --log_file_prefix=./throughput_log_phase2_bf16 run_pretrain_mlperf.py --input_dir " +
            d.p512 + " --model_name_or_path " + model + " --benchmark --ipex --output_dir " + out +
            "/model_save2 --dense_seq_output --bf16 --train_batch_size=2 --learning_rate=3.5e-4"
            " --opt_lamb_beta_1=0.9 --opt_lamb_beta_2=0.999 --warmup_proportion=0.0"
            " --warmup_steps=0.0 --start_warmup_step=0 --max_steps=13700 --phase2"
            " --max_predictions_per_seq=76 --do_train --skip_checkpoint"
            " --train_mlm_accuracy_window_size=0 --target_mlm_accuracy=0.720"
            " --weight_decay_rate=0.01 --max_samples_termination=4500000"
            " --eval_iter_start_samples=150000 --eval_iter_samples=150000 --eval_batch_size=16"
            " --gradient_accumulation_steps=1 --log_freq=0");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json res2 = only_run(out + "/model_save2", &run);
    EXPECT_EQ(res2["updates"], 51);
    EXPECT_EQ(res2["dtype"], "bf16");
    const json cfg2 = json::parse(slurp(run + "/config.json"));
    EXPECT_EQ(cfg2["flags"]["max_seq_length"], 512);
    EXPECT_EQ(cfg2["flags"]["max_predictions_per_seq"], 76);
    EXPECT_EQ(cfg2["flags"]["init_checkpoint"], model + "/model.safetensors");
    EXPECT_EQ(
        testing::matching_files(out, "throughput_log_phase2_bf16_[0-9]{14}_instance_0_.*\\.log")
            .size(),
        1u);
    EXPECT_NE(r.out.find("Throughput: "), std::string::npos) << r.out;
}

// What the mapping does not run: one line naming the flag and why, exit 1, nothing written.
TEST(IpexLaunch, UnmappedLinesAreRefusedBeforeAnythingRuns) {
    const IntelData d;
    const std::string out = d.tmp.file("output");
    const std::string line = phase1_line(d, out);
    const auto refused = [&](const std::string& args, const std::string& why,
                             const std::string& env = "") {
        const auto r = testing::run_script("ipex_launch.py", args, env);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_NE(r.out.find("ipex_launch.py: error: " + why), std::string::npos) << r.out;
        EXPECT_EQ(testing::count_of(r.out, "\n"), 1u) << r.out;
        EXPECT_FALSE(fs::exists(out)) << args;
    };
    const auto without = [&](const std::string& flag) {  // every occurrence
        std::string s = line;
        for (size_t p; (p = s.find(flag)) != std::string::npos;) s.erase(p, flag.size());
        return s;
    };
    refused(without(" --benchmark"),
            "run_pretrain_mlperf.py without --benchmark: its training run is not mapped");
    refused(without(" --do_train"), "--do_train: expected");
    refused(line + " --fp16", "--fp16: fp16 autocast is not one of bertbench's precisions");
    refused(line + " --bf32", "--bf32: IPEX's BF32 math mode");
    refused(line + " --gradient_accumulation_steps=2", "--gradient_accumulation_steps=2: the script");
    refused("--distributed --nnodes 1 " + line, "--distributed: a distributed run");
    refused("--ninstances 2 " + line, "2 instances: one process is mapped",
            "BERTBENCH_CPU_TOPOLOGY=1x4x1");
    refused("--ncore_per_instance 1 " + line, "4 instances: one process is mapped",
            "BERTBENCH_CPU_TOPOLOGY=1x4x1");
    refused("--throughput_mode " + line, "2 instances: one process is mapped",
            "BERTBENCH_CPU_TOPOLOGY=2x2x1");
    // the mode named, not the values it sets (--ncores-per-instance=4 --ninstances=0, never given)
    refused("--latency_mode " + line, "--latency-mode (4 cores per instance): the pool has 2 core(s)",
            "BERTBENCH_CPU_TOPOLOGY=1x2x1");
    // --nodes-list still cuts the pool under --latency_mode (IPEX 2.3): node 1's 2 cores, not 4
    refused("--latency_mode --nodes_list 1 " + without("--node_id 0 "),
            "--latency-mode (4 cores per instance): the pool has 2 core(s)", "BERTBENCH_CPU_TOPOLOGY=2x2x1");
    // the launcher's asserts and argparse checks, its underscore spellings included
    refused("--ninstances=-1 " + line, "--ninstances=-1: Argument --ninstances cannot be a negative value.");
    refused("--ncore_per_instance=-2 " + line,
            "--ncores-per-instance=-2: Argument --ncores-per-instance cannot be a negative value.");
    refused("--cores-list=0-x " + line, "--cores-list=0-x: expected ids and ranges a-b (a <= b), comma "
            "separated; found '0-x'");
    refused("--multi_task_manager bogus " + line,
            "argument --multi-task-manager/--multi_task_manager: invalid choice: 'bogus'");
    refused("--auto-ipex " + line, "--auto-ipex: auto-IPEX rewrites the script's model");
    std::string node = line;
    node.replace(node.find("--node_id 0"), 11, "--node_id 3");
    refused(node, "--nodes-list=3: NUMA node 3 has no CPU", "BERTBENCH_CPU_TOPOLOGY=2x2x1");
    std::string other = line;
    other.replace(other.find("run_pretrain_mlperf.py"), 22, "run_glue.py");
    refused(other,
            "models/language_modeling/pytorch/bert_large/training/run_glue.py: bertbench "
            "maps Intel's BERT-large scripts run_pretrain_mlperf.py and run_squad.py");
    std::string no_eval = without(" --eval_iter_samples=150000");  // its default -1
    refused(no_eval, "--eval_iter_samples=-1: run_pretrain_mlperf.py's eval schedule");
    refused(without(" --eval_iter_samples=150000") + " --eval_iter_samples=0",
            "--eval_iter_samples=0: run_pretrain_mlperf.py's eval schedule");
    refused(without(" --max_steps=13700") + " --max_steps=0", "--max_steps=0: the script trains nothing");
    std::string early = line;
    early.replace(early.find("--eval_iter_start_samples=150000"), 32, "--eval_iter_start_samples=100");
    refused(early, "--eval_iter_start_samples=100: its first evaluation falls within");
    std::string empty = line;
    empty.replace(empty.find(d.p128), d.p128.size(), d.tmp.file("no_shards"));
    fs::create_directories(d.tmp.file("no_shards"));
    refused(empty, "--input_dir=" + d.tmp.file("no_shards") + "/: no file whose name contains");
    // bertbench's --input_file is a comma list: a shard whose name holds a comma is refused by name
    std::string comma = line;
    comma.replace(comma.find(d.p128), d.p128.size(), d.tmp.file("comma"));
    fs::create_directories(d.tmp.file("comma"));
    fs::copy_file(golden("hdf5/public_128_s12345_d2.hdf5"), d.tmp.file("comma") + "/part_0,1.hdf5");
    refused(comma, "--input_dir=" + d.tmp.file("comma") + "/: " + d.tmp.file("comma") +
                       "/part_0,1.hdf5: a name holding a comma, expected none");
    std::string typed = line;
    write_file_atomic(d.tmp.file("gpt.json"), R"({"model_type": "gpt2"})");
    typed.replace(typed.find(d.config), d.config.size(), d.tmp.file("gpt.json"));
    refused(typed, d.tmp.file("gpt.json") + ": model_type \"gpt2\": bertbench runs BERT");
    // bertbench's own refusal after the start: its error, its status, no run directory left;
    // OMP_NUM_THREADS above the instance's CPUs (Intel's quickstarts export 4) is clamped, said
    // (bertbench refused it: "--threads=64: expected 1..2", an error naming a flag never given)
    auto r = testing::run_script("ipex_launch.py", without(" --learning_rate=3.5e-4") + " --learning_rate=-1",
                                 "OMP_NUM_THREADS=64");
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("ipex_launch.py: OMP_NUM_THREADS=64: more threads than an instance's CPUs"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bertbench pretrain: error: --learning_rate: expected 0 .. 3.40282e+38"),
              std::string::npos) << r.out;
    EXPECT_TRUE(testing::matching_files(out + "/model_save", "bertbench-.*").empty());
    // a --log_path that cannot be a directory: one line naming it (it was a Python traceback), and
    // the run directory already made is removed
    for (const std::string flag : {"--log_path=", "--log_dir=", "--log-dir="}) {  // IPEX 2.3's spellings
        std::string log_on_file = line;
        log_on_file.replace(log_on_file.find("--log_path=" + out), 11 + out.size(), flag + d.config);
        r = testing::run_script("ipex_launch.py", log_on_file);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("ipex_launch.py: error: --log-dir=" + d.config + ": cannot write the launcher's logs there"),
                  std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
        EXPECT_TRUE(testing::matching_files(out + "/model_save", "bertbench-.*").empty());
    }
}

}  // namespace
}  // namespace bertbench::ipex_launch_test
