// bertbench squad --do_train / --do_predict end to end through the binary, on the golden SQuAD
// files with BERT-tiny at a short sequence length: the loss falls; SIGTERM checkpoints and exits
// 143 and the same command resumes to bit-identical logs, logits and predictions; decoding the
// run's raw_results.jsonl gives its predictions byte for byte; a fine-tuned checkpoint predicts
// the same logits without --do_train; fine-tuning starts from a pretraining checkpoint, which
// --do_predict alone refuses (no span head) before writing anything; --dtype=bf16 fine-tunes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../cli/run_util.hpp"
#include "../test_util.hpp"
#include "core/fs.hpp"

namespace {

namespace fs = std::filesystem;
using bertbench::read_file;
using namespace bertbench::testing;
using nlohmann::json;

// run_squad.py's flags at seq 64 (query <= 24 WordPieces, stride 32) on the golden files.
std::vector<std::string> squad_args(const std::string& out) {
    return {"squad",
            "--vocab_file=" + golden("vocab.txt"),
            "--model=tiny",
            "--do_train",
            "--train_file=" + golden("squad_pipeline/train-v1.1.json"),
            "--do_predict",
            "--predict_file=" + golden("squad_pipeline/dataset-v1.1.json"),
            "--output_dir=" + out,
            "--max_seq_length=64",
            "--max_query_length=24",
            "--doc_stride=32",
            "--train_batch_size=8",
            "--predict_batch_size=16",
            "--num_train_epochs=4",
            "--learning_rate=1e-3",
            "--save_checkpoints_steps=5",
            "--seed=7",
            "--threads=1"};
}

std::string join(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += " '" + a + "'";
    return s;
}

TEST(SquadTrainE2E, FineTunesResumesAndPredictsSlow) {
    const TmpDir tmp("bb_squad_e2e");
    const std::string a = tmp.file("a"), b = tmp.file("b"), c = tmp.file("c"), d = tmp.file("d");

    const RunResult ra = run_bertbench(join(squad_args(a)));
    ASSERT_EQ(ra.exit_code, 0) << ra.out;
    // 69 training examples (3 answers the reference skips are not examples): int(69 / 8 * 4).
    const json res = json::parse(read_file(a + "/results.json"));
    EXPECT_EQ(res["status"], "completed");
    EXPECT_EQ(res["global_step"], 34);
    EXPECT_EQ(res["task"], "squad");
    const std::vector<json> log = read_jsonl(a + "/train_log.jsonl");
    ASSERT_EQ(log.size(), 34u);
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) {
        first += log[static_cast<size_t>(i)]["loss"].get<double>() / 5;
        last += log[log.size() - 1 - static_cast<size_t>(i)]["loss"].get<double>() / 5;
    }
    EXPECT_LT(last, 0.8 * first) << "the span loss did not fall: " << first << " -> " << last;
    // Warm-up over int(34 * 0.1) = 3 steps, then linear decay to 0 (optimization.py).
    EXPECT_DOUBLE_EQ(log[0]["learning_rate"].get<double>(), 0.0);
    EXPECT_NEAR(log[3]["learning_rate"].get<double>(), 1e-3 * (1 - 3.0 / 34), 1e-9);

    // One raw result per eval feature, all 64 positions each; the metric ran.
    const std::vector<json> raw = read_jsonl(a + "/raw_results.jsonl");
    const json speed = json::parse(read_file(a + "/predict_speed.json"));
    EXPECT_EQ(speed["sequences"].get<size_t>(), raw.size());
    ASSERT_FALSE(raw.empty());
    EXPECT_EQ(raw[0]["start_logits"].size(), 64u);
    EXPECT_EQ(raw[0]["unique_id"], 1000000000);
    const json metric = json::parse(read_file(a + "/eval_results.json"));
    EXPECT_TRUE(metric.contains("exact_match") && metric.contains("f1")) << metric.dump();
    EXPECT_NE(ra.out.find("\"f1\""), std::string::npos) << ra.out;

    // SIGTERM once the first checkpoint exists: checkpoint, exit 143, no predictions; the same
    // command resumes to the same logs and the same predictions.
    const pid_t pid = spawn_bertbench(squad_args(b), tmp.file("b1.log"));
    ASSERT_TRUE(wait_for_file(b + "/model.ckpt-5.safetensors", pid)) << read_file(tmp.file("b1.log"));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << read_file(tmp.file("b1.log"));
    EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << read_file(tmp.file("b1.log"));
    EXPECT_FALSE(fs::exists(b + "/predictions.json"));
    EXPECT_LT(train_lines(b).size(), 34u);
    const RunResult rb = run_bertbench(join(squad_args(b)));
    ASSERT_EQ(rb.exit_code, 0) << rb.out;
    EXPECT_NE(rb.out.find("resuming from"), std::string::npos) << rb.out;
    EXPECT_EQ(train_lines(b), train_lines(a));
    EXPECT_EQ(read_file(b + "/raw_results.jsonl"), read_file(a + "/raw_results.jsonl"));
    EXPECT_EQ(read_file(b + "/predictions.json"), read_file(a + "/predictions.json"));

