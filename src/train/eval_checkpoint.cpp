// One checkpoint's pretraining evaluation (eval_checkpoint.hpp), shared by `bertbench eval` and
// `pretrain --do_eval --nodo_train`.
#include "train/eval_checkpoint.hpp"

#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <regex>

#include "core/aligned.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
#include "model/bert.hpp"
#include "model/checkpoint.hpp"
#include "ops/bf16.hpp"
#include "train/loop.hpp"
#include "train/preflight.hpp"

namespace bertbench::train {
namespace fs = std::filesystem;
using nlohmann::json;

int64_t checkpoint_name_step(const std::string& path) {
    static const std::regex name(R"(model\.ckpt-([0-9]{1,18})\.safetensors)");
    std::smatch m;
    const std::string file = fs::path(path).filename().string();
    return std::regex_match(file, m, name) ? std::stoll(m[1].str()) : -1;
}

EvalMetrics evaluate_checkpoint(const CheckpointEvalOptions& o, model::BertConfig* config_out) {
    model::BertConfig config;
    if (!o.bert_config_file.empty() && !o.model.empty())
        fail("--bert_config_file and --model: expected one of them, got both");
    if (!o.bert_config_file.empty()) {
        config = model::BertConfig::from_json_file(o.bert_config_file);
        config.validate(o.bert_config_file);
    } else if (!o.model.empty()) {
        config = model::BertConfig::preset(o.model);
    } else if (!model::checkpoint_config(o.checkpoint, &config)) {
        fail("--bert_config_file: expected a bert_config.json, got none ({} is a {} and carries "
             "no config; hint: pass the bert_config.json that came with it)",
             o.checkpoint,
             model::checkpoint_format_name(model::detect_checkpoint_format(o.checkpoint)));
    }
    if (o.eval_batch_size < 1) fail("--eval_batch_size: expected >= 1, got {}", o.eval_batch_size);
    if (o.max_eval_steps < 0)
        fail("--max_eval_steps: expected >= 0 (0 = the whole eval set), got {}", o.max_eval_steps);
    if (o.max_seq_length < 2 || o.max_seq_length > config.max_position_embeddings)
        fail("--max_seq_length={}: expected 2..{} (max_position_embeddings of the model)",
             o.max_seq_length, config.max_position_embeddings);
    if (o.max_predictions_per_seq < 1)
        fail("--max_predictions_per_seq: expected >= 1, got {}", o.max_predictions_per_seq);
    const model::ParamTable table(config, model::Heads::pretraining);
    AlignedVector<float> params(table.total_floats(), 0.0f);
    // a tensor the checkpoint lacks (--allow_missing_weights) runs at its initial value, as in
    // pretrain's evaluation (its --seed; eval's: pretrain's default seed), not as zeros
    if (o.init_seed >= 0 || o.allow_missing_weights)
        table.initialize(params, static_cast<uint64_t>(o.init_seed >= 0 ? o.init_seed : 12345));
    std::vector<std::string> missing;
    const std::string loaded =
        model::load_init_checkpoint(o.checkpoint, table, params, "--init_checkpoint", &missing);
    model::require_no_missing_weights(missing, table, "--init_checkpoint", o.checkpoint,
                                      o.allow_missing_weights);
    check_finite_params(table, params, o.checkpoint);
    log::info("{}", loaded);  // after its checks: a refused checkpoint gets one line, the error
    check_input_records(o.files, o.max_seq_length, o.max_predictions_per_seq, config, o.files_flag,
                        o.skip_corrupt_records);
    // Under mpirun -np N: the batch is global, each rank evaluates every N-th record and the sums
    // are all-reduced (the same metrics as one process).
    dist::Comm& comm = dist::world();
    if (comm.size() > 1) {  // one evaluation: every rank the same checkpoint, files and settings
        const nlohmann::json same = {
            {"--eval_batch_size", o.eval_batch_size},
            {"--max_seq_length", o.max_seq_length},
            {"--max_predictions_per_seq", o.max_predictions_per_seq},
            {"--max_eval_steps", o.max_eval_steps},
            {"--seed", o.init_seed},
            {"--dtype", ops::precision_name(o.precision)},
            {"eval files", dist::file_fingerprints(o.files)},
            {"bert_config.json", config.to_json()},
            {"the checkpoint", o.checkpoint},
            {"its weights (FNV-1a)",
             fmt::format("{:016x}", dist::fnv1a64(params.data(), params.size() * sizeof(float)))}};
        dist::require_same_json_on_all_ranks(comm, same, "checkpoint, eval files, model and eval flags",
                                             "start every rank with the same command line and the same files");
    }
    const int local_batch = dist::local_batch(o.eval_batch_size, comm.size(), "eval_batch_size");
    // Files of fewer records than one batch: the engine sized for the records, not the flag (the
    // metrics are the same; memory for a batch of the flag would be held for nothing)
    const int64_t records = eval_records(o.files, o.eval_batch_size, o.skip_corrupt_records, o.max_seq_length,
                                         o.max_predictions_per_seq);
    const int engine_batch =
        static_cast<int>(std::min<int64_t>(local_batch, std::max<int64_t>(1, (records + comm.size() - 1) / comm.size())));
    model::EngineOptions engine_options;
    engine_options.precision = o.precision;
    engine_options.backend = o.backend;
    model::BertPretrainer engine(
        table, {engine_batch, o.max_seq_length, o.max_predictions_per_seq, /*forward_only=*/true},
        engine_options);
    EvalOptions eo;
    eo.files = o.files;
    eo.batch_size = local_batch;
    eo.comm = &comm;
    eo.max_seq_length = o.max_seq_length;
    eo.max_predictions_per_seq = o.max_predictions_per_seq;
    eo.max_eval_steps = o.max_eval_steps;
    eo.skip_corrupt_records = o.skip_corrupt_records;
    eo.type_vocab_size = config.type_vocab_size;
    std::unique_ptr<backend::Buffer<float>> on_device;  // the weights where the engine runs
    const EvalMetrics m = evaluate(engine, backend::device_view(o.backend, std::span<const float>(params), on_device),
                                   config.vocab_size, eo);
    if (config_out != nullptr) *config_out = config;
    return m;
}

int run_pretrain_eval_only(const PretrainOptions& o, const json& flags_json) {
    const bool root = dist::world().rank() == 0;  // under mpirun rank 0 alone logs and writes
    dist::quiet_other_ranks();
    if (o.output_dir.empty())
        fail("--output_dir: expected a directory (the training run's, or a new one) for "
             "eval_results.txt, got none");
    // Which checkpoint: as TF's Estimator, whose evaluate() run_pretraining.py calls with
    // model_dir = --output_dir: the latest checkpoint there (the training run's) restored over
    // --init_checkpoint, which only initialises a model directory without one.
    std::string checkpoint = latest_checkpoint(o.output_dir), why;
    // eval_results.txt's global_step: the restored checkpoint's (its name counts micro-steps; the
    // reference's counter counts updates on NGC TF's line); 0 for --init_checkpoint, as the
    // reference's graph initialised from it (init_from_checkpoint restores the trainable
    // variables, not global_step)
    int64_t step = 0;
    if (!checkpoint.empty()) {
        step = std::max<int64_t>(checkpoint_name_step(checkpoint), 0) / o.schedule_update_counter;
        why = fmt::format("the latest checkpoint in --output_dir={}", o.output_dir);
        if (!o.init_checkpoint.empty())
            why += fmt::format(", not --init_checkpoint={}: TF's Estimator restores the model "
                               "directory's latest over it (bertbench eval --init_checkpoint=... "
                               "evaluates a given one)", o.init_checkpoint);
    } else if (!o.init_checkpoint.empty()) {
        checkpoint = model::resolve_checkpoint_name(o.init_checkpoint, "--init_checkpoint");
        why = "--init_checkpoint; --output_dir holds no checkpoint";
    } else {
        fail("--do_eval --nodo_train: expected a checkpoint to evaluate, got none "
             "(no --init_checkpoint, and --output_dir={} holds no model.ckpt-<step>."
             "safetensors; hint: --init_checkpoint=<checkpoint>)",
             o.output_dir);
    }
    const int cpus = sysinfo::cpus_available();
    if (o.threads < 0 || o.threads > cpus)
        fail("--threads={}: expected 0..{} (CPUs available to this process{})", o.threads, cpus,
             sysinfo::cpus_binding_hint());
    omp_set_num_threads(o.threads > 0 ? o.threads : cpus);

    CheckpointEvalOptions e;
    e.checkpoint = checkpoint;
    e.bert_config_file = o.bert_config_file;
    e.model = o.model;
    e.backend = o.backend;
    e.files_flag = o.eval_input_file.empty() ? "input_file" : "eval_input_file";
    e.files = expand_globs(o.eval_input_file.empty() ? o.input_file : o.eval_input_file,
                           e.files_flag);
    e.eval_batch_size = o.eval_batch_size;
    e.max_seq_length = o.max_seq_length;
    e.max_predictions_per_seq = o.max_predictions_per_seq;
    e.max_eval_steps = o.max_eval_steps;
    e.skip_corrupt_records = o.skip_corrupt_records;
    e.precision = o.precision;
    e.init_seed = o.seed;
    e.allow_missing_weights = o.allow_missing_weights;

    // Its own two files; the training run's (config.json, results.json, logs, checkpoints) are
    // only read.
    const std::string txt = (fs::path(o.output_dir) / "eval_results.txt").string();
    const std::string js = (fs::path(o.output_dir) / "eval_results.json").string();
    std::vector<std::string> inputs = e.files;
    for (std::string& f : model::checkpoint_files(checkpoint)) inputs.push_back(std::move(f));
    if (!o.bert_config_file.empty()) inputs.push_back(o.bert_config_file);
    for (const std::string& out : {txt, js})
        check_output_not_input(out, "--output_dir", inputs,
                               "--input_file/--init_checkpoint/--bert_config_file");
    // written after the whole evaluation: a name taken by a directory is refused now
    check_run_outputs_not_directories(o.output_dir, "--output_dir", {"eval_results.txt", "eval_results.json"});
    log::info("eval-only run (--do_eval --nodo_train): evaluating {} ({}); writes eval_results.txt "
              "and eval_results.json in {}, nothing else",
              checkpoint, why, o.output_dir);

    const EvalMetrics m = evaluate_checkpoint(e);
    if (!root) return 0;
    make_output_dir(o.output_dir, "--output_dir");
    const std::string text = eval_results_txt(m, step);
    json j = m.to_json();
    j["checkpoint"] = checkpoint;
    j["checkpoint_chosen_by"] = why;
    j["global_step"] = step;
    j["eval_files"] = e.files;
    j["dtype"] = ops::precision_name(o.precision);
    j["bf16_emulated"] = ops::bf16_emulated(o.precision);
    j["target_mlm_accuracy"] = o.target_mlm_accuracy;
    j["target_reached"] = m.masked_lm_accuracy >= o.target_mlm_accuracy;
    j["flags"] = flags_json;
    write_file_atomic(txt, text);
    write_file_atomic(js, j.dump(2) + "\n");
    std::cout << m.to_json().dump(2) << "\n";
    log::info("evaluated {}: masked_lm_accuracy {:.4f} masked_lm_loss {:.4f} "
              "next_sentence_accuracy {:.4f} ({} examples); wrote {} and {}",
              checkpoint, m.masked_lm_accuracy, m.masked_lm_loss, m.next_sentence_accuracy,
              m.examples, txt, js);
    return 0;
}

}  // namespace bertbench::train
