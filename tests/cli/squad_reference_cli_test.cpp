// `bertbench squad` with google-research/bert run_squad.py's own command lines, on the real binary:
// the SQuAD 2.0 training line and its threshold line (README, "SQuAD 2.0"), sizes shrunk and the
// pretrained model a TF bundle made here ($BERT_BASE_DIR/bert_model.ckpt, tiny); and inputs that
// sit in --output_dir under an output's name, refused before any work (by inode); and NVIDIA NGC
// TF's line, which keeps google's meanings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "core/fs.hpp"
#include "test_util.hpp"
#include "train/loop.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::golden;
using testing::run_bertbench;
using testing::shared_dir;
using testing::slurp;
using testing::TmpDir;

// A SQuAD 2.0 file from a golden v1.1 one: every third question has no answer.
void write_v2(const std::string& v11, const std::string& out) {
    json doc = json::parse(slurp(v11));
    doc["version"] = "v2.0";
    int k = 0;
    for (auto& article : doc["data"])
        for (auto& p : article["paragraphs"])
            for (auto& qa : p["qas"]) {
                const bool impossible = k++ % 3 == 2;
                qa["is_impossible"] = impossible;
                if (impossible) qa["answers"] = json::array();
            }
    write_file_atomic(out, doc.dump());
}

// $BERT_BASE_DIR as google-research/bert ships it: vocab.txt, bert_config.json and the TF bundle
// bert_model.ckpt (a tiny BERT, L2 H64 A2 I128, freshly initialised, via `convert --to=tf`).
struct BertBaseDir {
    std::string dir;
    explicit BertBaseDir(const TmpDir& tmp) : dir(tmp.file("bert_base")) {
        testing::write_tiny_bert_dir(dir, tmp.file("init.safetensors"));
    }
};

// run_squad.py's SQuAD 2.0 line (google-research/bert README), sizes shrunk; `predict_only` is
// the threshold line's --do_train=False --null_score_diff_threshold=<thresh>.
std::string squad_v2_line(const BertBaseDir& b, const std::string& train, const std::string& dev,
                          const std::string& out, const std::string& thresh = "") {
    return "squad --vocab_file=" + b.dir + "/vocab.txt --bert_config_file=" + b.dir +
           "/bert_config.json --init_checkpoint=" + b.dir + "/bert_model.ckpt --do_train=" +
           (thresh.empty() ? "True" : "False") + " --train_file=" + train +
           " --do_predict=True --predict_file=" + dev +
           " --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=2.0 --max_seq_length=64"
           " --max_query_length=24 --doc_stride=32 --output_dir=" + out +
           " --use_tpu=True --tpu_name=my-tpu --version_2_with_negative=True --threads=1" +
           (thresh.empty() ? "" : " --null_score_diff_threshold=" + thresh);
}

