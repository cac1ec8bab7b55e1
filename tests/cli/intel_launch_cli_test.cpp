// Intel model zoo's launch_benchmark.py lines for BERT-large (benchmarks/language_modeling/
// tensorflow/bert_large/{training,inference}/*/Advanced.md, quickstart/.../bert_large/*/cpu/*.sh),
// run with only the script's path changed (scripts/launch_benchmark.py, issue 25 item 5), paths and
// sizes shrunk: SQuAD training under 2 MPI processes, the inference accuracy and benchmark lines
// (bfloat16, and fp32 with the frozen graph Intel requires), the pre-training lines, the
// quickstarts' training lines. Each prints the bertbench command it runs and, after it, the lines
// Intel's scripts print and its quickstarts grep, from bertbench's measurements (checked here
// against bertbench's own records). Placement and thread rules are checked on a described machine
// (BERTBENCH_CPU_TOPOLOGY, --dry-run). Lines it cannot map are one-line refusals that run nothing.
// Tiny model (L2 H64 A2 I128).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/intel_launch_util.hpp"
#include "dist/mpi_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::golden;
using testing::IntelDirs;
using testing::intel_launch;
using testing::read_json;
using testing::read_jsonl;
using testing::running_line;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// The number after `prefix` at the start of a line of `out`; NaN when there is none.
double value_after(const std::string& out, const std::string& prefix) {
    const size_t at = out.find("\n" + prefix);
    return at == std::string::npos ? std::nan("") : std::stod(out.substr(at + 1 + prefix.size()));
}

// CPUs this process may use (what the script clamps threads to) and whether numactl is here (the
// script's binder; taskset otherwise).
int available_cpus() { return std::stoi(run_shell("nproc").out); }
bool have_numactl() { return run_shell("command -v numactl").exit_code == 0; }

// The guide's distributed SQuAD training line, sizes shrunk (batch 4 per process, 1 epoch, seq 128).
std::string training_line(const IntelDirs& d, const std::string& out) {
    return "--model-name=bert_large --precision=bfloat16 --mode=training --framework=tensorflow"
           " --batch-size=4 --mpi_num_processes=2 --volume " + d.checkpoint + ":" + d.checkpoint +
           " --volume " + d.dataset + ":" + d.dataset + " --output-dir " + out +
           " --docker-image intel/intel-optimized-tensorflow:latest -- train_option=SQuAD"
           " vocab_file=" + d.checkpoint + "/vocab.txt config_file=" + d.checkpoint +
           "/bert_config.json init_checkpoint=" + d.checkpoint + "/bert_model.ckpt do_train=True"
           " train_file=" + d.dataset + "/train-v1.1.json do_predict=True predict_file=" + d.dataset +
           "/dev-v1.1.json learning_rate=3e-4 num_train_epochs=1 max_seq_length=128 doc_stride=64"
           " optimized_softmax=True experimental_gelu=False do_lower_case=True";
}

