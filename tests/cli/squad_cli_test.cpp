// `bertbench squad` and `bertbench squad-eval` end to end on the real binary, against the goldens:
// train.tf_record / eval.tf_record byte-identical to run_squad.py's, predictions decoded from the
// golden logits byte-identical for R=384 and R=128, the metric's stdout/stderr byte-identical to
// evaluate-v1.1.py's, and bad input (flags, a model that cannot take the features) as one-line
// errors before any output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/fs.hpp"
#include "run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {

namespace fs = std::filesystem;

struct CmdRun {
    int code = -1;
    std::string out, err;
};

struct SquadTmp {
    std::string path;
    SquadTmp() {
        char t[] = "/tmp/bb_squadcli_XXXXXX";
        path = mkdtemp(t);
    }
    ~SquadTmp() { fs::remove_all(path); }
};

CmdRun run(const SquadTmp& tmp, const std::string& args) {
    const std::string cmd = bertbench_path() + " " + args + " >" + tmp.path + "/stdout.txt 2>" + tmp.path + "/stderr.txt";
    const int status = std::system(cmd.c_str());
    CmdRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(tmp.path + "/stdout.txt");
    r.err = read_file(tmp.path + "/stderr.txt");
    return r;
}

std::string squad_flags(const std::string& out_dir, int msl = 384, int stride = 128) {
    return "squad --vocab_file=" + golden("vocab.txt") + " --output_dir=" + out_dir +
           " --max_seq_length=" + std::to_string(msl) + " --doc_stride=" + std::to_string(stride);
}

TEST(SquadEvalCli, OfficialGoldenOutput) {
    SquadTmp tmp;
    const CmdRun r = run(tmp, "squad-eval " + golden("squad/dataset-v1.1.json") + " " + golden("squad/predictions.json"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, read_file(golden("squad/expected_stdout.txt")));
    EXPECT_EQ(r.err, read_file(golden("squad/expected_stderr.txt")));
    const CmdRun bad = run(tmp, "squad-eval " + golden("squad/expected_stdout.txt") + "x " + golden("squad/predictions.json"));
    EXPECT_EQ(bad.code, 1);
    const CmdRun notjson = run(tmp, "squad-eval " + golden("vocab.txt") + " " + golden("squad/predictions.json"));
    EXPECT_EQ(notjson.code, 1);
    EXPECT_NE(notjson.err.find("not valid JSON"), std::string::npos) << notjson.err;
    // evaluate-v2.0.py's threshold on a 1.1 dataset: the same scores, and a warning that it is not used
    const CmdRun thresh = run(tmp, "squad-eval --na-prob-thresh=0.5 " + golden("squad/dataset-v1.1.json") + " " +
                                       golden("squad/predictions.json"));
    EXPECT_EQ(thresh.code, 0) << thresh.err;
    EXPECT_EQ(thresh.out, r.out);
    EXPECT_NE(thresh.err.find("warning: --na-prob-thresh=0.5: not used (evaluate-v1.1.py has no such option"),
              std::string::npos) << thresh.err;
    const CmdRun empty = run(tmp, "squad-eval " + golden("squad/dataset-v1.1.json") + " ''");
    EXPECT_EQ(empty.code, 1);
    EXPECT_NE(empty.err.find("error: PREDICTIONS: expected a file name, got ''"), std::string::npos) << empty.err;
}

// evaluate-v2.0.py (picked by "version": "v2.0" too, with no unanswerable question) on predictions
// missing for two questions: its "Missing prediction" lines on stdout, then a one-line error
// (where the script stops with KeyError), exit status 1.
TEST(SquadEvalCli, Version2MissingPredictionsAsTheScriptPrintsThem) {
    SquadTmp tmp;
    const std::string dataset = tmp.path + "/dev-v2.0.json", preds = tmp.path + "/predictions.json";
    write_file_atomic(dataset, R"({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Bo went home.",
        "qas": [{"id": "a", "question": "Who?", "answers": [{"text": "Bo", "answer_start": 0}], "is_impossible": false},
                {"id": "b", "question": "Where?", "answers": [{"text": "home", "answer_start": 8}], "is_impossible": false},
                {"id": "c", "question": "When?", "answers": [{"text": "Bo", "answer_start": 0}], "is_impossible": false}]}]}]})");
    write_file_atomic(preds, R"({"a": "Bo"})");
    const CmdRun r = run(tmp, "squad-eval " + dataset + " " + preds);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "Missing prediction for b\nMissing prediction for c\n");
    EXPECT_NE(r.err.find("no prediction for question \"b\""), std::string::npos) << r.err;
    write_file_atomic(preds, R"({"a": "Bo", "b": "home", "c": "x"})");
    const CmdRun ok = run(tmp, "squad-eval " + dataset + " " + preds);
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_NE(ok.out.find("\"HasAns_total\": 3"), std::string::npos) << ok.out;  // evaluate-v2.0.py's output
}

