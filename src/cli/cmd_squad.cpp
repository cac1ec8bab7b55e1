// `bertbench squad`: google-research/bert run_squad.py's command line. This build makes the
// features (train.tf_record / eval.tf_record in --output_dir, byte-identical to the reference's,
// written atomically before any model work), and decodes predictions from raw logits
// (--raw_results, the format of raw_results.jsonl) into predictions.json, nbest_predictions.json
// (+ null_odds.json for SQuAD 2.0) and, when the predict file has answers, the official metric
// (eval_results.json). Fine-tuning and prediction with the model are not in this build yet: they
// stop with a one-line error before anything is written.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/py_json.hpp"
#include "core/pyrandom.hpp"
#include "data/squad.hpp"
#include "data/vocab.hpp"
#include "io/tfrecord.hpp"
#include "model/config.hpp"
#include "train/squad_metric.hpp"
#include "train/squad_predict.hpp"

namespace bertbench::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
    std::string vocab_file, bert_config_file, init_checkpoint, train_file, predict_file, output_dir;
    std::string raw_results;
    bool do_lower_case = true, do_train = false, do_predict = false, verbose_logging = false;
    bool version_2_with_negative = false, features_only = false;
    int max_seq_length = 384, doc_stride = 128, max_query_length = 64;
    int train_batch_size = 32, predict_batch_size = 8, save_checkpoints_steps = 1000;
    int n_best_size = 20, max_answer_length = 30;
    int64_t seed = 12345;
    double learning_rate = 5e-5, num_train_epochs = 3.0, warmup_proportion = 0.1;
    double null_score_diff_threshold = 0.0;
};

std::vector<data::SquadExample> read_examples(const std::string& path, bool training, const Options& o) {
    std::vector<std::string> warnings;
    auto examples = data::read_squad_examples(data::parse_squad_json(read_file(path), path), path,
                                              {training, o.version_2_with_negative}, &warnings);
    for (const auto& w : warnings) log::warn("{}", w);
    return examples;
}

// Writes FeatureWriter's records of `features` to `path` (atomically: a temporary until close()).
void write_features(const std::string& path, const std::vector<data::SquadFeature>& features, bool training) {
    io::TfRecordWriter writer(path);
    std::string buf;
    for (const auto& f : features) {
        buf.clear();
        io::encode_example(data::squad_feature_example(f, training), buf);
        writer.write(buf);
    }
    writer.close();
}

bool has_answers(const nlohmann::json& doc) {
    for (const auto& a : doc["data"])
        for (const auto& p : a["paragraphs"])
            for (const auto& qa : p["qas"])
                if (qa.contains("answers") && qa["answers"].is_array() && !qa["answers"].empty()) return true;
    return false;
}

}  // namespace

int cmd_squad(int argc, char** argv) {
    Options o;
    Flags flags("squad",
                "SQuAD v1.1/v2.0 with run_squad.py's flags. This build writes the reference's feature "
                "files (train.tf_record, eval.tf_record; byte-identical) and decodes predictions from raw "
                "logits (--raw_results) into predictions.json / nbest_predictions.json (+ null_odds.json), "
                "scored with the official metric into eval_results.json when the predict file has answers. "
                "Fine-tuning (--do_train) and prediction with a model are not yet supported.");
    flags.add("vocab_file", &o.vocab_file, "WordPiece vocabulary (vocab.txt); required");
    flags.add("bert_config_file", &o.bert_config_file,
              "bert_config.json; when given, --max_seq_length is checked against max_position_embeddings");
    flags.add("init_checkpoint", &o.init_checkpoint, "checkpoint to fine-tune or predict with (not used yet)");
    flags.add("do_lower_case", &o.do_lower_case, "lower-case and strip accents (uncased models)");
    flags.add("do_train", &o.do_train, "fine-tune on --train_file (writes train.tf_record first)");
    flags.add("train_file", &o.train_file, "SQuAD JSON for training, e.g. train-v1.1.json");
    flags.add("do_predict", &o.do_predict, "predict on --predict_file (writes eval.tf_record first)");
    flags.add("predict_file", &o.predict_file, "SQuAD JSON for predictions, e.g. dev-v1.1.json");
    flags.add("output_dir", &o.output_dir, "directory for tf_records, predictions and results; required");
    flags.add("max_seq_length", &o.max_seq_length, "tokens per window (question + document + 3)");
    flags.add("doc_stride", &o.doc_stride, "tokens between the starts of consecutive document windows");
    flags.add("max_query_length", &o.max_query_length, "question WordPieces kept (the rest is cut)");
    flags.add("train_batch_size", &o.train_batch_size, "sequences per training step (training: not yet)");
    flags.add("predict_batch_size", &o.predict_batch_size, "sequences per prediction batch (model: not yet)");
    flags.add("learning_rate", &o.learning_rate, "peak Adam learning rate (training: not yet)");
    flags.add("num_train_epochs", &o.num_train_epochs, "epochs over the training features (training: not yet)");
    flags.add("warmup_proportion", &o.warmup_proportion, "fraction of steps with linear warm-up (training: not yet)");
    flags.add("save_checkpoints_steps", &o.save_checkpoints_steps, "steps between checkpoints (training: not yet)");
    flags.add("n_best_size", &o.n_best_size, "candidates per question in nbest_predictions.json");
    flags.add("max_answer_length", &o.max_answer_length, "longest answer in WordPieces");
    flags.add("verbose_logging", &o.verbose_logging, "log get_final_text's fallbacks while decoding");
    flags.add("seed", &o.seed, "random seed for the span head and dropout (training: not yet)");
    flags.add("version_2_with_negative", &o.version_2_with_negative,
              "SQuAD 2.0: questions may have no answer (is_impossible); writes null_odds.json");
    flags.add("null_score_diff_threshold", &o.null_score_diff_threshold,
              "SQuAD 2.0: predict no answer when null score - best non-null score > this");
    flags.add("raw_results", &o.raw_results,
              "decode predictions from this raw-logits file (one JSON line per eval feature: unique_id, "
              "start_logits, end_logits) instead of running a model (not in run_squad.py)");
    flags.add("features_only", &o.features_only,
              "write train.tf_record / eval.tf_record and stop (not in run_squad.py)");
    if (!flags.parse(argc, argv)) return 0;

    // validate_flags_or_throw, then this build's limits, all before anything is written.
    if (o.vocab_file.empty()) fail("--vocab_file: required (the WordPiece vocabulary, vocab.txt)");
    if (o.output_dir.empty()) fail("--output_dir: required");
    if (!o.do_train && !o.do_predict) fail("at least one of --do_train or --do_predict must be given");
    if (o.do_train && o.train_file.empty()) fail("--do_train needs --train_file (e.g. train-v1.1.json)");
    if (o.do_predict && o.predict_file.empty()) fail("--do_predict needs --predict_file (e.g. dev-v1.1.json)");
    if (!o.bert_config_file.empty()) {
        const auto cfg = model::BertConfig::from_json_file(o.bert_config_file);
        if (o.max_seq_length > cfg.max_position_embeddings)
            fail("--max_seq_length={}: the model (--bert_config_file {}) was only trained up to sequence "
                 "length {}", o.max_seq_length, o.bert_config_file, cfg.max_position_embeddings);
    }
    if (o.max_seq_length <= o.max_query_length + 3)
        fail("--max_seq_length={} must be greater than --max_query_length={} + 3", o.max_seq_length,
             o.max_query_length);
    if (o.doc_stride < 1) fail("--doc_stride={}: expected a positive number of tokens", o.doc_stride);
    if (o.n_best_size < 1 || o.max_answer_length < 1)
        fail("--n_best_size={} / --max_answer_length={}: expected positive values", o.n_best_size,
             o.max_answer_length);
    if (o.do_train && !o.features_only)
        fail("--do_train: fine-tuning is not yet supported in this build (hint: --features_only writes "
             "train.tf_record and stops)");
    if (o.do_predict && !o.features_only && o.raw_results.empty())
        fail("--do_predict: prediction with a model is not yet supported in this build (hint: "
             "--raw_results=FILE decodes logits from a file; --features_only writes eval.tf_record)");
    if (!o.raw_results.empty() && !o.do_predict) fail("--raw_results needs --do_predict and --predict_file");

    log::info("config: {}", flags.to_json().dump());
    const data::Vocab vocab = data::Vocab::load(o.vocab_file);
    data::FullTokenizer tokenizer(vocab, o.do_lower_case);
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec) fail("--output_dir {}: cannot create it: {}", o.output_dir, ec.message());

    if (o.do_train) {
        auto train_examples = read_examples(o.train_file, true, o);
        // Pre-shuffled as run_squad.py main() does, so train.tf_record is byte-identical.
        PyRandom rng(12345);
        rng.shuffle(train_examples);
        std::vector<data::SquadFeature> features;
        data::convert_examples_to_features(train_examples, tokenizer,
                                           {o.max_seq_length, o.doc_stride, o.max_query_length, true},
                                           [&](data::SquadFeature&& f) { features.push_back(std::move(f)); });
        const std::string path = (fs::path(o.output_dir) / "train.tf_record").string();
        write_features(path, features, true);
        log::info("***** Running training *****");
        log::info("  Num orig examples = {}", train_examples.size());
        log::info("  Num split examples = {}", features.size());
        log::info("wrote {}", path);
    }

    if (o.do_predict) {
        const nlohmann::json predict_doc = data::parse_squad_json(read_file(o.predict_file), o.predict_file);
        std::vector<std::string> warnings;
        const auto eval_examples = data::read_squad_examples(predict_doc, o.predict_file,
                                                             {false, o.version_2_with_negative}, &warnings);
        std::vector<data::SquadFeature> features;
        data::convert_examples_to_features(eval_examples, tokenizer,
                                           {o.max_seq_length, o.doc_stride, o.max_query_length, false},
                                           [&](data::SquadFeature&& f) { features.push_back(std::move(f)); });
        // Decode before writing anything, so mismatched raw results leave no outputs behind.
        train::SquadPredictions preds;
        std::string verbose;
        if (!o.raw_results.empty()) {
            const auto results = train::read_squad_raw_results(o.raw_results);
            train::SquadPredictOptions popt;
            popt.n_best_size = o.n_best_size;
            popt.max_answer_length = o.max_answer_length;
            popt.do_lower_case = o.do_lower_case;
            popt.version_2_with_negative = o.version_2_with_negative;
            popt.null_score_diff_threshold = o.null_score_diff_threshold;
            preds = train::squad_write_predictions(eval_examples, features, results, popt,
                                                   "--raw_results " + o.raw_results,
                                                   o.verbose_logging ? &verbose : nullptr);
        }
        const std::string eval_path = (fs::path(o.output_dir) / "eval.tf_record").string();
        write_features(eval_path, features, false);
        log::info("***** Running predictions *****");
        log::info("  Num orig examples = {}", eval_examples.size());
        log::info("  Num split examples = {}", features.size());
        log::info("wrote {}", eval_path);
        if (!o.raw_results.empty()) {
            for (size_t b = 0, e; b < verbose.size(); b = e + 1) {
                e = verbose.find('\n', b);
                log::info("{}", verbose.substr(b, e - b));
            }
            const fs::path dir(o.output_dir);
            write_file_atomic((dir / "predictions.json").string(), preds.predictions_json);
            write_file_atomic((dir / "nbest_predictions.json").string(), preds.nbest_json);
            if (o.version_2_with_negative)
                write_file_atomic((dir / "null_odds.json").string(), preds.null_odds_json);
            log::info("wrote predictions.json and nbest_predictions.json{} in {}",
                      o.version_2_with_negative ? " and null_odds.json" : "", o.output_dir);
            if (has_answers(predict_doc)) {
                const auto metric = train::squad_evaluate(
                    predict_doc, nlohmann::json::parse(preds.predictions_json), o.predict_file,
                    (dir / "predictions.json").string());
                std::fputs(metric.stderr_text.c_str(), stderr);
                std::fputs(metric.stdout_text.c_str(), stdout);
                write_file_atomic((dir / "eval_results.json").string(), metric.stdout_text);
            }
        }
    }
    return 0;
}

}  // namespace bertbench::cli