TEST(IntelLaunchBenchmark, SquadTrainingThenInferenceLines) {
    if (const std::string why = testing::mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const IntelDirs d;
    const std::string out = d.tmp.file("output");
    auto r = intel_launch(training_line(d, out));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // The command it runs: 2 ranks as Intel places them (mpirun --map-by socket, one numactl-bound
    // process per rank), global batch 2 x 4, learning rate x sqrt(2), bfloat16.
    const std::string cmd = running_line(r.out);
    ASSERT_FALSE(cmd.empty()) << r.out;
    EXPECT_EQ(count_of(cmd, " -np 1 "), 2u) << cmd;
    EXPECT_EQ(count_of(cmd, " : -np 1 "), 1u) << cmd;
    for (const std::string& want : std::vector<std::string>{
             " --map-by socket -np 1 ", " squad ", " --train_batch_size=8 ",
             " --learning_rate=0.00042426406871", " --do_lower_case=True ",
             " --init_checkpoint=" + d.checkpoint + "/bert_model.ckpt ", " --max_seq_length=128 ",
             " --precision=bfloat16", " --clip_by_global_norm_after_gradient_allreduce=true "})
        EXPECT_NE(cmd.find(want), std::string::npos) << want << "\n" << cmd;
    EXPECT_NE(r.out.find("accepted, no effect here (no container, no TensorFlow thread pools): "
                         "--docker-image, --volume, optimized_softmax=True, experimental_gelu=False"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("each rank trains its own copy, which bertbench does not do"),
              std::string::npos) << r.out;  // Intel's run_squad.py default, said once
    EXPECT_NE(r.out.find("{\"exact_match\": "), std::string::npos) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["number_of_ranks"], 2);
    EXPECT_EQ(res["global_batch_size"], 8);
    EXPECT_EQ(res["dtype"], "bf16");
    ASSERT_TRUE(fs::exists(out + "/predictions.json"));
    // TF's examples/sec is per process (its train_batch_size, 4), here over steps 2.. of the run.
    const auto log = read_jsonl(out + "/train_log.jsonl");
    ASSERT_GE(log.size(), 2u);
    double s = 0;
    for (size_t i = 1; i < log.size(); ++i) s += 8 / log[i]["sequences_per_second"].get<double>();
    const double per_rank = 4 * static_cast<double>(log.size() - 1) / s;
    EXPECT_NEAR(value_after(r.out, "INFO:tensorflow:examples/sec: "), per_rank, 1e-5 * per_rank)
        << r.out;

    // Inference, accuracy mode: the fine-tuned checkpoint as Intel's (--checkpoint's
    // model.ckpt-3649, a TF checkpoint), the data and model files in --data-location.
    const std::string fine_tuned = d.tmp.file("bert_large_checkpoints");
    fs::create_directories(fine_tuned);
    ASSERT_EQ(run_bertbench("convert --to=tf --input=" + res["last_checkpoint"].get<std::string>() +
                            " --output=" + fine_tuned + "/model.ckpt-3649").exit_code, 0);
    for (const char* f : {"vocab.txt", "bert_config.json"})
        fs::copy_file(d.checkpoint + "/" + f, d.dataset + "/" + f);
    const std::string infer_out = d.tmp.file("bert-squad-output");
    r = intel_launch("--model-name=bert_large --precision=bfloat16 --mode=inference --framework=tensorflow"
               " --batch-size=8 --data-location " + d.dataset + " --checkpoint " + fine_tuned +
               " --output-dir " + infer_out + " --docker-image intel/intel-optimized-tensorflow:latest"
               " --accuracy-only -- infer_option=SQuAD");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(" squad --vocab_file=" + d.dataset + "/vocab.txt --bert_config_file=" +
                         d.dataset + "/bert_config.json --init_checkpoint=" + fine_tuned +
                         "/model.ckpt-3649 --do_predict=True --predict_file=" + d.dataset +
                         "/dev-v1.1.json --predict_batch_size=8 --output_dir=" + infer_out),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("{\"exact_match\": "), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(infer_out + "/predictions.json"));

    // Inference, benchmark mode: bench --task=squad in bfloat16, its report in --output-dir, and
    // the estimator loop's lines of Intel's run_squad.py (no frozen graph) from its timed steps.
    const std::string bench_out = d.tmp.file("bench-output");
    r = intel_launch("--model-name=bert_large --precision=bfloat16 --mode=inference --framework=tensorflow"
               " --batch-size=4 --data-location " + d.dataset + " --checkpoint " + fine_tuned +
               " --output-dir " + bench_out + " --docker-image intel/intel-optimized-tensorflow:latest"
               " --benchmark-only -- infer_option=SQuAD warmup_steps=1 steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(" bench --task=squad --mode=infer --bert_config_file=" + d.dataset +
                         "/bert_config.json --batch_size=4 --seq_len=384 --warmup=1 --steps=2"),
              std::string::npos) << r.out;
    const json bench = json::parse(slurp(bench_out + "/bench_squad_infer.json"));
    ASSERT_FALSE(bench["points"].empty()) << bench.dump();
    const json& p = bench["points"][0];
    EXPECT_EQ(p["dtype"], "bf16");
    EXPECT_EQ(p["batch_size"], 4);
    double ms = 0;
    for (const json& t : p["step_ms"]) ms += t.get<double>();
    ASSERT_EQ(p["step_ms"].size(), 2u);
    // run_squad.py:1579-1584: batch x steps / their time, warm-up examples left out.
    EXPECT_NE(r.out.find("\nTotal examples: 12, Warmup examples: 4, Benchmark examples: 8, "
                         "Benchmark time: "), std::string::npos) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\nThroughput: [0-9]+\\.[0-9]{2}\n"))) << r.out;
    const double want = 8 / (ms / 1e3);
    EXPECT_NEAR(value_after(r.out, "Throughput: "), want, 0.005 + 1e-6 * want) << r.out;
}