// evaluate-v2.0.py's own options: --na-prob-file with Python json's -Infinity (squad's null_odds.json
// writes it) and a NaN (refused: the script sorts by it), --na-prob-thresh, --out-file (its
// json.dump: one line, no newline; nothing printed), --out-image-dir refused (no plots made).
TEST(SquadEvalCli, Version2NoAnswerProbabilitiesAsTheScriptTakesThem) {
    SquadTmp tmp;
    const std::string dataset = tmp.path + "/dev-v2.0.json", preds = tmp.path + "/predictions.json",
                      odds = tmp.path + "/null_odds.json", scores = tmp.path + "/scores.json";
    write_file_atomic(dataset, R"({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "Bo went home.",
        "qas": [{"id": "a", "question": "Who?", "answers": [{"text": "Bo", "answer_start": 0}], "is_impossible": false},
                {"id": "b", "question": "Why?", "answers": [], "is_impossible": true}]}]}]})");
    write_file_atomic(preds, R"({"a": "Bo", "b": "home"})");
    write_file_atomic(odds, "{\"b\": 2.5, \"a\": -Infinity}");
    // b (2.5) above 1.0: unanswered, as it is; the search: a (-inf, +1) then b (-1): best 2 of 2 at -inf
    const CmdRun r = run(tmp, "squad-eval " + dataset + " " + preds + " --na-prob-file=" + odds);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "{\n  \"exact\": 100.0,\n  \"f1\": 100.0,\n  \"total\": 2,\n  \"HasAns_exact\": 100.0,\n"
                     "  \"HasAns_f1\": 100.0,\n  \"HasAns_total\": 1,\n  \"NoAns_exact\": 100.0,\n"
                     "  \"NoAns_f1\": 100.0,\n  \"NoAns_total\": 1,\n  \"best_exact\": 100.0,\n"
                     "  \"best_exact_thresh\": -Infinity,\n  \"best_f1\": 100.0,\n  \"best_f1_thresh\": -Infinity\n}\n");
    const CmdRun o = run(tmp, "squad-eval " + dataset + " " + preds + " --na-prob-file=" + odds +
                                  " --na-prob-thresh=3 --out-file=" + scores);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out, "");
    EXPECT_EQ(read_file(scores), "{\"exact\": 50.0, \"f1\": 50.0, \"total\": 2, \"HasAns_exact\": 100.0, "
                                 "\"HasAns_f1\": 100.0, \"HasAns_total\": 1, \"NoAns_exact\": 0.0, \"NoAns_f1\": 0.0, "
                                 "\"NoAns_total\": 1, \"best_exact\": 100.0, \"best_exact_thresh\": -Infinity, "
                                 "\"best_f1\": 100.0, \"best_f1_thresh\": -Infinity}");
    // printed: used, so no "not used" warning (that is for 1.1 datasets); inf as argparse's float()
    // takes it (b, 2.5, is then answered: "home" scores 0)
    const CmdRun inf = run(tmp, "squad-eval " + dataset + " " + preds + " --na-prob-file=" + odds +
                                    " --na-prob-thresh=inf");
    EXPECT_EQ(inf.code, 0) << inf.err;
    EXPECT_EQ(inf.err.find("not used"), std::string::npos) << inf.err;
    EXPECT_NE(inf.out.find("\"exact\": 50.0,"), std::string::npos) << inf.out;
    write_file_atomic(odds, R"({"b": NaN, "a": 0.0})");
    const CmdRun nan = run(tmp, "squad-eval " + dataset + " " + preds + " --na-prob-file=" + odds);
    EXPECT_EQ(nan.code, 1);
    EXPECT_NE(nan.err.find(odds + ": question \"b\": expected a number, got NaN"), std::string::npos) << nan.err;
    const CmdRun plots = run(tmp, "squad-eval " + dataset + " " + preds + " --out-image-dir=" + tmp.path);
    EXPECT_EQ(plots.code, 1);
    EXPECT_NE(plots.err.find("--out-image-dir=" + tmp.path + ": evaluate-v2.0.py's precision-recall plots"),
              std::string::npos) << plots.err;
    // --out-file onto one of the inputs: refused, the input kept (the scores replaced it)
    for (const auto& [input, name] : {std::pair{dataset, "DATASET"}, {preds, "PREDICTIONS"}, {odds, "--na-prob-file"}}) {
        const std::string before = read_file(input);
        const CmdRun over = run(tmp, "squad-eval " + dataset + " " + preds + " --na-prob-file=" + odds +
                                         " --out-file=" + input);
        EXPECT_EQ(over.code, 1) << over.err;
        EXPECT_NE(over.err.find("error: --out-file=" + input + ": is the same file as the input " + name),
                  std::string::npos) << over.err;
        EXPECT_EQ(read_file(input), before);
    }
}