    // The run's own logits decode to its predictions without a model.
    const std::string common = " --vocab_file=" + golden("vocab.txt") +
                               " --predict_file=" + golden("squad_pipeline/dataset-v1.1.json") +
                               " --max_seq_length=64 --max_query_length=24 --doc_stride=32";
    const RunResult rc = run_bertbench("squad --do_predict --output_dir=" + c + common +
                                       " --raw_results=" + a + "/raw_results.jsonl");
    ASSERT_EQ(rc.exit_code, 0) << rc.out;
    EXPECT_EQ(read_file(c + "/predictions.json"), read_file(a + "/predictions.json"));
    EXPECT_EQ(read_file(c + "/nbest_predictions.json"), read_file(a + "/nbest_predictions.json"));

    // The fine-tuned checkpoint alone predicts the same logits (its config comes with it): at another
    // batch size and thread count, so oneDNN may block the products differently (on AVX2 it does):
    // within 1e-5, not bit for bit.
    const RunResult rd = run_bertbench("squad --do_predict --output_dir=" + d + common +
                                       " --predict_batch_size=5 --threads=1 --init_checkpoint=" + a +
                                       "/model.ckpt-34.safetensors");
    ASSERT_EQ(rd.exit_code, 0) << rd.out;
    const std::vector<json> got = read_jsonl(d + "/raw_results.jsonl"), want = read_jsonl(a + "/raw_results.jsonl");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i]["unique_id"], want[i]["unique_id"]);
        for (const char* k : {"start_logits", "end_logits"}) {
            const std::vector<double> g = got[i][k], w = want[i][k];
            ASSERT_EQ(g.size(), w.size()) << i << " " << k;
            for (size_t j = 0; j < w.size(); ++j) EXPECT_NEAR(g[j], w[j], 1e-5 * (1 + std::abs(w[j]))) << i << " " << k;
        }
    }
}

TEST(SquadTrainE2E, PretrainingCheckpointFineTunesButDoesNotPredict) {
    const TmpDir tmp("bb_squad_init");
    const std::string pre = tmp.file("pre"), ft = tmp.file("ft"), pr = tmp.file("pr");
    // A pretraining checkpoint (BERT-tiny, one step).
    const RunResult rp = run_bertbench(
        "pretrain --model=tiny --input_file=" + golden("pretraining/public_128_cased_s7_d1.tfrecord") +
        " --output_dir=" + pre + " --train_batch_size=2 --num_train_steps=1 --num_warmup_steps=0 --threads=1");
    ASSERT_EQ(rp.exit_code, 0) << rp.out;
    const std::string ckpt = pre + "/model.ckpt-1.safetensors";
    const std::string flags = " --vocab_file=" + golden("vocab.txt") + " --max_seq_length=64" +
                              " --max_query_length=24 --doc_stride=32 --threads=1 --init_checkpoint=";
    const std::string common = flags + ckpt;

    // --do_predict alone: refused before any output, naming the file and the missing head.
    const RunResult bad = run_bertbench("squad --do_predict --predict_file=" +
                                        golden("squad_pipeline/dataset-v1.1.json") + " --output_dir=" + pr + common);
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find(ckpt), std::string::npos) << bad.out;
    EXPECT_NE(bad.out.find("cls/squad/output"), std::string::npos) << bad.out;
    EXPECT_FALSE(fs::exists(pr + "/eval.tf_record"));

    // No checkpoint at all for --do_predict alone.
    const RunResult none = run_bertbench("squad --do_predict --predict_file=" +
                                         golden("squad_pipeline/dataset-v1.1.json") + " --output_dir=" + pr +
                                         " --vocab_file=" + golden("vocab.txt"));
    EXPECT_EQ(none.exit_code, 1) << none.out;
    EXPECT_NE(none.out.find("--init_checkpoint"), std::string::npos) << none.out;

    // Fine-tuning from it: the encoder loads, the span head starts from its initialisation.
    const RunResult rf = run_bertbench("squad --do_train --train_file=" +
                                       golden("squad_pipeline/train-v1.1.json") + " --output_dir=" + ft +
                                       " --train_batch_size=16 --num_train_epochs=0.5 --dtype=bf16" + common);
    ASSERT_EQ(rf.exit_code, 0) << rf.out;
    EXPECT_EQ(json::parse(read_file(ft + "/results.json"))["dtype"], "bf16");
    EXPECT_NE(rf.out.find("2 absent, left as initialised: cls/squad/output_weights, cls/squad/output_bias"),
              std::string::npos) << rf.out;
    EXPECT_EQ(json::parse(read_file(ft + "/results.json"))["global_step"], 2);  // int(69 / 16 * 0.5)

    // The checkpoint named as TF names it (model.ckpt-1): bertbench's file of that name, said once.
    const std::string tf_named = tmp.file("tf_named");
    const RunResult rt = run_bertbench("squad --do_train --train_file=" +
                                       golden("squad_pipeline/train-v1.1.json") + " --output_dir=" +
                                       tf_named + " --train_batch_size=16 --num_train_epochs=0.5" +
                                       flags + pre + "/model.ckpt-1");
    ASSERT_EQ(rt.exit_code, 0) << rt.out;
    EXPECT_NE(rt.out.find("--init_checkpoint=" + pre + "/model.ckpt-1: no such file or TensorFlow "
                          "prefix; reading " + ckpt), std::string::npos) << rt.out;
}

}  // namespace