// Advanced.md's fp32 lines carry --in-graph (Intel's fp32 and int8 model_init.py exit without it):
// the graph is not read; the benchmark times the model of bert_config.json and prints
// do_benchmark()'s lines, the accuracy line predicts with --checkpoint's model.ckpt-3649.
TEST(IntelLaunchBenchmark, Fp32LinesWithInGraphFromIntelsGuide) {
    const IntelDirs d;
    const std::string graph = d.tmp.file("fp32_bert_squad.pb");
    std::ofstream(graph) << "frozen graph";
    for (const char* f : {"vocab.txt", "bert_config.json"})
        fs::copy_file(d.checkpoint + "/" + f, d.dataset + "/" + f);
    // A SQuAD model (encoder + span head) as TF's model.ckpt-3649.
    const std::string fine_tuned = d.tmp.file("bert_large_checkpoints");
    fs::create_directories(fine_tuned);
    {
        const model::BertConfig c =
            model::BertConfig::from_json_file(d.checkpoint + "/bert_config.json");
        const model::ParamTable table(c, model::Heads::squad);
        std::vector<float> params(table.total_floats());
        table.initialize(params, 7);
        model::save_checkpoint(d.tmp.file("squad.safetensors"), table, params);
    }
    ASSERT_EQ(run_bertbench("convert --to=tf --input=" + d.tmp.file("squad.safetensors") +
                            " --output=" + fine_tuned + "/model.ckpt-3649").exit_code, 0);
    const std::string line = "--model-name=bert_large --precision=fp32 --mode=inference"
                             " --framework=tensorflow --data-location " + d.dataset +
                             " --checkpoint " + fine_tuned + " --in-graph " + graph +
                             " --docker-image intel/intel-optimized-tensorflow:latest";

    const std::string bench_out = d.tmp.file("bench");
    auto r = intel_launch(line + " --batch-size=2 --output-dir " + bench_out + " --benchmark-only"
                    " -- infer_option=SQuAD max_seq_length=64 warmup_steps=1 steps=3");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("neither --checkpoint nor --in-graph, a frozen TensorFlow graph, is read"),
              std::string::npos) << r.out;
    EXPECT_NE(running_line(r.out).find(" bench --task=squad --mode=infer "), std::string::npos);
    const json p = read_json(bench_out + "/bench_squad_infer.json")["points"][0];
    EXPECT_EQ(p["dtype"], "fp32");
    ASSERT_EQ(p["step_ms"].size(), 3u);
    double ms = 0;
    for (const json& t : p["step_ms"]) ms += t.get<double>();
    // run_squad.py:1344-1375: batch x steps / their time, Python's str() of the float.
    const double want = 2 * 3 / (ms / 1e3);
    EXPECT_EQ(count_of(r.out, "\nThread 1 has throughput "), 1u) << r.out;
    EXPECT_EQ(count_of(r.out, "\nTotal throughput (examples/sec): "), 1u) << r.out;
    EXPECT_NEAR(value_after(r.out, "Total throughput (examples/sec): "), want, 1e-9 * want)
        << r.out;
    EXPECT_EQ(r.out.find("\nThroughput: "), std::string::npos) << r.out;  // the estimator's line

    const std::string acc_out = d.tmp.file("accuracy");
    r = intel_launch(line + " --batch-size=16 --output-dir " + acc_out +
               " --accuracy-only -- infer_option=SQuAD max_seq_length=128 doc_stride=64");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--in-graph " + graph + ": a frozen TensorFlow graph, which bertbench "
                         "cannot read; it predicts with the checkpoint's weights, " + fine_tuned +
                         "/model.ckpt-3649"), std::string::npos) << r.out;
    EXPECT_NE(running_line(r.out).find(" --init_checkpoint=" + fine_tuned + "/model.ckpt-3649 "),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("{\"exact_match\": "), std::string::npos) << r.out;  // accuracy.sh's grep
    EXPECT_TRUE(fs::exists(acc_out + "/predictions.json"));

    // Intel checks that the graph is a file; a missing one runs nothing.
    r = intel_launch("--model-name=bert_large --precision=fp32 --mode=inference --framework=tensorflow"
               " --data-location " + d.dataset + " --checkpoint " + fine_tuned +
               " --in-graph " + d.tmp.file("none.pb") + " --output-dir " + d.tmp.file("never") +
               " -- infer_option=SQuAD");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--in-graph " + d.tmp.file("none.pb") + ": not a file"), std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(d.tmp.file("never")));
}