// run_squad.py's "Could not find answer" warning quotes the text whole, a NUL in it too (the log
// line was cut at the NUL); --features_only with one example (no training length is needed).
TEST(SquadCli, LogLinesKeepANulOfTheInput) {
    SquadTmp tmp;
    const std::string train = tmp.path + "/nul.json";
    write_file_atomic(train, R"({"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "alpha be\u0000ta gamma delta",
        "qas": [{"id": "n1", "question": "Which?", "answers": [{"text": "gamma", "answer_start": 3}]}]}]}]})");
    const CmdRun r = run(tmp, squad_flags(tmp.path + "/out") + " --do_train --train_file=" + train + " --features_only");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find(std::string("Could not find answer: 'alpha be\0ta' vs. 'gamma'", 48)), std::string::npos) << r.err;
}

TEST(SquadCli, FeatureFilesByteIdentical) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const CmdRun r = run(tmp, squad_flags(out) + " --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json") +
                               " --do_predict --predict_file=" + golden("squad_pipeline/dataset-v1.1.json") +
                               " --features_only");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(out + "/train.tf_record"), read_file(golden("squad_pipeline/train_main_shuffled_384.tf_record")));
    EXPECT_EQ(read_file(out + "/eval.tf_record"), read_file(golden("squad_pipeline/features_384_eval.tf_record")));
    size_t warnings = 0;
    for (size_t p = 0; (p = r.err.find("Could not find answer: '", p)) != std::string::npos; ++p) ++warnings;
    EXPECT_EQ(warnings, 3u) << r.err;
    EXPECT_NE(r.err.find("Num split examples = 93"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Num split examples = 97"), std::string::npos) << r.err;
}

TEST(SquadCli, RawResultsDecodeAndScoreBothRuns) {
    for (auto [msl, stride] : {std::pair{384, 128}, std::pair{128, 32}}) {
        SquadTmp tmp;
        const std::string out = tmp.path + "/out";
        const std::string dir = golden("squad_pipeline/predictions_" + std::to_string(msl) + "/");
        const CmdRun r = run(tmp, squad_flags(out, msl, stride) + " --do_predict --predict_file=" +
                                   golden("squad_pipeline/dataset-v1.1.json") + " --raw_results=" + dir + "logits.jsonl");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(read_file(out + "/predictions.json"), read_file(dir + "predictions.json")) << msl;
        EXPECT_EQ(read_file(out + "/nbest_predictions.json"), read_file(dir + "nbest_predictions.json")) << msl;
        EXPECT_EQ(read_file(out + "/eval_results.json"), read_file(dir + "evaluate_stdout.txt")) << msl;
        EXPECT_EQ(r.out, read_file(dir + "evaluate_stdout.txt")) << msl;
        EXPECT_FALSE(fs::exists(out + "/null_odds.json"));
    }
}

// A prediction that scores nothing (a predict file without answers) or is SQuAD 1.1 leaves no
// score or null odds of a previous run in --output_dir beside its predictions (NVIDIA's
// --json-summary read the old eval_results.json as this run's metric).
TEST(SquadCli, APredictionLeavesNoPreviousRunsScore) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const std::string dir = golden("squad_pipeline/predictions_384/");
    const std::string raw = " --raw_results=" + dir + "logits.jsonl";
    ASSERT_EQ(run(tmp, squad_flags(out) + " --do_predict --predict_file=" + golden("squad_pipeline/dataset-v1.1.json") + raw).code, 0);
    ASSERT_TRUE(fs::exists(out + "/eval_results.json"));
    write_file_atomic(out + "/null_odds.json", "{\"a 2.0 run's\": 1.0}\n");
    // the same questions, no answers: the same features and predictions, nothing to score
    auto doc = nlohmann::json::parse(read_file(golden("squad_pipeline/dataset-v1.1.json")));
    for (auto& article : doc["data"])
        for (auto& paragraph : article["paragraphs"])
            for (auto& qa : paragraph["qas"]) qa["answers"] = nlohmann::json::array();
    const std::string unanswered = tmp.path + "/unanswered.json";
    write_file_atomic(unanswered, doc.dump());
    const CmdRun r = run(tmp, squad_flags(out) + " --do_predict --predict_file=" + unanswered + raw);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(out + "/predictions.json"), read_file(dir + "predictions.json"));
    EXPECT_FALSE(fs::exists(out + "/eval_results.json"));
    EXPECT_FALSE(fs::exists(out + "/null_odds.json"));
    EXPECT_NE(r.err.find("removed a previous run's " + out + "/eval_results.json (this run scores nothing)"),
              std::string::npos) << r.err;
    EXPECT_NE(r.err.find("removed a previous run's " + out + "/null_odds.json (this run is SQuAD 1.1)"),
              std::string::npos) << r.err;
}

