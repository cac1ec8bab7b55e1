// `bertbench squad`: google-research/bert run_squad.py's command line. Writes the features first
// (train.tf_record / eval.tf_record in --output_dir, byte-identical to the reference's, atomically),
// then fine-tunes (--do_train: the span model on the one training loop, checkpoints, logs, resume)
// and predicts (--do_predict: raw_results.jsonl, predictions.json, nbest_predictions.json
// (+ null_odds.json for SQuAD 2.0), and the official metric in eval_results.json when the predict
// file has answers). --raw_results decodes another run's logits without a model.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <omp.h>

#include "cli/commands.hpp"
#include "cli/device_flag.hpp"
#include "cli/dllogger.hpp"
#include "cli/nvidia_pt_flags.hpp"
#include "cli/precision_flags.hpp"
#include "cli/reference_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/py_json.hpp"
#include "core/pyrandom.hpp"
#include "core/sysinfo.hpp"
#include "core/timing.hpp"
#include "data/fast_tokenizer.hpp"
#include "data/squad.hpp"
#include "data/squad_qa.hpp"
#include "data/vocab.hpp"
#include "dist/comm.hpp"
#include "io/tfrecord.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "train/loop.hpp"
#include "train/squad_metric.hpp"
#include "train/squad_predict.hpp"
#include "train/squad_qa_predict.hpp"
#include "train/squad_train.hpp"