TEST(SquadReferenceCli, V2ThresholdLinePredictsWithTheFineTunedCheckpoint) {
    const TmpDir tmp("bb_squadref_v2");
    const BertBaseDir base(tmp);
    const std::string train = tmp.file("train-v2.0.json"), dev = tmp.file("dev-v2.0.json");
    write_v2(golden("squad_pipeline/train-v1.1.json"), train);
    write_v2(golden("squad_pipeline/dataset-v1.1.json"), dev);
    const std::string out = tmp.file("squad_base");

    // Fine-tuning (int(examples / 8 * 2.0) steps), then predictions from the last checkpoint.
    auto r = run_bertbench(squad_v2_line(base, train, dev, out));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const int64_t steps = json::parse(slurp(out + "/results.json"))["global_step"].get<int64_t>();
    EXPECT_GT(steps, 10);
    const std::string ckpt = out + "/model.ckpt-" + std::to_string(steps) + ".safetensors";
    ASSERT_TRUE(fs::exists(ckpt)) << r.out;
    EXPECT_NE(r.out.find("predicting with " + ckpt + ", the fine-tuning run's last checkpoint"),
              std::string::npos) << r.out;
    const std::string raw = slurp(out + "/raw_results.jsonl");
    const std::string results = slurp(out + "/results.json");

    // The threshold line: --init_checkpoint is still the pretrained BERT (no span head), and the
    // fine-tuned checkpoint in --output_dir wins, as TF's Estimator restores it.
    std::vector<json> preds, odds;
    for (const std::string thresh : {"1000", "-1000", "0.0"}) {
        r = run_bertbench(squad_v2_line(base, train, dev, out, thresh));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(
            count_of(r.out, "predicting with " + ckpt +
                                ", the latest checkpoint in "
                                "--output_dir=" +
                                out + ", not --init_checkpoint=" + base.dir + "/bert_model.ckpt"),
            1u)
            << r.out;
        EXPECT_EQ(slurp(out + "/raw_results.jsonl"), raw);  // the same model, the same logits
        EXPECT_EQ(slurp(out + "/results.json"), results);   // no training ran
        EXPECT_EQ(train::latest_checkpoint(out), ckpt);
        preds.push_back(json::parse(slurp(out + "/predictions.json")));
        odds.push_back(json::parse(slurp(out + "/null_odds.json")));
        EXPECT_NE(r.out.find("\"NoAns_total\""), std::string::npos) << r.out;  // evaluate-v2.0.py
    }
    // README: "predict no answer when null score - best non-null score > threshold": every
    // question is "" exactly when its null odds exceed the threshold; +1000 answers all, -1000 none.
    // (A question whose n-best holds no non-empty answer has no null odds and is "": docs/squad.md.)
    const double thresholds[] = {1000, -1000, 0};
    for (size_t t = 0; t < 3; ++t) {
        EXPECT_EQ(odds[t], odds[0]);
        ASSERT_GE(odds[t].size() + 2, preds[t].size());
        size_t empty = 0;
        for (const auto& [id, text] : preds[t].items()) {
            if (!odds[t].contains(id)) {
                EXPECT_EQ(text, "") << id;
                continue;
            }
            const bool no_answer = odds[t][id].get<double>() > thresholds[t];
            EXPECT_EQ(text.get<std::string>().empty(), no_answer) << id << " at " << thresholds[t];
            empty += text.get<std::string>().empty();
        }
        if (t == 0) {
            EXPECT_EQ(empty, 0u);
        } else if (t == 1) {
            EXPECT_EQ(empty, odds[t].size());
        }
    }
    EXPECT_NE(preds[0], preds[1]);

    // No checkpoint in --output_dir: --init_checkpoint is used, and a pretrained BERT (no span
    // head) is refused naming it, before anything is written.
    const std::string fresh = tmp.file("fresh");
    r = run_bertbench(squad_v2_line(base, train, dev, fresh, "0.0"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(base.dir + "/bert_model.ckpt"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cls/squad/output"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(fresh + "/eval.tf_record"));
}

// NVIDIA NGC TF's scripts/run_squad.sh line (--horovod and --amp or --noamp, never
// --do_lower_case): its run_squad.py lower-cases by default as google's, so train.tf_record is
// google's byte for byte. --amp is also a flag of NVIDIA's PyTorch run_squad.py, whose meaning
// (cased without --do_lower_case) the line once got.
TEST(SquadReferenceCli, NgcTfLineHasGooglesMeaningsWithNvidiasBatchAndDecay) {
    const TmpDir tmp("bb_squad_ngc");
    for (const char* amp : {"--amp", "--noamp"}) {
        const std::string out = tmp.file(std::string("out") + amp);
        const auto r = run_bertbench("squad --vocab_file=" + golden("vocab.txt") + " --train_file=" +
                                     golden("squad_pipeline/train-v1.1.json") +
                                     " --do_train=True --features_only --max_seq_length=384 --doc_stride=128"
                                     " --output_dir=" + out + " --horovod " + amp);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(r.out.find("NVIDIA PyTorch"), std::string::npos) << r.out;
        EXPECT_EQ(slurp(out + "/train.tf_record"), slurp(golden("squad_pipeline/train_main_shuffled_384.tf_record")))
            << amp;
    }
    // Where NVIDIA changed google's script: --num_accumulation_steps micro-batches of
    // --train_batch_size per update, and AdamWeightDecay's decay from lr / (1 - W/T), which meets
    // the warm-up's end (its optimization.py). 69 examples, batch 4 x 2, 2 epochs: T =
    // int(69 / 8 x 2) = 17 updates, W = int(1.7) = 1.
    const std::string config = tmp.file("bert_config.json");
    std::ofstream(config) << R"({"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "type_vocab_size": 2})";
    const std::string line = "squad --vocab_file=" + golden("vocab.txt") + " --bert_config_file=" +
                             config + " --train_file=" + golden("squad_pipeline/train-v1.1.json") +
                             " --do_train=True --train_batch_size=4 --learning_rate=5e-4"
                             " --num_train_epochs=2.0 --max_seq_length=64 --doc_stride=32"
                             " --max_query_length=24 --save_checkpoints_steps 1000 --horovod --amp"
                             " --use_xla --version_2_with_negative=False --threads=1"
                             " --num_accumulation_steps=2 --output_dir=";
    auto r = run_bertbench(line + tmp.file("trained"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "NVIDIA NGC TF run_squad.py meaning of the flags (--horovod given): "
                              "--train_batch_size=4 per GPU (here per rank) and micro-batch x "
                              "--num_accumulation_steps=2 x 1 rank = 8 sequences per update"), 1u)
        << r.out;
    const auto log = testing::read_jsonl(tmp.file("trained") + "/train_log.jsonl");
    ASSERT_EQ(log.size(), 17u);
    EXPECT_EQ(log[0]["learning_rate"].get<float>(), 0.0f);  // warm-up: 0 / 1
    for (size_t s = 1; s < log.size(); ++s)
        EXPECT_FLOAT_EQ(log[s]["learning_rate"].get<float>(),
                        static_cast<float>(5e-4 / (1 - 1.0 / 17) * (1 - s / 17.0))) << s;
    // Its flags without an equivalent here: refused naming the flag, before any output.
    for (const char* flag : {"--num_eval_iterations=2", "--export_triton"}) {
        r = run_bertbench(line + tmp.file("refused") + " " + flag);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find(std::string(flag) + ": not supported"), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(tmp.file("refused")));
    }
    // NVIDIA PyTorch run_squad.py's step flags on this line: refused, not dropped
    for (const char* flag : {"--max_steps=3", "--gradient_accumulation_steps=4"}) {
        r = run_bertbench(line + tmp.file("refused") + " " + flag);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find(std::string(flag).substr(0, std::string(flag).find('=')) +
                             ": expected the flags of one script, got NVIDIA PyTorch run_squad.py's"),
                  std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(tmp.file("refused")));
    }
}

// --predict_file, --train_file, --vocab_file given as one of the files squad writes in
// --output_dir (the same path, a symlink or a hard link): refused before any work, naming the
// flag; the input is left as it was.
TEST(SquadReferenceCli, InputThatIsAnOutputIsRefusedBeforeAnyWork) {
    const TmpDir tmp("bb_squadref_io");
    const std::string out = tmp.file("out");
    fs::create_directories(out);
    const std::string dev = golden("squad_pipeline/dataset-v1.1.json");
    const std::string vocab = " --vocab_file=" + golden("vocab.txt");
    const auto refused = [&](const std::string& args, const std::string& flag,
                             const std::string& file, const std::string& output) {
        const std::string before = slurp(file);
        const auto r = run_bertbench("squad" + vocab + " --output_dir=" + out + args);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_EQ(count_of(r.out, "error: "), 1u) << r.out;
        EXPECT_NE(r.out.find("--output_dir=" + out + "/" + output + ": is the same file as the "
                             "input " + flag), std::string::npos) << r.out;
        EXPECT_EQ(slurp(file), before);
        EXPECT_FALSE(fs::exists(out + "/eval.tf_record")) << args;
        EXPECT_FALSE(fs::exists(out + "/config.json")) << args;
    };
    // The predict file under an output's name.
    fs::copy_file(dev, out + "/predictions.json");
    refused(" --do_predict --predict_file=" + out + "/predictions.json --raw_results=" +
                golden("squad_pipeline/predictions_384/logits.jsonl"),
            "--predict_file", out + "/predictions.json", "predictions.json");
    fs::remove(out + "/predictions.json");
    // The training file as train.tf_record (--features_only writes it first thing).
    fs::copy_file(golden("squad_pipeline/train-v1.1.json"), out + "/train.tf_record");
    refused(" --do_train --features_only --train_file=" + out + "/train.tf_record",
            "--train_file", out + "/train.tf_record", "train.tf_record");
    fs::remove(out + "/train.tf_record");
    // Another spelling: a symlink in --output_dir to the predict file elsewhere (SQuAD 2.0 adds
    // null_odds.json to the outputs).
    const std::string elsewhere = tmp.file("dev.json");
    fs::copy_file(dev, elsewhere);
    fs::create_symlink(elsewhere, out + "/null_odds.json");
    refused(" --do_predict --version_2_with_negative --predict_file=" + elsewhere +
                " --raw_results=" + golden("squad_pipeline/predictions_384/logits.jsonl"),
            "--predict_file", elsewhere, "null_odds.json");
    fs::remove(out + "/null_odds.json");
    // A hard link of the vocabulary as eval.tf_record.
    const std::string vocab_copy = tmp.file("vocab.txt");
    fs::copy_file(golden("vocab.txt"), vocab_copy);
    fs::create_hard_link(vocab_copy, out + "/eval.tf_record");
    const std::string before = slurp(vocab_copy);
    const auto r = run_bertbench("squad --vocab_file=" + vocab_copy + " --output_dir=" + out +
                                 " --do_predict --features_only --predict_file=" + dev);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("is the same file as the input --vocab_file (" + vocab_copy +
                         ", same inode)"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(vocab_copy), before);
}

// run_squad.py's validate_case_matches_checkpoint: Google's released cased model with the default
// --do_lower_case=True (and an uncased one with False) is refused before anything is written.
TEST(SquadReferenceCli, CaseMustMatchGooglesReleasedModel) {
    const TmpDir tmp{"bb_squadcase"};
    for (const std::string model : {"cased_L-12_H-768_A-12", "uncased_L-12_H-768_A-12"}) {
        const std::string dir = tmp.file(model);
        testing::write_tiny_bert_dir(dir, tmp.file(model + ".safetensors"));
        const bool cased = model[0] == 'c';
        const std::string line = "squad --vocab_file=" + dir + "/vocab.txt --bert_config_file=" + dir +
                                 "/bert_config.json --init_checkpoint=" + dir + "/bert_model.ckpt --do_train "
                                 "--train_file=" + golden("squad_pipeline/train-v1.1.json") + " --features_only "
                                 "--max_seq_length=64 --max_query_length=24 --doc_stride=32 --threads=1 "
                                 "--output_dir=" + tmp.file("out_" + model);
        auto r = run_bertbench(line + (cased ? "" : " --do_lower_case=False"));
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find(": " + model + " is a " + (cased ? "cased" : "lowercased") + " model, expected "
                             "--do_lower_case=" + (cased ? "False" : "True")),
                  std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(tmp.file("out_" + model)));
        r = run_bertbench(line + (cased ? " --do_lower_case=False" : ""));
        EXPECT_EQ(r.exit_code, 0) << r.out;
    }
}

// An answer of whitespace alone: run_squad.py writes start/end positions outside the window and
// trains on them (tf.one_hot's zero row: no loss); so does bertbench. --null_score_diff_threshold
// takes absl's float "inf": every question answered.
TEST(SquadReferenceCli, WhitespaceAnswerTrainsAndInfiniteThresholdAnswersAll) {
    const TmpDir tmp{"bb_squadws"};
    const BertBaseDir b(tmp);
    std::string context;
    for (int i = 0; i < 20; ++i) context += " w" + std::to_string(i);
    const json doc = {{"version", "1.1"},
                      {"data", {{{"title", "t"},
                                 {"paragraphs", {{{"context", context},
                                                  {"qas", {{{"id", "a"}, {"question", "q?"},
                                                            {"is_impossible", false},
                                                            {"answers", {{{"text", " "}, {"answer_start", 0}}}}}}}}}}}}}};
    const std::string data = tmp.file("ws.json");
    write_file_atomic(data, doc.dump());
    const std::string out = tmp.file("out");
    const auto r = run_bertbench("squad --vocab_file=" + b.dir + "/vocab.txt --bert_config_file=" + b.dir +
                                 "/bert_config.json --init_checkpoint=" + b.dir + "/bert_model.ckpt --do_train "
                                 "--train_file=" + data + " --do_predict --predict_file=" + data +
                                 " --max_seq_length=16 --doc_stride=8 --max_query_length=4 --train_batch_size=1 "
                                 "--num_train_epochs=1 --threads=1 --version_2_with_negative "
                                 "--null_score_diff_threshold=inf --output_dir=" + out);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const json losses = json::parse(slurp(out + "/train_log.jsonl").substr(0, slurp(out + "/train_log.jsonl").find('\n')));
    EXPECT_TRUE(std::isfinite(losses["loss"].get<double>())) << losses.dump();
    const json predictions = json::parse(slurp(out + "/predictions.json"));
    EXPECT_NE(predictions["a"], "") << predictions.dump();
}

}  // namespace
}  // namespace bertbench