// quickstart/.../training/cpu/training_squad.sh, shrunk: NUM_INSTANCES=1 (one MPI process, bound
// to NUMA node 0 as Intel's numactl -N 0 -m 0), save-checkpoints_steps mapped, the other unknown
// model args accepted; the script greps `INFO:tensorflow:examples/sec: X` from its log.
TEST(IntelLaunchBenchmark, QuickstartSquadTrainingLine) {
    const IntelDirs d;
    const std::string out = d.tmp.file("output");
    const auto r = intel_launch(
        "--model-name=bert_large --precision=fp32 --mode=training --framework tensorflow"
        " --output-dir " + out + " --mpi_num_processes=1 --mpi_num_processes_per_socket=1"
        " --batch-size 4 --num-intra-threads 1 --num-inter-threads 2"
        " -- DEBIAN_FRONTEND=noninteractive train-option=SQuAD do-predict=False do-train=True"
        " profile=False learning-rate=3e-5 max-seq-length=128 save-checkpoints_steps=5"
        " config_file=" + d.checkpoint + "/bert_config.json init_checkpoint=" + d.checkpoint +
        "/bert_model.ckpt vocab_file=" + d.checkpoint + "/vocab.txt train_file=" + d.dataset +
        "/train-v1.1.json"
        " optimized_softmax=True doc_stride=64 num_train_epochs=1 experimental_gelu=False"
        " do_lower_case=True");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string cmd = running_line(r.out);
    EXPECT_EQ(cmd.find("mpirun"), std::string::npos) << cmd;  // one process needs none
    EXPECT_NE(cmd.find(have_numactl() ? "running: numactl -N 0 -m 0 " : "running: taskset -c "),
              std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --save_checkpoints_steps=5 "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --threads=1"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("save_checkpoints_steps=5: Intel's start.sh does not pass it on"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--num-inter-threads, debian_frontend=noninteractive, profile=False, "
                         "optimized_softmax=True, experimental_gelu=False"), std::string::npos)
        << r.out;
    EXPECT_TRUE(fs::exists(out + "/model.ckpt-5.safetensors")) << r.out;
    // 69 examples / 4 x 1 epoch = 17 steps: under TF's 100-step logging period, one line over
    // steps 2-17, the per-process batch over their time.
    const json res = read_json(out + "/results.json");
    ASSERT_EQ(res["global_step"], 17);
    const auto log = read_jsonl(out + "/train_log.jsonl");
    ASSERT_EQ(log.size(), 17u);
    double s = 0;
    for (size_t i = 1; i < log.size(); ++i) s += 4 / log[i]["sequences_per_second"].get<double>();
    EXPECT_EQ(count_of(r.out, "\nINFO:tensorflow:examples/sec: "), 1u) << r.out;
    const double want = 4 * 16 / s;
    EXPECT_NEAR(value_after(r.out, "INFO:tensorflow:examples/sec: "), want, 1e-5 * want) << r.out;
    EXPECT_NE(r.out.find("this run had 17, so one line covers steps 2-17"), std::string::npos);
}