namespace bertbench::cli {
namespace {

namespace fs = std::filesystem;

// The fine-tuning's own options (train::SquadTrainOptions: the model, output_dir, batch, schedule,
// checkpoints, seed, threads ...) bound to their flags directly, and the rest of the command's.
struct Options : train::SquadTrainOptions {
    std::string vocab_file, train_file, predict_file, raw_results;
    bool do_lower_case = true, do_train = false, do_predict = false, verbose_logging = false;
    bool version_2_with_negative = false, features_only = false, transformers_squad = false;
    bool transformers_qa = false;
    int max_eval_samples = -1;
    int doc_stride = 128, max_query_length = 64, predict_batch_size = 8;
    int n_best_size = 20, max_answer_length = 30;
    double null_score_diff_threshold = 0.0;
    bool allow_missing_weights = false;
    PrecisionFlags precision_flags;
};

std::vector<data::SquadExample> read_examples(const std::string& path, bool training, const Options& o) {
    std::vector<std::string> warnings;
    auto examples = data::read_squad_examples(data::parse_squad_json(read_file(path), path), path,
                                              {training, o.version_2_with_negative}, &warnings);
    // facts of the file, the same on every rank: said once, by rank 0
    if (dist::world().rank() == 0)
        for (const auto& w : warnings) log::warn("{}", w);
    return examples;
}

// run_squad.py's model_weights_num: its BertForQuestionAnswering's parameters (the pooler
// included), the vocabulary padded to a multiple of 8 as it pads it
int64_t nvidia_squad_weights(model::BertConfig config) {
    config.vocab_size += (8 - config.vocab_size % 8) % 8;
    return static_cast<int64_t>(model::ParamTable(config, model::Heads::squad).num_parameters());
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

// The files this command line writes in --output_dir besides checkpoints. `pt_model`: NVIDIA's
// line also writes pytorch_model.bin.
std::vector<std::string> output_names(const Options& o, bool train_model, bool predict_model, bool pt_model) {
    // the training loop's own files
    std::vector<std::string> names = train_model ? train::run_output_names() : std::vector<std::string>{};
    if (o.do_train) names.push_back("train.tf_record");
    if (train_model && pt_model) names.push_back("pytorch_model.bin");  // NVIDIA's line
    if (o.do_predict) {
        // null_odds.json also on SQuAD 1.1: a previous run's is removed (remove_previous_prediction)
        names.insert(names.end(), {"eval.tf_record", "predictions.json", "nbest_predictions.json",
                                   "eval_results.json", "null_odds.json"});
        if (predict_model) names.insert(names.end(), {"raw_results.jsonl", "predict_speed.json"});
    }
    return names;
}

// No input may be one of the files this command line writes in --output_dir (compared by inode,
// as prepare, pick-eval and convert check theirs): e.g. --predict_file=out/predictions.json or
// --train_file=out/train.tf_record would be overwritten. Checked before any work (the training
// loop checks its checkpoints itself).
void check_outputs_are_not_inputs(const Options& o, const std::vector<std::string>& names) {
    const std::pair<const char*, const std::string*> inputs[] = {
        {"--vocab_file", &o.vocab_file},         {"--bert_config_file", &o.bert_config_file},
        {"--init_checkpoint", &o.init_checkpoint}, {"--train_file", &o.train_file},
        {"--predict_file", &o.predict_file},     {"--raw_results", &o.raw_results}};
    for (const std::string& name : names)
        for (const auto& [flag, path] : inputs)
            if (!path->empty())
                check_output_not_input((fs::path(o.output_dir) / name).string(), "--output_dir",
                                       model::checkpoint_files(*path), flag);
}

// The model must take --max_seq_length positions, every id of --vocab_file (a larger vocabulary
// would index past the embedding table at the first batch) and SQuAD's two segments (the question
// in 0, the context in 1: run_squad.py's segment_ids).
void check_model_fits(const Options& o, const model::BertConfig& cfg, const data::Vocab& vocab) {
    if (cfg.type_vocab_size < 2)
        fail("the model has type_vocab_size {}: SQuAD features put the question in token type 0 and the "
             "context in 1 (expected a model of type_vocab_size >= 2)", cfg.type_vocab_size);
    if (o.max_seq_length > cfg.max_position_embeddings)
        fail("--max_seq_length={}: the model was only trained up to sequence length {} "
             "(max_position_embeddings)", o.max_seq_length, cfg.max_position_embeddings);
    if (vocab.size() > cfg.vocab_size)
        fail("--vocab_file={}: {} tokens, more than the model's vocab_size {} (expected the vocabulary the "
             "model was trained with)", o.vocab_file, vocab.size(), cfg.vocab_size);
}

// Removes those of `names` a previous run left in --output_dir, named in one line with `why`.
void remove_previous(const Options& o, const std::vector<std::string>& names, const char* why) {
    std::string removed;
    for (const std::string& name : names) {
        std::error_code ec;
        const fs::path file = fs::path(o.output_dir) / name;
        if (fs::remove(file, ec)) removed += (removed.empty() ? "" : ", ") + file.string();
        if (ec) fail("--output_dir={}: cannot remove a previous run's {}: {}", o.output_dir, name, ec.message());
    }
    if (!removed.empty()) log::info("removed a previous run's {} ({})", removed, why);
}

// A prediction's files replace the previous one's as a set, removed before this one's first
// (eval.tf_record): a run stopped on the way leaves none of another run's beside its own. Those
// this run will not write again are named with why.
void remove_previous_prediction(const Options& o, bool scored) {
    if (!scored) remove_previous(o, {"eval_results.json"}, "this run scores nothing");
    if (!o.version_2_with_negative) remove_previous(o, {"null_odds.json"}, "this run is SQuAD 1.1");
    std::vector<std::string> replaced = {"predictions.json", "nbest_predictions.json", "null_odds.json",
                                         "eval_results.json"};
    if (o.raw_results.empty())  // the model's run writes them again
        replaced.insert(replaced.end(), {"raw_results.jsonl", "predict_speed.json"});
    else if (!same_file(o.raw_results, (fs::path(o.output_dir) / "raw_results.jsonl").string()))
        remove_previous(o, {"raw_results.jsonl", "predict_speed.json"}, "this run decodes --raw_results");
    remove_previous(o, replaced, "replaced by this run's");
}

// The fine-tuned model (loaded from --output_dir's last checkpoint when not yet) over `features`
// in batches of --predict_batch_size: raw_results.jsonl and predict_speed.json (with every batch's
// time) in --output_dir, the speed logged.
std::vector<train::SquadRawResult> infer_features(const Options& o,
                                                  std::optional<train::SquadModel>& model,
                                                  const std::vector<data::SquadFeature>& features,
                                                  ops::Precision precision, backend::Backend* be,
                                                  int cpus) {
    const fs::path dir(o.output_dir);
    if (!model) {
        const std::string ckpt = train::latest_checkpoint(o.output_dir);
        log::info("predicting with {}, the fine-tuning run's last checkpoint", ckpt);
        model = train::load_squad_model(ckpt, "--output_dir checkpoint", o.bert_config_file,
                                        o.model, o.max_seq_length, o.allow_missing_weights);
    }
    train::SquadInference inf =
        train::squad_infer(*model, features, o.predict_batch_size, precision, be);
    write_file_atomic((dir / "raw_results.jsonl").string(),
                      train::squad_raw_results_jsonl(inf.results));
    std::vector<double> sorted = inf.batch_seconds;
    std::sort(sorted.begin(), sorted.end());
    double total = 0;
    for (const double t : sorted) total += t;
    // no batch (a predict file without questions): no figure, not a measured-looking 0
    const auto ms = [&](double p) { return sorted.empty() ? nlohmann::json(nullptr) : nlohmann::json(1e3 * percentile(sorted, p)); };
    const nlohmann::json speed = {
        {"sequences", inf.sequences},
        {"batch_size", o.predict_batch_size},
        {"max_seq_length", o.max_seq_length},
        {"dtype", ops::precision_name(precision)},
        {"bf16_emulated", ops::bf16_emulated(precision)},
        {"threads", o.threads > 0 ? o.threads : cpus},
        {"sequences_per_second", total > 0 ? nlohmann::json(inf.sequences / total) : nlohmann::json(nullptr)},
        {"batch_latency_ms_p50", ms(0.50)},
        {"batch_latency_ms_p90", ms(0.90)},
        {"batch_latency_ms_p99", ms(0.99)},
        {"batch_seconds", inf.batch_seconds},
        {"definition",
         "model forward (encoder + span head) per batch; feature creation, "
         "decoding and file writing excluded; the last batch may be partial; "
         "batch_seconds: each batch's, in order"}};
    write_file_atomic((dir / "predict_speed.json").string(), speed.dump(2) + "\n");
    if (sorted.empty()) {
        log::info("prediction: no features, nothing timed (predict_speed.json: null figures)");
        return std::move(inf.results);
    }
    log::info(
        "prediction: {} features in {:.2f} s of model time: {:.1f} sequences/s; batch of {} "
        "latency p50 {:.1f} ms, p90 {:.1f} ms, p99 {:.1f} ms (predict_speed.json; features "
        "and decoding excluded)",
        inf.sequences, total, speed["sequences_per_second"].get<double>(), o.predict_batch_size,
        speed["batch_latency_ms_p50"].get<double>(), speed["batch_latency_ms_p90"].get<double>(),
        speed["batch_latency_ms_p99"].get<double>());
    return std::move(inf.results);
}

// The prediction files in --output_dir (the previous prediction's removed before its features).
void write_predictions(const Options& o, const std::string& predictions, const std::string& nbest,
                       const std::string& null_odds) {
    const fs::path dir(o.output_dir);
    write_file_atomic((dir / "predictions.json").string(), predictions);
    write_file_atomic((dir / "nbest_predictions.json").string(), nbest);
    if (o.version_2_with_negative) write_file_atomic((dir / "null_odds.json").string(), null_odds);
    log::info("wrote predictions.json and nbest_predictions.json{} in {}",
              o.version_2_with_negative ? " and null_odds.json" : "", o.output_dir);
}

// --do_predict --transformers_qa: run_qa.py's evaluation (data/squad_qa.hpp,
// train/squad_qa_predict.hpp) with the model or --raw_results; its files and metric in
// --output_dir. Whether it scored them (eval_results.json).
bool predict_transformers_qa(const Options& o, const data::Vocab& vocab,
                             std::optional<train::SquadModel>& model, bool predict_model,
                             ops::Precision precision, backend::Backend* be, int cpus) {
    const fs::path dir(o.output_dir);
    std::vector<data::QaExample> examples = data::read_qa_examples(
        data::parse_squad_json(read_file(o.predict_file), o.predict_file), o.predict_file);
    if (o.max_eval_samples > static_cast<int>(examples.size()))
        fail("--max_eval_samples={}: {} has {} questions (run_qa.py fails selecting past them)",
             o.max_eval_samples, o.predict_file, examples.size());
    if (o.max_eval_samples > 0) examples.resize(static_cast<size_t>(o.max_eval_samples));
    data::FastBertTokenizer tokenizer(vocab, o.do_lower_case);
    std::vector<data::QaFeature> qa = data::prepare_qa_features(
        examples, tokenizer, {o.max_seq_length, o.doc_stride}, o.predict_file);
    if (o.max_eval_samples > 0 && qa.size() > static_cast<size_t>(o.max_eval_samples))
        qa.resize(static_cast<size_t>(o.max_eval_samples));
    std::vector<data::SquadFeature> features;
    for (const auto& f : qa) features.push_back(f.input);
    const auto decode = [&](const std::vector<train::SquadRawResult>& results,
                            const std::string& where) {
        return train::squad_qa_postprocess(examples, qa, results,
                                           {o.n_best_size, o.max_answer_length,
                                            o.version_2_with_negative, o.null_score_diff_threshold},
                                           where);
    };
    // Given logits are decoded before anything is written: a bad raw-results file leaves nothing.
    std::optional<train::SquadQaPredictions> preds;
    if (!o.raw_results.empty())
        preds =
            decode(train::read_squad_raw_results(o.raw_results), "--raw_results " + o.raw_results);
    bool answers = true;
    for (const auto& e : examples) answers = answers && e.answers.is_array() && !e.answers.empty();
    const bool scored = answers || o.version_2_with_negative;
    if (predict_model || preds) remove_previous_prediction(o, scored);
    const std::string eval_path = (dir / "eval.tf_record").string();
    write_features(eval_path, features, false);
    log::info("***** Running predictions (run_qa.py's) *****");
    log::info("  Num examples = {}", examples.size());
    log::info("  Num features = {}", features.size());
    log::info("  Batch size = {}", o.predict_batch_size);
    log::info("wrote {}", eval_path);
    if (!predict_model && !preds) return false;  // --features_only
    if (!preds)
        preds = decode(infer_features(o, model, features, precision, be, cpus),
                       (dir / "raw_results.jsonl").string());
    write_predictions(o, preds->predictions_json, preds->nbest_json, preds->null_odds_json);
    if (!scored) {
        log::info(
            "no metric: {} has questions without answers (datasets' squad metric fails on them)",
            o.predict_file);
        return false;
    }
    const auto metric = train::squad_qa_metric(examples, preds->predictions,
                                               o.version_2_with_negative, o.predict_file);
    const std::string text = train::py_json_dumps(metric) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    write_file_atomic((dir / "eval_results.json").string(), text);
    return true;
}

}  // namespace

int cmd_squad(int argc, char** argv) {
    Options o;
    Flags flags("squad",
                "SQuAD v1.1/v2.0 with run_squad.py's flags: writes the reference's feature files "
                "(train.tf_record, eval.tf_record; byte-identical), fine-tunes the span model "
                "(--do_train) and predicts (--do_predict) into raw_results.jsonl, predictions.json, "
                "nbest_predictions.json (+ null_odds.json), scored with the official metric into "
                "eval_results.json when the predict file has answers. docs/squad.md.");
    flags.add("vocab_file", &o.vocab_file, "WordPiece vocabulary (vocab.txt); required");
    flags.add("bert_config_file", &o.bert_config_file,
              "bert_config.json (default: the config saved in --init_checkpoint, when it has one)");
    flags.add("model", &o.model, "a preset instead of --bert_config_file: tiny, mini, small, medium, "
              "base, large (not in run_squad.py)");
    flags.add("init_checkpoint", &o.init_checkpoint,
              "weights to fine-tune (pretrained: bertbench, Hugging Face, PyTorch .pt/.bin or TF "
              "checkpoint) or, "
              "without --do_train, a fine-tuned checkpoint to predict with");
    flags.add("do_lower_case", &o.do_lower_case, "lower-case and strip accents (uncased models)");
    flags.add("do_train", &o.do_train, "fine-tune on --train_file (writes train.tf_record first)");
    flags.add("train_file", &o.train_file, "SQuAD JSON for training, e.g. train-v1.1.json");
    flags.add("do_predict", &o.do_predict, "predict on --predict_file (writes eval.tf_record first)");
    flags.add("predict_file", &o.predict_file, "SQuAD JSON for predictions, e.g. dev-v1.1.json");
    flags.add("output_dir", &o.output_dir, "directory for tf_records, checkpoints, logs, predictions; required");
    flags.add("max_seq_length", &o.max_seq_length, "tokens per window (question + document + 3)");
    flags.add("doc_stride", &o.doc_stride, "tokens between the starts of consecutive document windows");
    flags.add("max_query_length", &o.max_query_length, "question WordPieces kept (the rest is cut)");
    flags.add("train_batch_size", &o.train_batch_size, "sequences per training step");
    flags.add("predict_batch_size", &o.predict_batch_size, "sequences per prediction batch");
    flags.add("learning_rate", &o.learning_rate, "peak AdamWeightDecay learning rate");
    flags.add("num_train_epochs", &o.num_train_epochs,
              "epochs: steps = int(examples / train_batch_size * epochs), as run_squad.py counts them");
    flags.add("warmup_proportion", &o.warmup_proportion, "fraction of the steps with linear warm-up");
    flags.add("save_checkpoints_steps", &o.save_checkpoints_steps, "steps between checkpoints");
    flags.add("keep_checkpoint_max", &o.keep_checkpoint_max, "checkpoints kept (0 = all)");
    flags.add("n_best_size", &o.n_best_size, "candidates per question in nbest_predictions.json");
    flags.add("max_answer_length", &o.max_answer_length, "longest answer in WordPieces");
    flags.add("verbose_logging", &o.verbose_logging, "log get_final_text's fallbacks while decoding");
    flags.add("seed", &o.seed, "random seed: span head initialisation, dropout, data order");
    flags.add("version_2_with_negative", &o.version_2_with_negative,
              "SQuAD 2.0: questions may have no answer (is_impossible); writes null_odds.json");
    flags.add("null_score_diff_threshold", &o.null_score_diff_threshold,
              "SQuAD 2.0: predict no answer when null score - best non-null score > this (inf: "
              "always an answer, as absl's float reads it)");
    flags.allow_infinity("null_score_diff_threshold");
    flags.add("raw_results", &o.raw_results,
              "decode predictions from this raw-logits file (one JSON line per eval feature: unique_id, "
              "start_logits, end_logits) instead of running a model (not in run_squad.py)");
    flags.add("features_only", &o.features_only,
              "write train.tf_record / eval.tf_record and stop (not in run_squad.py)");
    flags.add("transformers_squad", &o.transformers_squad,
              "tokenize and decode as transformers' legacy run_squad.py (its BertTokenizer; the "
              "answer text by convert_tokens_to_string) instead of google's (not in run_squad.py)");
    flags.add(
        "transformers_qa", &o.transformers_qa,
        "predict as transformers' run_qa.py (v4.10): BertTokenizerFast's tokens and character "
        "offsets, windows overlapping by --doc_stride tokens, utils_qa's decoding and the "
        "datasets squad metric (not in run_squad.py; docs/squad.md)");
    flags.add(
        "max_eval_samples", &o.max_eval_samples,
        "with --transformers_qa: the first N questions, then the first N of their features, as "
        "run_qa.py's --max_eval_samples (-1 = all)");
    flags.add("threads", &o.threads, "compute threads (0 = every available CPU)");
    flags.add("allow_changed_flags", &o.allow_changed_flags,
              "resume with changed hyper-parameters (recorded in changed_flags.jsonl)");
    flags.add("allow_missing_weights", &o.allow_missing_weights,
              "predict even when the checkpoint lacks some of the model's tensors (they keep "
              "their initial values); without it that is an error naming the first");
    flags.add("clip_by_global_norm_after_gradient_allreduce", &o.clip_after_allreduce,
              "under mpirun: clip the averaged gradient (1 process x global batch equals N ranks) "
              "instead of each rank's own before the all-reduce (default, as run_squad.py's replicas)");
    o.precision_flags.add(flags, true);
    DeviceFlag device;
    device.add(flags);
    add_accelerator_flags(flags, false);  // run_squad.py's --use_tpu, --tpu_name, ...: no effect
    NvidiaPtFlags nvpt;                   // NVIDIA DeepLearningExamples PyTorch run_squad.py's flags
    nvpt.add(flags, NvidiaPtFlags::Script::squad);
    NgcTfSquadFlags ngc;  // NVIDIA NGC TF run_squad.py's
    ngc.add(flags);
    add_squad_hints(flags);
    TokenizationFlags tokenization;
    tokenization.add(flags);
    dist::quiet_other_ranks();  // under mpirun rank 0 alone logs, writes files and predicts
    if (!flags.parse(argc, argv)) return 0;
    tokenization.check();
    const std::unique_ptr<backend::Backend> be = device.backend();  // before any output
    const std::string init_checkpoint_given = o.init_checkpoint;
    o.init_checkpoint = model::resolve_checkpoint_name(o.init_checkpoint, "--init_checkpoint");
    const int ranks = dist::world().size();
    const std::string nvidia =
        apply_nvidia_pt_squad(flags, nvpt, o, o.do_lower_case, ranks);
    if (nvidia.empty() && !o.transformers_squad && !o.transformers_qa)  // google's (and NGC TF's) script
        check_case_matches_checkpoint(o.do_lower_case, init_checkpoint_given);
    apply_ngc_tf_squad(flags, ngc, o, ranks);
    apply_nvidia_pt_loss_scale(nvidia, o.precision_flags.loss_scale);
    nvpt.default_json_summary(flags, nvidia);
    // Under mpirun every rank makes the training features and trains its share of each batch
    // (the training loop); rank 0 alone logs, writes files and predicts.
    const bool root = dist::world().rank() == 0;

    // validate_flags_or_throw, then everything else that can be checked, before anything is written.
    if (o.vocab_file.empty()) fail("--vocab_file: required (the WordPiece vocabulary, vocab.txt)");
    if (o.output_dir.empty()) fail("--output_dir: required");
    if (!o.do_train && !o.do_predict) fail("at least one of --do_train or --do_predict must be given");
    if (o.do_train && o.train_file.empty()) fail("--do_train needs --train_file (e.g. train-v1.1.json)");
    if (o.do_predict && o.predict_file.empty()) fail("--do_predict needs --predict_file (e.g. dev-v1.1.json)");
    // the flags' own refusals (--dtype=int8 with --do_train) before the files are looked at
    const ops::Precision precision = o.precision_flags.precision(o.do_train);
    require_precision(be.get(), precision);
    check_input_file(o.vocab_file, "--vocab_file", "a file (vocab.txt, one WordPiece per line)");
    check_input_file(o.bert_config_file, "--bert_config_file", "a file (bert_config.json)");
    // the files of the steps that run (a line may name both and run one: Intel's do_predict=False)
    (o.do_train ? check_input_file : check_not_directory)(o.train_file, "--train_file",
                                                         "a file (SQuAD JSON, e.g. train-v1.1.json)");
    (o.do_predict ? check_input_file : check_not_directory)(o.predict_file, "--predict_file",
                                                           "a file (SQuAD JSON, e.g. dev-v1.1.json)");
    check_not_directory(o.raw_results, "--raw_results", "a file (raw logits, one JSON line per feature)");
    if (!o.bert_config_file.empty()) {
        const auto cfg = model::BertConfig::from_json_file(o.bert_config_file);
        if (o.max_seq_length > cfg.max_position_embeddings)
            fail("--max_seq_length={}: the model (--bert_config_file {}) was only trained up to sequence "
                 "length {}", o.max_seq_length, o.bert_config_file, cfg.max_position_embeddings);
    }
    if (o.transformers_qa) {  // no query cut: the question's length decides (data/squad_qa.hpp)
        if (o.max_seq_length < 4)
            fail("--max_seq_length={}: expected at least 4", o.max_seq_length);
        if (o.doc_stride < 0)
            fail("--doc_stride={}: expected an overlap of >= 0 tokens", o.doc_stride);
    } else {
        if (o.max_seq_length <= o.max_query_length + 3)
            fail("--max_seq_length={} must be greater than --max_query_length={} + 3",
                 o.max_seq_length, o.max_query_length);
        if (o.doc_stride < 1)
            fail("--doc_stride={}: expected a positive number of tokens", o.doc_stride);
    }
    if (o.max_query_length < 1)
        fail("--max_query_length={}: expected a positive number of question tokens", o.max_query_length);
    if (o.n_best_size < 1 || o.max_answer_length < 1)
        fail("--n_best_size={} / --max_answer_length={}: expected positive values", o.n_best_size,
             o.max_answer_length);
    if (o.train_batch_size < 1) fail("--train_batch_size={}: expected >= 1", o.train_batch_size);
    if (o.predict_batch_size < 1) fail("--predict_batch_size={}: expected >= 1", o.predict_batch_size);
    if (!o.raw_results.empty() && !o.do_predict) fail("--raw_results needs --do_predict and --predict_file");
    if (o.transformers_qa && (o.do_train || o.transformers_squad))
        fail("--transformers_qa: {}: it is run_qa.py's evaluation (bertbench fine-tunes with "
             "google's features: --do_train without it, then --do_predict --transformers_qa)",
             o.do_train ? "not with --do_train"
                        : "not with --transformers_squad (one script's rules at a time)");
    if (o.max_eval_samples != -1 && (!o.transformers_qa || o.max_eval_samples < 1))
        fail("--max_eval_samples={}: expected >= 1 with --transformers_qa (run_qa.py's flag)",
             o.max_eval_samples);
    const bool train_model = o.do_train && !o.features_only;
    const bool predict_model = o.do_predict && !o.features_only && o.raw_results.empty();
    const bool pt_model = !nvidia.empty() && !nvpt.skip_checkpoint;  // run_squad.py's model file
    const std::vector<std::string> outputs = output_names(o, train_model, predict_model, pt_model);
    check_outputs_are_not_inputs(o, outputs);
    check_run_outputs_not_directories(o.output_dir, "--output_dir", outputs);  // not at the last file
    if (!nvpt.json_summary.empty()) {
        check_dllogger_path(nvpt.json_summary, {o.vocab_file, o.bert_config_file, o.init_checkpoint,
                                                o.train_file, o.predict_file, o.raw_results});
        check_output_not_in_run(nvpt.json_summary, "--json-summary", o.output_dir, "--output_dir", outputs,
                                {train::kCheckpointPrefix});
    }
    // Predicting without --do_train: as TF's Estimator, which run_squad.py uses, the latest
    // checkpoint in --output_dir (a fine-tuning run's) wins over --init_checkpoint (the reference's
    // SQuAD 2.0 threshold line passes the pretrained BERT there and the fine-tuned --output_dir).
    // NVIDIA's run_squad.py always loads --init_checkpoint (its fine-tuned pytorch_model.bin).
    std::string predict_checkpoint;
    if (predict_model && !o.do_train) {
        if (nvidia.empty() || o.init_checkpoint.empty())
            predict_checkpoint = train::latest_checkpoint(o.output_dir);
        if (!predict_checkpoint.empty())
            log::info("predicting with {}, the latest checkpoint in --output_dir={}{} (as TF's "
                      "Estimator: a checkpoint in the model directory wins over --init_checkpoint)",
                      predict_checkpoint, o.output_dir,
                      o.init_checkpoint.empty() ? "" : ", not --init_checkpoint=" + o.init_checkpoint);
        else if (!nvidia.empty() && !o.init_checkpoint.empty())
            log::info("predicting with {} (--init_checkpoint, as NVIDIA's run_squad.py)", o.init_checkpoint);
        else if (!o.init_checkpoint.empty())
            log::info("predicting with {} (--init_checkpoint; --output_dir={} holds no checkpoint)",
                      o.init_checkpoint, o.output_dir);
        else
            fail("--do_predict: expected --init_checkpoint with a fine-tuned SQuAD checkpoint, or one "
                 "in --output_dir={} (or --do_train to fine-tune first, or --raw_results=FILE to "
                 "decode logits), got none", o.output_dir);
    }
    o.loss_scale = o.precision_flags.loss_scale;  // the run's own (RunOptions), checked with its flags
    o.initial_loss_scale = o.precision_flags.initial_loss_scale;
    o.loss_scale_window = o.precision_flags.loss_scale_window;
    const int cpus = sysinfo::cpus_available();
    if (o.threads < 0 || o.threads > cpus)
        fail("--threads={}: expected 0..{} (CPUs available to this process{})", o.threads, cpus,
             sysinfo::cpus_binding_hint());
    omp_set_num_threads(o.threads > 0 ? o.threads : cpus);
    const data::Vocab vocab = data::Vocab::load(o.vocab_file);
    std::optional<model::BertConfig> train_config;
    if (train_model) {  // the model, before the features are made (fails in seconds)
        train::check_squad_train_flags(o);
        train_config = train::resolve_config(o.bert_config_file, o.model,
                                             train::latest_checkpoint(o.output_dir), o.init_checkpoint);
        check_model_fits(o, *train_config, vocab);
    } else if (o.features_only && (!o.bert_config_file.empty() || !o.model.empty())) {
        // the features of a named model fit it, as run_squad.py checks the config before writing any
        check_model_fits(o, train::resolve_config(o.bert_config_file, o.model, "", ""), vocab);
    }
    // Predicting with a given checkpoint: load it now, so a checkpoint without the span head
    // stops the command before any work.
    std::optional<train::SquadModel> model;
    if (predict_model && !o.do_train && root)
        model = predict_checkpoint.empty()
                    ? train::load_squad_model(o.init_checkpoint, "--init_checkpoint",
                                              o.bert_config_file, o.model, o.max_seq_length,
                                              o.allow_missing_weights)
                    : train::load_squad_model(predict_checkpoint, "--output_dir checkpoint",
                                              o.bert_config_file, o.model, o.max_seq_length,
                                              o.allow_missing_weights);

    const nlohmann::json flags_json = flags.to_json();
    log::info("config: {}", flags_json.dump());
    if (model) check_model_fits(o, model->config, vocab);
    // NVIDIA's line: its own tokenization.py (never_split specials, every C* dropped, 100 characters)
    if ((o.transformers_squad || o.transformers_qa) && !nvidia.empty())
        fail("--transformers_{}: not with NVIDIA's run_squad.py flags ({}): one script's rules at a time",
             o.transformers_qa ? "qa" : "squad", nvidia);
    const data::TokenizerRules rules = o.transformers_squad ? data::TokenizerRules::transformers
                                       : nvidia.empty()     ? data::TokenizerRules::google
                                                            : data::TokenizerRules::nvidia_pytorch;
    data::FullTokenizer tokenizer(vocab, o.do_lower_case, rules);
    // A failed start leaves no empty directory; rank 0 alone removes it (another rank failing
    // would remove it under rank 0, which is writing into it)
    const CreatedDirCleanup cleanup(dist::world().rank() == 0 ? o.output_dir : std::string());
    make_output_dir(o.output_dir, "--output_dir");
    const fs::path dir(o.output_dir);
    // One run per --output_dir, held from here to the end: features, training and prediction
    // (another process taking the directory between training and prediction would mix models)
    const DirectoryLock output_dir_lock = root ? DirectoryLock(o.output_dir, "--output_dir") : DirectoryLock();
    if (root) remove_stale_temporaries(o.output_dir, outputs);  // of a killed run's outputs

    // The predict file's examples and features, and the metric's checks of its questions (a
    // question of a scored file without answers: every question answered "" reads every ground
    // truth), before anything is trained or written: a bad --predict_file stops a fine-tuning
    // run now, not after its training.
    std::optional<train::SquadEvalSet> eval_set;
    bool scored = false;
    if (o.do_predict && root && !o.transformers_qa) {
        std::vector<std::string> warnings;
        eval_set = train::squad_eval_set(
            o.predict_file, tokenizer,
            {o.max_seq_length, o.doc_stride, o.max_query_length, false, o.transformers_squad},
            {false, o.version_2_with_negative}, &warnings);
        scored = train::squad_has_answers(eval_set->doc) && (predict_model || !o.raw_results.empty());
        if (scored && !train::squad_scorable(eval_set->doc, o.predict_file)) {
            log::warn("{}: no \"version\" key: the predictions are written, as run_squad.py writes "
                      "them, but not scored (evaluate-v1.1.py reads it; add \"version\": \"1.1\" to "
                      "score them)", o.predict_file);
            scored = false;
        }
        if (scored) {
            nlohmann::json empty = nlohmann::json::object();
            for (const auto& e : eval_set->examples) empty[e.qas_id] = "";
            (void)train::squad_evaluate(eval_set->doc, empty, o.predict_file, "--predict_file's questions");
        }
    }

    // NVIDIA's --json-summary: its entries, filled in as the run goes
    DlloggerRun dll{o.output_dir, flags_json, o.seed, nvpt.log_freq,
                    o.train_batch_size / ranks / nvpt.gradient_accumulation_steps, o.learning_rate,
                    o.nvidia.max_steps};
    dll.squad_accumulation = nvpt.gradient_accumulation_steps;
    dll.squad_epochs = o.num_train_epochs;
    if (!nvpt.json_summary.empty() && (train_config || model))
        dll.squad_weights = nvidia_squad_weights(train_config ? *train_config : model->config);
    if (o.do_train) {
        auto train_examples = read_examples(o.train_file, true, o);
        // Pre-shuffled as run_squad.py main() does, so train.tf_record is byte-identical.
        PyRandom rng(12345);
        rng.shuffle(train_examples);
        std::vector<data::SquadFeature> features;
        data::convert_examples_to_features(
            train_examples, tokenizer,
            {o.max_seq_length, o.doc_stride, o.max_query_length, true, o.transformers_squad},
            [&](data::SquadFeature&& f) { features.push_back(std::move(f)); });
        // google's run_squad.py trains on a position outside the window with no loss (tf.one_hot's
        // zero row; ops/span_loss.hpp); NVIDIA's and transformers' clamp it into CrossEntropyLoss's
        // ignore_index instead, which bertbench does not: such a feature is refused on their lines
        if (rules != data::TokenizerRules::google)
            for (const data::SquadFeature& f : features)
                if (const int s = f.start_position.value_or(0), e = f.end_position.value_or(0);
                    s < 0 || s >= o.max_seq_length || e < 0 || e >= o.max_seq_length)
                    fail("{}: question \"{}\": start {} / end {} outside the {}-token window (an answer of "
                         "whitespace alone?), which {} clamps into its loss's ignore_index; bertbench trains "
                         "such positions as google's run_squad.py does, with no loss, on google's command line",
                         o.train_file, train_examples[static_cast<size_t>(f.example_index)].qas_id, s, e,
                         o.max_seq_length, nvidia.empty() ? "transformers' run_squad.py" : "NVIDIA's run_squad.py");
        // the run's length (an error for too few examples) before train.tf_record is written;
        // --features_only trains nothing: no length to check
        std::optional<train::SquadPlan> plan;
        if (train_model)
            plan = train::squad_plan(o, static_cast<int64_t>(train_examples.size()),
                                     static_cast<int64_t>(features.size()));
        const std::string path = (dir / "train.tf_record").string();
        const auto write_train_features = [&] {
            if (root) write_features(path, features, true);
            log::info("wrote {}", path);
        };
        log::info("***** Running training *****");
        log::info("  Num orig examples = {}", train_examples.size());
        log::info("  Num split examples = {}", features.size());
        log::info("  Batch size = {}", o.train_batch_size);
        if (plan) log::info("  Num steps = {}", plan->updates);
        if (plan) dll.squad_updates_per_epoch = plan->updates_per_epoch, dll.squad_steps = plan->t_total;
        dll.squad_train_examples = static_cast<int64_t>(train_examples.size());
        dll.squad_train_features = static_cast<int64_t>(features.size());
        if (plan && plan->own_schedule) log::info("  Schedule: {}", plan->summary);
        if (!train_model) write_train_features();  // --features_only: nothing else to check
        if (train_model) {
            train::SquadTrainOptions t = o;
            t.write_features = write_train_features;
            t.inputs = t.data_files = {o.vocab_file, o.train_file};
            if (!o.predict_file.empty()) t.inputs.push_back(o.predict_file);
            t.precision = precision;
            t.backend = be.get();
            t.output_dir_locked = true;
            const int status = train::run_squad_training(t, static_cast<int64_t>(train_examples.size()),
                                                         features, flags_json);
            if (status != 0) return status;  // interrupted: no prediction
            if (!root) return 0;
            if (pt_model)
                write_nvidia_squad_model(train::latest_checkpoint(o.output_dir), o.output_dir,
                                         o.bert_config_file);
        }
    }

    bool scored_now = false;  // eval_results.json written by this run
    if (o.do_predict && root && o.transformers_qa) {
        scored_now = predict_transformers_qa(o, vocab, model, predict_model, precision, be.get(), cpus);
    } else if (o.do_predict && root) {
        const nlohmann::json& predict_doc = eval_set->doc;
        const auto& eval_examples = eval_set->examples;
        const auto& features = eval_set->features;
        train::SquadPredictOptions popt;
        popt.n_best_size = o.n_best_size;
        popt.max_answer_length = o.max_answer_length;
        popt.do_lower_case = o.do_lower_case;
        popt.tokenizer_rules = rules;
        popt.nvidia_answers = !nvidia.empty();
        popt.transformers_answers = o.transformers_squad;
        popt.version_2_with_negative = o.version_2_with_negative;
        popt.null_score_diff_threshold = o.null_score_diff_threshold;
        std::string verbose;
        std::optional<train::SquadPredictions> preds;
        // Decode given logits before writing anything, so mismatched raw results leave no outputs.
        if (!o.raw_results.empty())
            preds = train::squad_write_predictions(eval_examples, features,
                                                   train::read_squad_raw_results(o.raw_results), popt,
                                                   "--raw_results " + o.raw_results,
                                                   o.verbose_logging ? &verbose : nullptr);
        if (predict_model || preds) remove_previous_prediction(o, scored);  // before its first file
        const std::string eval_path = (dir / "eval.tf_record").string();
        write_features(eval_path, features, false);
        log::info("***** Running predictions *****");
        log::info("  Num orig examples = {}", eval_examples.size());
        log::info("  Num split examples = {}", features.size());
        log::info("  Batch size = {}", o.predict_batch_size);
        log::info("wrote {}", eval_path);
        dll.squad_eval_examples = static_cast<int64_t>(eval_examples.size());
        dll.squad_eval_features = static_cast<int64_t>(features.size());
        dll.squad_predict_batch_size = o.predict_batch_size;
        if (predict_model) {
            const auto results = infer_features(o, model, features, precision, be.get(), cpus);
            preds = train::squad_write_predictions(eval_examples, features, results, popt,
                                                   (dir / "raw_results.jsonl").string(),
                                                   o.verbose_logging ? &verbose : nullptr);
        }
        if (preds) {
            for (size_t b = 0, e; b < verbose.size(); b = e + 1) {
                e = verbose.find('\n', b);
                log::info("{}", verbose.substr(b, e - b));
            }
            write_predictions(o, preds->predictions_json, preds->nbest_json, preds->null_odds_json);
            if (const auto& none = preds->without_null_odds; !none.empty())
                log::warn("{} question(s) predicted \"\" have no entry in null_odds.json (no non-empty answer among "
                          "their --n_best_size={} candidates, or no word piece in their context; run_squad.py stops "
                          "there), e.g. \"{}\": evaluate-v2.0.py --na-prob-file=null_odds.json needs every question",
                          none.size(), o.n_best_size, none.front());
            scored_now = scored;
            if (scored) {
                const auto metric = train::squad_evaluate(
                    predict_doc, nlohmann::json::parse(preds->predictions_json), o.predict_file,
                    (dir / "predictions.json").string());
                std::fwrite(metric.stderr_text.data(), 1, metric.stderr_text.size(), stderr);
                std::fwrite(metric.stdout_text.data(), 1, metric.stdout_text.size(), stdout);
                write_file_atomic((dir / "eval_results.json").string(), metric.stdout_text);
            }
        }
    }
    if (!nvpt.json_summary.empty() && root)
        write_squad_dllogger(nvpt.json_summary, dll, train_model, predict_model, scored_now);
    return 0;
}

}  // namespace bertbench::cli
