// Intel model zoo's PyTorch BERT-large SQuAD inference lines (quickstart/language_modeling/pytorch/
// bert_large/inference/cpu/run_multi_instance_throughput.sh, run_multi_instance_realtime.sh,
// run_accuracy.sh: `python -m intel_extension_for_pytorch.cpu.launch ... run_squad.py ...`, the
// legacy transformers script with Intel's patch) run with the launcher's module replaced by
// scripts/ipex_launch.py, sizes shrunk, on a fine-tuned model in save_pretrained's layout. The
// benchmark lines print the script's P99 Latency and Throughput lines from bench's step times with
// its formulas; the accuracy line prints run_squad.py's `Results: {...}` log line, whose F1 the
// quickstart's awk reads. Lines it cannot map are one-line refusals that run and write nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"

namespace bertbench::ipex_squad_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::golden;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// $FINETUNED_MODEL as save_pretrained leaves it (config.json, model.safetensors with qa_outputs,
// vocab.txt): the tiny model with a span head, and the predict file.
struct SquadModel {
    TmpDir tmp{"bb_ipex_squad"};
    std::string model = tmp.file("bert_squad_model"),
                predict = golden("squad_pipeline/dataset-v1.1.json");
    SquadModel() { testing::write_tiny_squad_hf_dir(model, tmp.file("ckpt.safetensors")); }
    // The quickstart's run_squad.py words (batch, sequence and iterations shrunk).
    std::string words(const std::string& out, const std::string& extra) const {
        return "./transformers/examples/legacy/question-answering/run_squad.py " + extra +
               " --model_type bert --model_name_or_path " + model +
               " --tokenizer_name bert-large-uncased-whole-word-masking-finetuned-squad --do_eval"
               " --do_lower_case --predict_file " +
               predict +
               " --learning_rate 3e-5"
               " --num_train_epochs 2.0 --max_seq_length 128 --doc_stride 64 --output_dir " +
               out + "/tmp --use_jit --ipex --int8_config configure.json";
    }
};

// P99 Latency and Throughput as the script prints them, from one bench JSON's step times.
std::string script_lines(const std::string& bench_json, int batch, int run_iters) {
    const json j = json::parse(slurp(bench_json));
    std::vector<double> s;
    for (const auto& ms : j["points"][0]["step_ms"]) s.push_back(ms.get<double>() / 1e3);
    std::vector<double> v = s;
    std::sort(v.begin(), v.end());
    const double pos = static_cast<double>(v.size() - 1) * 0.99;
    const size_t lo = static_cast<size_t>(pos), hi = std::min(lo + 1, v.size() - 1);
    const double p99 = v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
    double sum = 0;
    for (const double x : s) sum += x;
    return fmt::format("P99 Latency {:.2f} ms\nThroughput: {:.3f} sentence/s\n", p99 * 1000,
                       batch * run_iters / sum);
}

TEST(IpexSquad, ThroughputAndRealtimeLinesPrintTheScriptsFigures) {
    const SquadModel m;
    const std::string out = m.tmp.file("output");
    // run_multi_instance_throughput.sh: one instance per NUMA node, batch 56 -> 4, 15 + 40 -> 3 + 5
    auto r = testing::run_script(
        "ipex_launch.py", "--throughput_mode --enable_jemalloc --log_path=" + out +
                              " --log_file_prefix=./throughput_log_fp32 " +
                              m.words(out,
                                      "--benchmark --per_gpu_eval_batch_size 4 --perf_begin_iter 3"
                                      " --perf_run_iters 5"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto runs = testing::matching_files(out + "/tmp", "bertbench-[0-9]{14}");
    ASSERT_EQ(runs.size(), 1u);
    // the script's steps 0..7: 0..3 untimed, 4..7 timed (after step --perf_begin_iter)
    const json point = json::parse(slurp(runs[0] + "/bench_instance_0_thread_0.json"))["points"][0];
    EXPECT_EQ(point["step_ms"].size(), 4u);
    EXPECT_EQ(point["batch_size"], 4);
    EXPECT_EQ(point["seq_len"], 128);
    EXPECT_EQ(point["squad_layout"], "padded");
    EXPECT_EQ(point["warmup_steps"], 4);
    EXPECT_EQ(point["model"], m.model + "/config.json");
    EXPECT_TRUE(fs::exists(runs[0] + "/features/eval.tf_record"));
    const auto inst = testing::matching_files(
        out, "throughput_log_fp32_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    ASSERT_EQ(inst.size(), 1u) << r.out;
    const std::string want = script_lines(runs[0] + "/bench_instance_0_thread_0.json", 4, 5);
    EXPECT_NE(slurp(inst[0]).find(want), std::string::npos) << slurp(inst[0]) << want;
    // the quickstart's grep | sed | awk mean
    const std::string tput = want.substr(want.find("Throughput: ") + 12);
    EXPECT_EQ(
        run_shell("grep 'Throughput:' " + out +
                  "/throughput_log* | sed -e "
                  "'s/.*Throughput//;s/[^0-9.]//g' | awk '{s+=$1;i++}END{printf(\"%.3f\", s/i)}'")
            .out,
        tput.substr(0, tput.find(' ')));
    EXPECT_EQ(testing::matching_files(out, "throughput_log_fp32_[0-9]{14}_instances\\.log").size(),
              1u);

    // run_multi_instance_realtime.sh: --ninstance (an abbreviation), batch 1, two threads of one
    // core sharing the model per instance: two processes, two pairs of lines
    const std::string out2 = m.tmp.file("output2");
    r = testing::run_script(
        "ipex_launch.py",
        "--ninstance 1 --log_path=" + out2 + " --log_file_prefix=./latency_log_fp32 " +
            m.words(out2,
                    "--benchmark --per_gpu_eval_batch_size 1 --perf_begin_iter 2"
                    " --perf_run_iters 4 --use_share_weight --total_cores 2"
                    " --cores_per_instance 1"),
        "OMP_NUM_THREADS=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto runs2 = testing::matching_files(out2 + "/tmp", "bertbench-[0-9]{14}");
    ASSERT_EQ(runs2.size(), 1u);
    const auto log2 =
        testing::matching_files(out2, "latency_log_fp32_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    ASSERT_EQ(log2.size(), 1u);
    for (const char* t : {"0", "1"}) {
        const std::string bench = runs2[0] + "/bench_instance_0_thread_" + t + ".json";
        EXPECT_EQ(json::parse(slurp(bench))["points"][0]["threads"], 1);
        EXPECT_NE(slurp(log2[0]).find(script_lines(bench, 1, 4)), std::string::npos)
            << slurp(log2[0]);
    }
    EXPECT_EQ(testing::count_of(slurp(log2[0]), "Throughput: "), 2u);
}

TEST(IpexSquad, AccuracyLinePrintsTransformersResults) {
    const SquadModel m;
    const std::string out = m.tmp.file("output");
    const auto r = testing::run_script("ipex_launch.py",
                                       "--log_path=" + out + " --log_file_prefix=accuracy_log " +
                                           m.words(out, "--per_gpu_eval_batch_size 8"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto runs = testing::matching_files(out + "/tmp", "bertbench-[0-9]{14}");
    ASSERT_EQ(runs.size(), 1u);
    const auto own = testing::matching_files(out, "accuracy_log_[0-9]{14}_instances\\.log");
    ASSERT_EQ(own.size(), 1u);
    for (const char* flag :
         {" squad --do_predict ", " --predict_batch_size=8 ", " --max_seq_length=128 ",
          " --doc_stride=64 ", " --transformers_squad", " --do_lower_case=true "})
        EXPECT_NE(slurp(own[0]).find(flag), std::string::npos) << flag << slurp(own[0]);
    // run_squad.py's files in --output_dir: the run's own
    EXPECT_EQ(slurp(out + "/tmp/predictions_.json"), slurp(runs[0] + "/predictions.json"));
    EXPECT_EQ(slurp(out + "/tmp/nbest_predictions_.json"),
              slurp(runs[0] + "/nbest_predictions.json"));
    // its log line, and the F1 the quickstart's awk takes from it: on this v1.1 set (every
    // question predicted, no answer normalizing to nothing) the official metric's F1
    const auto eval = run_bertbench("squad-eval --transformers " + m.predict + " " + runs[0] +
                                    "/predictions.json");
    ASSERT_EQ(eval.exit_code, 0) << eval.out;
    const auto logs =
        testing::matching_files(out, "accuracy_log_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    ASSERT_EQ(logs.size(), 1u);
    const std::string log = slurp(logs[0]);
    EXPECT_TRUE(
        std::regex_search(log, std::regex("\n[0-9]{2}/[0-9]{2}/[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} "
                                          "- INFO - __main__ - Results: \\{'exact': ")))
        << log;
    EXPECT_NE(log.find(" - INFO - __main__ - " + eval.out), std::string::npos) << log << eval.out;
    const std::string f1 = run_shell("grep 'Results:' " + out +
                                     "/accuracy_log* | awk -F ' ' '{print $12}' | "
                                     "awk -F ',' '{print $1}'")
                               .out;
    const json official = json::parse(slurp(runs[0] + "/eval_results.json"));
    EXPECT_EQ(f1, py_float_repr(official["f1"].get<double>()) + "\n") << log;
}

// What the mapping does not run: one line naming the flag and why, exit 1, nothing written.
TEST(IpexSquad, UnmappedLinesAreRefusedBeforeAnythingRuns) {
    const SquadModel m;
    const std::string out = m.tmp.file("output");
    const std::string bench = m.words(out, "--benchmark --per_gpu_eval_batch_size 2");
    const auto refused = [&](const std::string& args, const std::string& why,
                             const std::string& env = "") {
        const auto r = testing::run_script("ipex_launch.py", "--log_path=" + out + " " + args, env);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_NE(r.out.find("ipex_launch.py: error: " + why), std::string::npos) << r.out;
        EXPECT_EQ(testing::count_of(r.out, "\n"), 1u) << r.out;
        EXPECT_FALSE(fs::exists(out)) << args;
    };
    refused(bench + " --do_train", "--do_train: run_squad.py's fine-tuning is not mapped");
    std::string no_eval = bench;
    no_eval.erase(no_eval.find(" --do_eval"), 10);
    refused(no_eval, "--do_eval: expected");
    refused(bench + " --fp16_cpu",
            "--fp16_cpu: fp16 autocast is not one of bertbench's precisions");
    refused(bench + " --bf32", "--bf32: IPEX's BF32 math mode");
    refused(bench + " --do_calibration", "--do_calibration: bertbench's int8 needs no calibration");
    refused(bench + " --use_multi_stream_module",
            "--use_multi_stream_module: IPEX's MultiStreamModule");
    refused(bench + " --perf_begin_iter 3 --perf_run_iters 1",
            "--perf_begin_iter=3 --perf_run_iters=1: no step is timed");
    refused(bench + " --use_share_weight --total_cores 3",
            "--use_share_weight --total_cores=3 "
            "--cores_per_instance=4: no thread runs");
    std::string roberta = bench;
    roberta.replace(roberta.find("--model_type bert"), 17, "--model_type roberta");
    refused(roberta, "--model_type=roberta: bertbench runs BERT");
    std::string untyped = bench;  // its argparse's errors: one line
    untyped.erase(untyped.find(" --model_type bert"), 18);
    refused(untyped, "run_squad.py: the following arguments are required: --model_type");
    refused(bench + " --per_gpu_eval_batch_size=two",
            "run_squad.py: argument --per_gpu_eval_batch_size: invalid int value: 'two'");
    std::string missing = bench;
    missing.replace(missing.find(m.predict), m.predict.size(), m.tmp.file("dev-v1.1.json"));
    refused(missing, "--predict_file=" + m.tmp.file("dev-v1.1.json") + ": no such file");
    refused("--throughput_mode " + m.words(out, "--per_gpu_eval_batch_size 8"),
            "2 instances: each would evaluate the whole predict file",
            "BERTBENCH_CPU_TOPOLOGY=2x2x1");
    refused("--latency_mode --throughput_mode " + bench, "--latency-mode and --throughput-mode");
    refused("--ninstances 3 " + bench, "--ninstances=3: more instances than the pool's 2 core(s)",
            "BERTBENCH_CPU_TOPOLOGY=1x2x1");
}

}  // namespace
}  // namespace bertbench::ipex_squad_test