// quickstart/.../training/cpu/pretraining.sh, shrunk: --num-intra-threads 64 (more than this
// machine's CPUs: clamped, said once), save-checkpoints_steps=1000; the LoggerHook's summary of
// run_pretraining.py and TF's examples/sec every step, checked against train_log.jsonl.
TEST(IntelLaunchBenchmark, QuickstartPretrainingLine) {
    const IntelDirs d;
    const std::string out = d.tmp.file("pretrain");
    const int cpus = available_cpus();
    const auto r = intel_launch(
        "--model-name=bert_large --precision=fp32 --mode=training --framework tensorflow"
        " --data-location=" + d.dataset + " --output-dir " + out + " --mpi_num_processes=1"
        " --mpi_num_processes_per_socket=1 --batch-size 4 --num-intra-threads 64"
        " --num-inter-threads 1 --num-train-steps=4 -- DEBIAN_FRONTEND=noninteractive"
        " train-option=Pretraining do-eval=False do-train=True profile=False learning-rate=4e-5"
        " max-predictions=20 max-seq-length=128 warmup-steps=0 save-checkpoints_steps=1000"
        " config-file=" + d.checkpoint + "/bert_config.json init-checkpoint=" + d.checkpoint +
        "/bert_model.ckpt input-file=" + golden("pretraining/public_128_s12345_d2.tfrecord") +
        " experimental-gelu=True do-lower-case=False");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string cmd = running_line(r.out);
    // NUMA node 0's CPUs (all of them on a one-node machine), one thread each, 64 at most.
    std::smatch threads;
    ASSERT_TRUE(std::regex_search(cmd, threads, std::regex(" --threads=([0-9]+)$"))) << cmd;
    const int n = std::stoi(threads[1]);
    EXPECT_TRUE(n >= 1 && n <= std::min(cpus, 64)) << cmd;
    if (n < 64) {
        EXPECT_NE(r.out.find("--num-intra-threads=64: only " + std::to_string(n) + " CPU(s) here"),
                  std::string::npos) << r.out;
    }
    EXPECT_NE(cmd.find(" --num_train_steps=4 --num_warmup_steps=0 "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --save_checkpoints_steps=1000 "), std::string::npos) << cmd;
    EXPECT_EQ(r.out.find("Intel's start.sh does not pass it on"), std::string::npos) << r.out;
    const auto log = read_jsonl(out + "/train_log.jsonl");
    ASSERT_EQ(log.size(), 4u);
    std::vector<double> ms;
    for (const json& u : log) ms.push_back(1e3 * 4 / u["sequences_per_second"].get<double>());
    // TF: a line per step from the second; LoggerHook: the first 2 steps left out.
    EXPECT_EQ(count_of(r.out, "\nINFO:tensorflow:examples/sec: "), 3u) << r.out;
    EXPECT_NEAR(value_after(r.out, "INFO:tensorflow:examples/sec: "), 4e3 / ms[1],
                1e-5 * 4e3 / ms[1]);
    const double per_iter = (ms[2] + ms[3]) / 2;
    EXPECT_NE(r.out.find("\nself._step: 4\n"), std::string::npos) << r.out;
    EXPECT_NEAR(value_after(r.out, "Time spent per iteration (after warmup): "), per_iter, 0.006);
    EXPECT_TRUE(std::regex_search(r.out,
                                  std::regex("\nThroughput is [0-9]+\\.[0-9]{3} samples/sec\n")))
        << r.out;
    EXPECT_NEAR(value_after(r.out, "Throughput is "), 4e3 / per_iter, 1e-3 + 1e-5 * 4e3 / per_iter);
    EXPECT_EQ(r.out.find("Latency is "), std::string::npos) << r.out;  // batch 1 only
}

// Advanced.md's pre-training line without a step count: Intel's launcher passes its
// --num-train-steps default, 1, over model_init.py's 20; a model arg num-train-steps wins over the
// flag, --batch-size and --output-dir over the model args batch_size / output_dir.
TEST(IntelLaunchBenchmark, PretrainingStepsAndPrecedence) {
    const IntelDirs d;
    const std::string out = d.tmp.file("pretrain-output");
    const std::string line =
        "--model-name=bert_large --precision=fp32 --mode=training --framework=tensorflow";
    const std::string args =
        " -- train-option=Pretraining input-file=" +
        golden("pretraining/public_128_s12345_d2.tfrecord") + " do-eval=False config-file=" +
        d.checkpoint + "/bert_config.json init-checkpoint=" + d.checkpoint +
        "/bert_model.ckpt max-seq-length=128 max-predictions=20 warmup-steps=1"
        " optimized_softmax=True experimental_gelu=False profile=False";
    auto r = intel_launch(line + " --batch-size=4 --socket-id=-1 --num-intra-threads=1"
                    " --num-inter-threads=1 --output-dir " + out + args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(" pretrain --input_file="), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" --num_train_steps=1 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" --optimizer=adamw "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" --threads=1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("profile=False"), std::string::npos) << r.out;  // listed, no effect
    EXPECT_EQ(read_json(out + "/results.json")["global_step"], 1);
    EXPECT_EQ(read_json(out + "/config.json")["flags"]["optimizer"], "adamw");
    // One step: TF's one examples/sec line and the LoggerHook's figures over it, said so.
    EXPECT_EQ(count_of(r.out, "\nINFO:tensorflow:examples/sec: "), 1u) << r.out;
    EXPECT_NE(r.out.find("LoggerHook leaves out the first 2 steps; this run had 1, so none is left "
                         "out"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nThroughput is "), std::string::npos) << r.out;

    // Precedence, as Intel's launcher sets its environment (dry runs).
    r = intel_launch(line + " --dry-run --batch-size=4 --num-train-steps=2 --output-dir " + out +
               args + " num-train-steps=3 batch_size=8 output_dir=/elsewhere");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string cmd = running_line(r.out);
    for (const std::string& want : std::vector<std::string>{
             " --num_train_steps=3 ", " --train_batch_size=4 ", " --output_dir=" + out + " "})
        EXPECT_NE(cmd.find(want), std::string::npos) << want << "\n" << cmd;
    EXPECT_NE(r.out.find("batch_size=8 (Intel's --batch-size overrides it), output_dir=/elsewhere "
                         "(Intel's --output-dir overrides it)"), std::string::npos) << r.out;
    r = intel_launch(line + " --dry-run --num-train-steps=2" + args + " batch_size=8");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    cmd = running_line(r.out);
    EXPECT_NE(cmd.find(" --num_train_steps=2 "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --train_batch_size=24 "), std::string::npos) << cmd;  // Intel's default
    const char* src = std::getenv("BB_SOURCE_DIR");
    const std::string default_out = fs::weakly_canonical(std::string(src ? src : ".")).string() +
                                    "/runs/launch_benchmark";
    EXPECT_NE(r.out.find("no --output-dir: writing to " + default_out), std::string::npos) << r.out;
    EXPECT_NE(cmd.find(" --output_dir=" + default_out + " "), std::string::npos) << cmd;
    // Launcher flags abbreviate as in Intel's argparse (a unique prefix); an ambiguous one is refused.
    r = intel_launch(line + " --dry-run --batch=4 --num-train=2 --output-dir " + out + args);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    cmd = running_line(r.out);
    EXPECT_NE(cmd.find(" --num_train_steps=2 "), std::string::npos) << cmd;
    EXPECT_NE(cmd.find(" --train_batch_size=4 "), std::string::npos) << cmd;
    EXPECT_EQ(r.out.find("batch=4"), std::string::npos) << r.out;  // not passed on as a model arg
    r = intel_launch(line + " --dry-run --num=2 --output-dir " + out + args);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("ambiguous option: --num=2 could match"), std::string::npos) << r.out;
    // accum_steps: bertbench's gradient accumulation, Intel's update counts as micro-steps.
    r = intel_launch(line + " --dry-run --batch-size=4 --num-train-steps=3 --output-dir " + out + args +
               " accum_steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    cmd = running_line(r.out);
    for (const char* want : {" --num_train_steps=6 --num_warmup_steps=2 ", " --steps_per_update=2 ",
                             " --save_checkpoints_steps=2000 ", " --train_batch_size=4 "})
        EXPECT_NE(cmd.find(want), std::string::npos) << want << "\n" << cmd;
}

// Intel's MPI placement on a described 2-socket machine (28 cores of 2 threads each, a NUMA node
// per socket): `mpirun --map-by socket -np 1 numactl -N 0 -m 0 ... : -np 1 numactl -N 1 -m 1
// ...` and, without --num-intra-threads, cores per socket - 2 threads a rank (base_model_init.py).
TEST(IntelLaunchBenchmark, MpiPlacementAndThreadsAsIntels) {
    const std::string topo = "BERTBENCH_CPU_TOPOLOGY=2x28x2";
    const bool numactl = have_numactl();
    const std::string line =
        "--model-name=bert_large --precision=bfloat16 --mode=training --framework=tensorflow"
        " --dry-run --batch-size=24 --output-dir /tmp/never";
    const std::string model_args =
        " -- train-option=Pretraining input-file=x.tfrecord num-train-steps=20";
    auto r = intel_launch(line + " --mpi_num_processes=2" + model_args, topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string cmd = running_line(r.out);
    const std::string bb = testing::bertbench_path();
    const std::string node0 = numactl ? "numactl -N 0 -m 0 " : "taskset -c 0-27,56-83 ";
    const std::string node1 = numactl ? "numactl -N 1 -m 1 " : "taskset -c 28-55,84-111 ";
    EXPECT_NE(cmd.find(" --map-by socket -np 1 " + node0 + bb + " pretrain "), std::string::npos)
        << cmd;
    EXPECT_NE(cmd.find(" --threads=26 : -np 1 " + node1 + bb + " pretrain "), std::string::npos)
        << cmd;
    EXPECT_EQ(count_of(cmd, " --threads=26"), 2u) << cmd;
    EXPECT_EQ(count_of(cmd, " --num_train_steps=10 "), 2u) << cmd;  // 20 // 2 ranks
    EXPECT_EQ(count_of(cmd, " --clip_by_global_norm_after_gradient_allreduce=true "), 2u) << cmd;
    EXPECT_NE(r.out.find("cores per socket 28 - 2"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("trains its own copy"), std::string::npos) << r.out;  // SQuAD's only

    // --num-intra-threads above a rank's CPUs (a socket's 56): clamped, said once.
    r = intel_launch(line + " --mpi_num_processes=2 --num-intra-threads=64" + model_args, topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(running_line(r.out), " --threads=56"), 2u) << r.out;
    EXPECT_EQ(count_of(r.out, "--num-intra-threads=64: only 56 CPU(s) here"), 1u) << r.out;
    // More ranks than NUMA nodes (Intel's numactl -N 2 would fail): two ranks per node, its cores
    // split between them.
    r = intel_launch(line + " --mpi_num_processes=4" + model_args, topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    cmd = running_line(r.out);
    for (const char* cpus : {"0-13,56-69", "14-27,70-83", "28-41,84-97", "42-55,98-111"})
        EXPECT_NE(cmd.find(numactl ? std::string("numactl --physcpubind=") + cpus + " -m "
                                   : std::string("taskset -c ") + cpus + " "),
                  std::string::npos) << cpus << "\n" << cmd;
    EXPECT_EQ(count_of(cmd, " --threads=26"), 4u) << cmd;
    // More processes per socket: Intel's command passes no --map-by.
    r = intel_launch(line + " --mpi_num_processes=2 --mpi_num_processes_per_socket=2" + model_args, topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(running_line(r.out).find("--map-by"), std::string::npos) << r.out;
    // pretraining.sh's single process: no mpirun, still bound to node 0.
    r = intel_launch(line + " --mpi_num_processes=1" + model_args, topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(running_line(r.out).find("running: " + node0 + bb + " pretrain "), std::string::npos)
        << r.out;
    EXPECT_NE(running_line(r.out).find(" --threads=26"), std::string::npos) << r.out;
}

// --num-cores=N: one run of N intra-op threads (with --socket-id, bound to that socket's first N
// cores and their hyper-threads, as Intel's numactl -C); --num-instances: Intel's deprecation
// warning, one run.
TEST(IntelLaunchBenchmark, NumCoresAndNumInstances) {
    const IntelDirs d;
    for (const char* f : {"vocab.txt", "bert_config.json"})
        fs::copy_file(d.checkpoint + "/" + f, d.dataset + "/" + f);
    const std::string line = "--model-name=bert_large --precision=fp32 --mode=inference"
                             " --framework=tensorflow --batch-size=1 --data-location " + d.dataset +
                             " --benchmark-only";
    const std::string topo = "BERTBENCH_CPU_TOPOLOGY=2x28x2";
    auto r = intel_launch(line + " --dry-run --num-cores=4 -- infer_option=SQuAD", topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(running_line(r.out).find("running: " + testing::bertbench_path() + " bench "),
              std::string::npos) << r.out;  // no binding without --socket-id
    EXPECT_NE(running_line(r.out).find(" --threads=4"), std::string::npos) << r.out;
    r = intel_launch(line + " --dry-run --num-cores=4 --socket-id=1 -- infer_option=SQuAD", topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(running_line(r.out).find(have_numactl()
                                           ? "running: numactl -C 28-31,84-87 --membind=1 "
                                           : "running: taskset -c 28-31,84-87 "),
              std::string::npos) << r.out;
    r = intel_launch(line + " --dry-run --num-cores=57 -- infer_option=SQuAD", topo);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("Number of cores exceeds system core number: 56"), std::string::npos)
        << r.out;

    // A real run: 1 thread, Intel's warning for --num-instances, the report's thread count.
    const std::string out = d.tmp.file("bench");
    r = intel_launch(line + " --num-cores=1 --num-instances=2 --output-dir " + out +
               " -- infer_option=SQuAD max_seq_length=32 warmup_steps=1 steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("Warning: The --num-instances flag is deprecated and will be removed in "
                         "the future. Please use --numa-cores-per-instance instead."),
              std::string::npos) << r.out;
    const json p = read_json(out + "/bench_squad_infer.json")["points"][0];
    EXPECT_EQ(p["threads"], 1);
    EXPECT_EQ(p["batch_size"], 1);
}

// --numa-cores-per-instance (the quickstarts' inference_*_multi_instance.sh): Intel's CPU groups
// on a described machine (2 sockets x 28 cores x 2 threads: each node's first 28 CPUs, joined and
// cut in consecutive groups, a remainder left idle), its log names, one `bertbench bench` per
// instance; then a real run of two 1-core instances here, whose logs carry the `Total throughput`
// lines the quickstarts' grep | awk sums.
TEST(IntelLaunchBenchmark, NumaCoresPerInstanceAsIntelsMultiInstance) {
    const IntelDirs d;
    for (const char* f : {"vocab.txt", "bert_config.json"})
        fs::copy_file(d.checkpoint + "/" + f, d.dataset + "/" + f);
    const std::string graph = d.tmp.file("fp32_bert_squad.pb");
    std::ofstream(graph) << "frozen";
    const std::string out = d.tmp.file("out");
    const std::string line =
        "--model-name=bert_large --precision=fp32 --mode=inference"
        " --framework=tensorflow --in-graph " +
        graph + " --data-location " + d.dataset + " --output-dir " + out +
        " --batch-size 1 --checkpoint " + d.checkpoint + " --benchmark-only";
    const std::string topo = "BERTBENCH_CPU_TOPOLOGY=2x28x2";
    const std::string bind = have_numactl() ? "numactl --localalloc --physcpubind=" : "taskset -c ";
    auto r = intel_launch(line +
                        " --dry-run --numa-cores-per-instance 4 --num-intra-threads 8 -- "
                        "infer-option=SQuAD",
                    topo);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, " 2>&1 & \\\n"), 14u) << r.out;
    EXPECT_NE(r.out.find(bind + "28,29,30,31 " + testing::bertbench_path() + " bench "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("--json=" + out +
                         "/instance_7/bench_squad_infer.json --precision=fp32 "
                         "--threads=4 >> " +
                         out + "/bert_large_fp32_inference_bs1_cores4_instance7.log"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("--num-intra-threads=8: only 4 CPU(s) here"), std::string::npos) << r.out;
    r = intel_launch(line + " --dry-run --numa-cores-per-instance 3 -- infer-option=SQuAD", topo);
    EXPECT_EQ(count_of(r.out, " 2>&1 & \\\n"), 18u) << r.out;
    EXPECT_NE(r.out.find(bind + "27,28,29 "), std::string::npos) << r.out;  // spans both nodes
    EXPECT_NE(r.out.find("NOTE: Skipping remainder of 2 cores for instance 18"), std::string::npos);
    r = intel_launch(line + " --dry-run --numa-cores-per-instance socket -- infer-option=SQuAD", topo);
    EXPECT_EQ(count_of(r.out, " 2>&1 & \\\n"), 2u) << r.out;
    EXPECT_NE(r.out.find("_bs1_cores28_instance1.log"), std::string::npos) << r.out;
    r = intel_launch(line + " --dry-run --numa-cores-per-instance 4 --socket-id 1 -- infer-option=SQuAD",
               topo);
    EXPECT_EQ(count_of(r.out, " 2>&1 & \\\n"), 7u) << r.out;
    EXPECT_NE(r.out.find(bind + "28,29,30,31 "), std::string::npos) << r.out;
    for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
             {"--numa-cores-per-instance 29 --socket-id 0",
              "The number of --numa-cores-per-instance (29) cannot exceed the number of cores per "
              "socket 28 when a single socket (--socket-id 0) is being used."},
             {"--numa-cores-per-instance 57",
              "The number of --numa-cores-per-instance (57) cannot exceed the number of system "
              "cores (56)."},
             {"--numa-cores-per-instance 0",
              "--numa-cores-per-instance=0: Invalid number of cores "
              "per instance (0). The value must be a positive integer or 'socket'"},
             {"--numa-cores-per-instance 4 --mpi_num_processes 2",
              "--mpi_num_processes cannot be used together with --numa-cores-per-instance."}}) {
        r = intel_launch(line + " " + args + " -- infer-option=SQuAD", topo);
        EXPECT_EQ(r.exit_code, 1) << args;
        EXPECT_NE(r.out.find("launch_benchmark.py: error: " + want), std::string::npos) << r.out;
    }
    EXPECT_FALSE(fs::exists(out));

    // instances of one core each, here
    r = intel_launch(line +
               " --numa-cores-per-instance 1 -- infer-option=SQuAD max_seq_length=32 "
               "warmup_steps=1 steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // one instance per physical core the process may use (here two; a VM showing its vCPUs as
    // one core's hyper-threads has one)
    const int n = static_cast<int>(count_of(r.out, " 2>&1 & \\\n"));
    EXPECT_GE(n, 1) << r.out;
    double sum = 0;
    std::string all;
    for (int k = 0; k < n; ++k) {
        const std::string log = slurp(out + "/bert_large_fp32_inference_bs1_cores1_instance" +
                                      std::to_string(k) + ".log");
        all += log;
        EXPECT_EQ(log.rfind(bind, 0), 0u) << log;  // the command first, then a blank line
        EXPECT_EQ(count_of(log, "Total throughput (examples/sec): "), 1u) << log;
        const json p = read_json(out + "/instance_" + std::to_string(k) +
                                 "/bench_squad_infer.json")["points"][0];
        EXPECT_EQ(p["threads"], 1);
        sum += value_after(log, "Total throughput (examples/sec): ");
    }
    EXPECT_EQ(slurp(out + "/bert_large_fp32_inference_bs1_cores1_all_instances.log"), all);
    const std::string summed =
        run_shell("grep 'Total throughput' " + out +
                  "/bert_large_fp32_inference_bs1_cores1_all_instances.log | awk ' {sum+=$(NF);} "
                  "END{print sum} '")
            .out;
    EXPECT_NEAR(std::stod(summed), sum, 1e-3 * sum);
    EXPECT_NE(r.out.find("grep | awk sums them: " + summed.substr(0, summed.size() - 1)),
              std::string::npos)
        << r.out << summed;
    // Intel's model_init.py: multi-instance runs need an empty --output-dir
    r = intel_launch(line + " --numa-cores-per-instance 1 -- infer-option=SQuAD");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("launch_benchmark.py: error: ERROR: The output directory (" + out +
                         ") is not empty."),
              std::string::npos)
        << r.out;
    // a failing instance: its error line, which is in its log, is said (the log's name was, twice)
    std::string missing = line;
    missing.replace(missing.find(" --data-location " + d.dataset), 17 + d.dataset.size(),
                    " --data-location " + d.tmp.file("nowhere"));
    missing.replace(missing.find(" --output-dir " + out), 14 + out.size(), " --output-dir " + d.tmp.file("out2"));
    r = intel_launch(missing + " --numa-cores-per-instance 1 -- infer-option=SQuAD max_seq_length=32 warmup_steps=1 steps=2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("_instance0.log failed (exit 1): bertbench bench: error: " + d.tmp.file("nowhere") +
                         "/bert_config.json"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench
