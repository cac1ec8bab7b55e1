// Intel model zoo's launch_benchmark.py lines for BERT-large (benchmarks/language_modeling/
// tensorflow/bert_large/{training,inference}/bfloat16/Advanced.md), run with only the script's path
// changed (scripts/launch_benchmark.py, issue 25 item 5), paths and sizes shrunk: SQuAD training
// under 2 MPI processes, the inference accuracy line on the fine-tuned checkpoint, the inference
// benchmark line, the pre-training line; each prints the bertbench command it runs. Lines it cannot map are one-line
// refusals that run nothing. Tiny model (L2 H64 A2 I128).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "dist/mpi_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::golden;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// python3 scripts/launch_benchmark.py <args>, with this build's bertbench and the tests' mpirun.
testing::RunResult launch(const std::string& args) {
    const char* src = std::getenv("BB_SOURCE_DIR");
    const std::string script = std::string(src ? src : ".") + "/scripts/launch_benchmark.py";
    return run_shell("ASAN_OPTIONS=detect_leaks=0 BERTBENCH='" + testing::bertbench_path() +
                     "' BERTBENCH_MPIRUN='" + testing::mpirun_command(300) + "' python3 " + script +
                     " " + args);
}

// $CHECKPOINT_DIR (vocab.txt, bert_config.json, the pretrained TF checkpoint bert_model.ckpt) and
// $DATASET_DIR (train-v1.1.json, dev-v1.1.json) of Intel's guide.
struct IntelDirs {
    TmpDir tmp{"bb_intel"};
    std::string checkpoint = tmp.file("wwm_uncased_L-24_H-1024_A-16");
    std::string dataset = tmp.file("SQuAD-1.1");
    IntelDirs() {
        testing::write_tiny_bert_dir(checkpoint, tmp.file("init.safetensors"));
        fs::create_directories(dataset);
        fs::copy_file(golden("squad_pipeline/train-v1.1.json"), dataset + "/train-v1.1.json");
        fs::copy_file(golden("squad_pipeline/dataset-v1.1.json"), dataset + "/dev-v1.1.json");
    }
};

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
    auto r = launch(training_line(d, out));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // The command it runs: 2 ranks, global batch 2 x 4, learning rate x sqrt(2), bfloat16.
    const size_t at = r.out.find("launch_benchmark.py: running: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string cmd = r.out.substr(at, r.out.find('\n', at) - at);
    for (const std::string& want : std::vector<std::string>{
             " -np 2 ", " squad ", " --train_batch_size=8 ", " --learning_rate=0.00042426406871",
             " --do_lower_case=True ", " --init_checkpoint=" + d.checkpoint + "/bert_model.ckpt ",
             " --max_seq_length=128 ", " --precision=bfloat16"})
        EXPECT_NE(cmd.find(want), std::string::npos) << want << "\n" << cmd;
    EXPECT_NE(r.out.find("accepted, no effect here (no container, no TensorFlow thread pools): "
                         "--docker-image, --volume, optimized_softmax=True, experimental_gelu=False"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("{\"exact_match\": "), std::string::npos) << r.out;
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["number_of_ranks"], 2);
    EXPECT_EQ(res["global_batch_size"], 8);
    EXPECT_EQ(res["dtype"], "bf16");
    ASSERT_TRUE(fs::exists(out + "/predictions.json"));

    // Inference, accuracy mode: the fine-tuned checkpoint as Intel's (--checkpoint's
    // model.ckpt-3649, a TF checkpoint), the data and model files in --data-location.
    const std::string fine_tuned = d.tmp.file("bert_large_checkpoints");
    fs::create_directories(fine_tuned);
    ASSERT_EQ(run_bertbench("convert --to=tf --input=" + res["last_checkpoint"].get<std::string>() +
                            " --output=" + fine_tuned + "/model.ckpt-3649").exit_code, 0);
    for (const char* f : {"vocab.txt", "bert_config.json"})
        fs::copy_file(d.checkpoint + "/" + f, d.dataset + "/" + f);
    const std::string infer_out = d.tmp.file("bert-squad-output");
    r = launch("--model-name=bert_large --precision=bfloat16 --mode=inference --framework=tensorflow"
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

    // Inference, benchmark mode: bench --task=squad in bfloat16, its report in --output-dir.
    const std::string bench_out = d.tmp.file("bench-output");
    r = launch("--model-name=bert_large --precision=bfloat16 --mode=inference --framework=tensorflow"
               " --batch-size=4 --data-location " + d.dataset + " --checkpoint " + fine_tuned +
               " --output-dir " + bench_out + " --docker-image intel/intel-optimized-tensorflow:latest"
               " --benchmark-only -- infer_option=SQuAD warmup_steps=1 steps=2");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(" bench --task=squad --mode=infer --bert_config_file=" + d.dataset +
                         "/bert_config.json --batch_size=4 --seq_len=384 --warmup=1 --steps=2"),
              std::string::npos) << r.out;
    const json bench = json::parse(slurp(bench_out + "/bench_squad_infer.json"));
    ASSERT_FALSE(bench["points"].empty()) << bench.dump();
    EXPECT_EQ(bench["points"][0]["dtype"], "bf16");
    EXPECT_EQ(bench["points"][0]["batch_size"], 4);
}