// A prediction replaces the previous one's files as a set, removed before its first (eval.tf_record)
// is written: a run stopped on the way (here at nbest_predictions.json, by a file-size limit below
// its 350 KB) leaves none of the last run's files beside its own (eval_results.json scored other
// predictions). A killed run's temporaries of these outputs go at the next start.
TEST(SquadCli, APredictionStoppedOnTheWayLeavesNoneOfThePreviousOnes) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const std::string dir = golden("squad_pipeline/predictions_384/");
    const std::string line = squad_flags(out) + " --do_predict --predict_file=" +
                             golden("squad_pipeline/dataset-v1.1.json") + " --raw_results=" + dir + "logits.jsonl";
    ASSERT_EQ(run(tmp, line).code, 0);
    ASSERT_TRUE(fs::exists(out + "/eval_results.json"));
    const auto r =
        testing::run_shell("bash -c \"trap '' XFSZ; ulimit -f 200; exec " + bertbench_path() + " " + line + "\"");
    ASSERT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(out + "/nbest_predictions.json: write failed"), std::string::npos) << r.out;
    EXPECT_EQ(read_file(out + "/predictions.json"), read_file(dir + "predictions.json"));
    EXPECT_FALSE(fs::exists(out + "/nbest_predictions.json"));
    EXPECT_FALSE(fs::exists(out + "/eval_results.json"));
    EXPECT_NE(r.out.find("removed a previous run's " + out + "/predictions.json, " + out +
                         "/nbest_predictions.json, " + out + "/eval_results.json (replaced by this run's)"),
              std::string::npos) << r.out;
    write_file_atomic(out + "/nbest_predictions.json.tmp.999999999", "a killed run's");
    write_file_atomic(out + "/notes.json.tmp.999999999", "not an output of this command");
    ASSERT_EQ(run(tmp, line).code, 0);
    EXPECT_FALSE(fs::exists(out + "/nbest_predictions.json.tmp.999999999"));
    EXPECT_TRUE(fs::exists(out + "/notes.json.tmp.999999999"));
    EXPECT_TRUE(fs::exists(out + "/eval_results.json"));
}

// run_squad.py never reads the dataset's "version"; only evaluate-v1.1.py does. A predict file
// without it (many exported SQuAD-format files) gets its predictions, unscored, and a warning.
TEST(SquadCli, APredictFileWithoutVersionIsPredictedNotScored) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const std::string dir = golden("squad_pipeline/predictions_384/");
    auto doc = nlohmann::json::parse(read_file(golden("squad_pipeline/dataset-v1.1.json")));
    doc.erase("version");
    const std::string file = tmp.path + "/noversion.json";
    write_file_atomic(file, doc.dump());
    const CmdRun r = run(tmp, squad_flags(out) + " --do_predict --predict_file=" + file +
                                  " --raw_results=" + dir + "logits.jsonl");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(out + "/predictions.json"), read_file(dir + "predictions.json"));
    EXPECT_EQ(read_file(out + "/nbest_predictions.json"), read_file(dir + "nbest_predictions.json"));
    EXPECT_FALSE(fs::exists(out + "/eval_results.json"));
    EXPECT_NE(r.err.find(file + ": no \"version\" key: the predictions are written"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");  // no metric printed
}

// SQuAD 2.0: a predict file whose questions all have no answer is labelled (is_impossible with
// an empty answers array) and scored; a question with no null odds (here: no word piece in its
// context, so no feature) is named in a warning, as evaluate-v2.0.py --na-prob-file needs it.
TEST(SquadCli, Version2UnanswerableOnlyIsScoredAndMissingNullOddsNamed) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out", dev = tmp.path + "/dev.json", raw = tmp.path + "/raw.jsonl";
    write_file_atomic(dev, R"({"version":"v2.0","data":[{"title":"t","paragraphs":[{"context":"\u200b","qas":[)"
                           R"({"id":"q1","question":"Anything?","answers":[],"is_impossible":true}]}]}]})");
    write_file_atomic(raw, "");
    const CmdRun r = run(tmp, squad_flags(out) + " --do_predict --version_2_with_negative --predict_file=" + dev +
                                  " --raw_results=" + raw);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto scored = nlohmann::json::parse(read_file(out + "/eval_results.json"));
    EXPECT_EQ(scored["NoAns_total"], 1);
    EXPECT_EQ(scored["exact"], 100.0);
    EXPECT_EQ(read_file(out + "/null_odds.json"), "{}\n");
    EXPECT_NE(r.err.find("warning: 1 question(s) predicted \"\" have no entry in null_odds.json"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("e.g. \"q1\""), std::string::npos) << r.err;
}

TEST(SquadCli, BadInputIsOneLineErrorWithoutOutputs) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const std::string predict = " --do_predict --predict_file=" + golden("squad_pipeline/dataset-v1.1.json");
    // The error is the last thing printed, on one line (info lines may come before it).
    auto one_line = [](const CmdRun& r) {
        const size_t p = r.err.find("bertbench squad: error: ");
        return p != std::string::npos && r.err.find('\n', p) == r.err.size() - 1;
    };
    // Logits of the R=128 run do not belong to the R=384 features.
    CmdRun r = run(tmp, squad_flags(out) + predict + " --raw_results=" + golden("squad_pipeline/predictions_128/logits.jsonl"));
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("predictions_128/logits.jsonl"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("unique_id"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out + "/predictions.json"));
    EXPECT_FALSE(fs::exists(out + "/eval.tf_record"));
    // Training without a model config, prediction without a checkpoint: before any output.
    r = run(tmp, squad_flags(out) + " --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json"));
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("--bert_config_file"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    EXPECT_FALSE(fs::exists(out + "/train.tf_record"));
    // Training flags and a model that cannot take the features: before train.tf_record is written.
    const std::string train = " --model=tiny --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json");
    write_file_atomic(tmp.path + "/v100.json", R"({"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 1, "intermediate_size": 32})");
    write_file_atomic(tmp.path + "/t1.json", R"({"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 1, "intermediate_size": 32, "type_vocab_size": 1})");
    const std::pair<std::string, std::string> early[] = {
        {squad_flags(out, 1024) + train, "--max_seq_length=1024: the model was only trained up to sequence length 512"},
        // --features_only of a named model: features it can take
        {squad_flags(out, 600) + predict + " --model=tiny --features_only",
         "--max_seq_length=600: the model was only trained up to sequence length 512"},
        {squad_flags(out) + train + " --train_batch_size=100000", "make 0 training steps"},
        // a missing --predict_file, before the training that precedes its read
        {squad_flags(out) + train + " --do_predict --predict_file=" + tmp.path + "/dev-v1.1.json",
         "--predict_file=" + tmp.path + "/dev-v1.1.json: No such file or directory, expected a file (SQuAD JSON"},
        {squad_flags(out) + train + " --warmup_proportion=2", "--warmup_proportion=2: expected a fraction"},
        {squad_flags(out) + train + " --learning_rate=-1", "--learning_rate=-1: expected"},
        {squad_flags(out) + train + " --learning_rate=1e300", "--learning_rate=1e+300: expected 0 .. 3.40282e+38"},
        {squad_flags(out) + train + " --num_train_epochs=0", "--num_train_epochs=0: expected a positive"},
        // the training loop's own checks, also before train.tf_record
        {squad_flags(out) + train + " --save_checkpoints_steps=-1", "--save_checkpoints_steps: expected >= 0, got -1"},
        {squad_flags(out) + train + " --keep_checkpoint_max=-1", "--keep_checkpoint_max: expected >= 0, got -1"},
        {squad_flags(out) + train + " --loss_scale=abc", "--loss_scale: expected '', 'dynamic' or a factor"},
        {squad_flags(out) + train + " --init_checkpoint=" + tmp.path + "/nonexist",
         "nonexist: no such file or TensorFlow checkpoint prefix (expected a checkpoint: a safetensors or PyTorch"},
        {squad_flags(out) + " --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json") +
             " --bert_config_file=" + tmp.path + "/v100.json",
         "tokens, more than the model's vocab_size 100"},
        // one token type: the context's segment 1 would fail the engine's check at the first batch
        {squad_flags(out) + " --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json") +
             " --bert_config_file=" + tmp.path + "/t1.json",
         "the model has type_vocab_size 1: SQuAD features put the question in token type 0 and the context in 1"},
        // a fine-tuning run's --predict_file, read before it trains
        {squad_flags(out) + train + " --do_predict --predict_file=" + tmp.path + "/nonexist.json",
         tmp.path + "/nonexist.json"}};
    for (const auto& [flags, message] : early) {
        r = run(tmp, flags);
        EXPECT_EQ(r.code, 1) << flags;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_TRUE(one_line(r)) << r.err;
        EXPECT_FALSE(fs::exists(out)) << flags;
        // the flags' own checks come before the training file is read (minutes on SQuAD's)
        if (message.rfind("--", 0) == 0 && message.find("make 0") == std::string::npos) {
            EXPECT_EQ(r.err.find("Num orig examples"), std::string::npos) << flags << "\n" << r.err;
        }
    }
    r = run(tmp, squad_flags(out) + predict);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("--do_predict: expected --init_checkpoint"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    // a pretraining checkpoint (no span head) to predict with: named, before any output
    const std::string tiny_tf = golden("tf_checkpoint/keras_bert_tiny/");
    r = run(tmp, "squad --vocab_file=" + tiny_tf + "vocab.txt --output_dir=" + out + " --max_seq_length=16 --doc_stride=4 "
                 "--max_query_length=4 --init_checkpoint=" + tiny_tf + "bert_model.ckpt --bert_config_file=" + tiny_tf +
                 "bert_config.json" + predict);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("expected a fine-tuned SQuAD checkpoint with the span head, got none "
                         "(cls/squad/output_weights is absent"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    EXPECT_FALSE(fs::exists(out));
    r = run(tmp, squad_flags(out, 67, 32) + predict + " --features_only");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("--max_query_length=64 + 3"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    write_file_atomic(tmp.path + "/v2.json",
                      R"({"version":"v2.0","data":[{"paragraphs":[{"context":"x y","qas":[{"id":"z1","question":"q?","answers":[],"is_impossible":true}]}]}]})");
    r = run(tmp, squad_flags(out) + " --do_predict --features_only --predict_file=" + tmp.path + "/v2.json");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("\"z1\""), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--version_2_with_negative"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    r = run(tmp, squad_flags(out) + " --do_predict --features_only --version_2_with_negative --predict_file=" + tmp.path + "/v2.json");
    EXPECT_EQ(r.code, 0) << r.err;
    write_file_atomic(tmp.path + "/bad.json", "{\"data\": [");
    r = run(tmp, squad_flags(out) + " --do_predict --features_only --predict_file=" + tmp.path + "/bad.json");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    r = run(tmp, squad_flags(out) + train + " --do_predict --predict_file=" + tmp.path + "/bad.json");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
    EXPECT_TRUE(one_line(r)) << r.err;
    EXPECT_EQ(r.err.find("***** Running training *****"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out + "/train.tf_record"));
}

// A predict file without questions: nothing is timed, and predict_speed.json says so with null
// figures (it gave p50/p90/p99 0.0 ms and 0 sequences/s, as if measured).
TEST(SquadCli, PredictingNoQuestionsTimesNothing) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out", zero = tmp.path + "/zero.json";
    write_file_atomic(zero, R"({"version":"1.1","data":[{"title":"t","paragraphs":[{"context":"x y","qas":[]}]}]})");
    const CmdRun r = run(tmp, squad_flags(out, 64, 32) + " --max_query_length=16 --model=tiny --do_train --train_file=" +
                                  golden("squad_pipeline/train-v1.1.json") +
                                  " --num_train_epochs=0.1 --train_batch_size=4 --do_predict --predict_file=" + zero +
                                  " --threads=1");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("prediction: no features, nothing timed"), std::string::npos) << r.err;
    const nlohmann::json speed = nlohmann::json::parse(read_file(out + "/predict_speed.json"));
    EXPECT_EQ(speed["sequences"], 0);
    for (const char* k : {"sequences_per_second", "batch_latency_ms_p50", "batch_latency_ms_p90", "batch_latency_ms_p99"})
        EXPECT_TRUE(speed[k].is_null()) << k << ": " << speed[k];
}

// --transformers_qa (run_qa.py's evaluation): what it cannot run is one line before any output.
TEST(SquadCli, TransformersQaBadLinesAreOneLineErrors) {
    SquadTmp tmp;
    const std::string out = tmp.path + "/out";
    const std::string qa = " --do_predict --transformers_qa --features_only --predict_file=";
    const std::string hostile = golden("squad_pipeline/dataset-v1.1.json"), plain = golden("squad/dataset-v1.1.json");
    const std::pair<std::string, std::string> cases[] = {
        {squad_flags(out) + qa + plain + " --do_train --train_file=" + plain,
         "--transformers_qa: not with --do_train"},
        {squad_flags(out) + " --do_predict --features_only --predict_file=" + plain + " --max_eval_samples=5",
         "--max_eval_samples=5: expected >= 1 with --transformers_qa"},
        {squad_flags(out) + qa + plain + " --max_eval_samples=46",
         "--max_eval_samples=46: " + plain + " has 45 questions"},
        // a question of 78 word pieces leaves no room in 64 tokens; a stride of 310 is not below
        // the room a long question leaves a long context in 384
        {squad_flags(out, 64, 16) + qa + hostile,
         "question bf09: 78 tokens of question, 673 of context, --max_seq_length 64, --doc_stride 16: "
         "Truncation error: Sequence to truncate too short to respect the provided max_length"},
        {squad_flags(out, 384, 310) + qa + hostile, "assertion failed: stride < max_len"}};
    for (const auto& [flags, message] : cases) {
        const CmdRun r = run(tmp, flags);
        EXPECT_EQ(r.code, 1) << flags;
        const size_t p = r.err.find("bertbench squad: error: ");
        EXPECT_TRUE(p != std::string::npos && r.err.find('\n', p) == r.err.size() - 1) << r.err;
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out)) << flags;
    }
    // the same file at 384/128 makes its features: eval.tf_record, no predictions
    const CmdRun r = run(tmp, squad_flags(out) + qa + hostile);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("Num examples = 72"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(out + "/eval.tf_record"));
    EXPECT_FALSE(fs::exists(out + "/predictions.json"));
}

}  // namespace
}  // namespace bertbench::testing