// The guide's pre-training line (train-option=Pretraining, one process), sizes shrunk: Intel's
// run_pretraining.py is google's (AdamW), its flags bertbench pretrain's.
TEST(IntelLaunchBenchmark, PretrainingLine) {
    const IntelDirs d;
    const std::string out = d.tmp.file("pretrain-output");
    const auto r = launch(
        "--model-name=bert_large --precision=fp32 --mode=training --framework=tensorflow"
        " --batch-size=4 --socket-id=-1 --num-intra-threads=1 --num-inter-threads=1 --output-dir " +
        out + " -- train-option=Pretraining input-file=" +
        golden("pretraining/public_128_s12345_d2.tfrecord") +
        " do-train=True do-eval=True"
        " config-file=" +
        d.checkpoint + "/bert_config.json init-checkpoint=" + d.checkpoint +
        "/bert_model.ckpt max-seq-length=128 max-predictions=20 num-train-steps=2 warmup-steps=1"
        " learning-rate=2e-5 optimized_softmax=True experimental_gelu=False profile=False");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(" pretrain --input_file="), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" --optimizer=adamw "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" --threads=1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("profile=False"), std::string::npos) << r.out;  // listed, no effect
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["global_step"], 2);
    EXPECT_EQ(res["global_batch_size"], 4);
    const json cfg = json::parse(slurp(out + "/config.json"));
    EXPECT_EQ(cfg["flags"]["optimizer"], "adamw");
    EXPECT_EQ(cfg["flags"]["num_warmup_steps"], 1);
}

// What has no bertbench equivalent: one line with the reason, exit 1, nothing run or created.
TEST(IntelLaunchBenchmark, UnmappableLinesAreRefusedInOneLine) {
    const IntelDirs d;
    const std::string out = d.tmp.file("never");
    const std::string infer = "--model-name=bert_large --mode=inference --framework=tensorflow"
                              " --batch-size=8 --data-location " + d.dataset + " --checkpoint " +
                              d.checkpoint + " --output-dir " + out;
    const std::vector<std::pair<std::string, std::string>> cases{
        {infer + " --precision=int8 -- infer_option=SQuAD", "--precision=int8: not run by bertbench"},
        {infer + " --precision=fp16 -- infer_option=SQuAD", "--precision=fp16: bertbench has no fp16"},
        {infer + " --precision=fp32 --in-graph=/x.pb -- infer_option=SQuAD", "--in-graph: a frozen"},
        {infer + " --precision=fp32 --mpi_num_processes=2 -- infer_option=SQuAD",
         "--mpi_num_processes with --mode=inference"},
        {infer + " --precision=fp32 -- infer_option=Classifier", "infer_option=Classifier"},
        {infer + " --precision=fp32 --frobnicate=1 -- infer_option=SQuAD", "unknown launcher flag"},
        {infer + " --precision=fp32 -- infer_option=SQuAD nonsense", "expected the form key=value"},
        {infer + " --precision=fp32 -- infer_option=SQuAD train_file=x", "model arg train_file=x"},
        {"--model-name=bert_large --precision=fp32 --mode=training --framework=tensorflow"
         " --output-dir " + out + " -- train_option=Classifier task_name=MRPC",
         "train_option=Classifier: bertbench has no Classifier fine-tuning"},
        {"--model-name=resnet50 --precision=fp32 --mode=inference --framework=tensorflow",
         "--model-name=resnet50"}};
    for (const auto& [args, want] : cases) {
        const auto r = launch(args);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_EQ(count_of(r.out, "launch_benchmark.py: error: "), 1u) << r.out;
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
        EXPECT_EQ(r.out.find("running: "), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(out));
    }
    // --dry-run prints the command and runs nothing.
    const auto dry = launch(infer + " --precision=bfloat16 --dry-run -- infer_option=SQuAD");
    EXPECT_EQ(dry.exit_code, 0) << dry.out;
    EXPECT_EQ(count_of(dry.out, "launch_benchmark.py: running: "), 1u) << dry.out;
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace bertbench
