#include "cli/reference_flags.hpp"

#include <algorithm>
#include <limits>
#include <regex>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bertbench::cli {

void add_accelerator_flags(Flags& f, bool horovod) {
    const std::string cpu = "on a CPU run";
    // MLPerf TF1 run_pretraining.py (TPUEstimator)
    f.add_ignored("use_tpu", false, cpu);
    f.add_ignored("tpu_name", true, cpu);
    f.add_ignored("tpu_zone", true, cpu);
    f.add_ignored("gcp_project", true, cpu);
    f.add_ignored("master", true, cpu);
    f.add_ignored("num_tpu_cores", true, cpu);
    f.add_ignored("iterations_per_loop", true, cpu);
    // PerfZero / TF2 official models
    f.add_ignored("steps_per_loop", true, cpu);
    f.add_ignored("device_warmup", false, cpu);
    f.add_ignored("all_reduce_alg", true, cpu);
    f.add_ignored("distribution_strategy", true, cpu);
    f.add_ignored("tpu", true, cpu);
    f.add_ignored("verbosity", true, cpu);
    f.add_ignored("enable_xla", false, cpu);
    f.add_ignored("use_xla", false, cpu);
    if (horovod) f.add_ignored("horovod", false, cpu);
}

namespace {

// Spellings of absl and of transformers' scripts that every training command answers the same.
void add_common_hints(Flags& f) {
    f.add_hint("flagfile", "not supported: give the flags on the command line (absl's flag file: xargs < FILE)");
    f.add_hint("model_name_or_path",
               "bertbench takes the model as --bert_config_file and --init_checkpoint (a save_pretrained "
               "directory's config.json and pytorch_model.bin or model.safetensors); scripts/ipex_launch.py "
               "runs Intel's run_qa.py and run_pretrain_mlperf.py lines whole (docs/compatibility.md)");
}

}  // namespace

void add_foreign_hints(Flags& f) {
    // TF2 official models / PerfZero names with another bertbench spelling or no equivalent.
    f.add_hint("train_batch_size_per_replica", "use --train_batch_size, the global batch");
    f.add_hint("batch_size", "did you mean --train_batch_size? It is the global batch");
    f.add_hint("max_seq_len", "did you mean --max_seq_length?");
    f.add_hint("train_data", "did you mean --input_file?");
    f.add_hint("eval_data", "did you mean --eval_input_file?");
    f.add_hint("eval_input_files", "did you mean --eval_input_file? It takes a comma list of globs");
    f.add_hint("num_eval_samples", "use --max_eval_steps, in batches of --eval_batch_size");
    f.add_hint("train_steps", "did you mean --num_train_steps? It counts micro-steps");
    f.add_hint("hub_module_url", "not supported: use --init_checkpoint");
    f.add_hint("model_export_path", "not supported: checkpoints are safetensors in --output_dir");
    f.add_hint("save_checkpoint_steps", "did you mean --save_checkpoints_steps?");
    f.add_hint("lr", "did you mean --learning_rate?");
    // NVIDIA DLE PyTorch run_pretraining.py / run_squad.py: pretrain and squad take them
    // (cli/nvidia_pt_flags.hpp); elsewhere, say so.
    for (const char* name : {"config_file", "input_dir", "max_steps", "warmup_proportion",
                             "gradient_accumulation_steps", "resume_from_checkpoint", "local_rank",
                             "phase2", "json-summary"})
        f.add_hint(name, "NVIDIA PyTorch run_pretraining.py / run_squad.py's flag: bertbench "
                         "pretrain and squad take it");
    // Intel model zoo launch_benchmark.py
    // (scripts/launch_benchmark.py runs Intel's whole command line.)
    f.add_hint("batch-size", "did you mean --train_batch_size (pretrain) or --eval_batch_size? "
                             "scripts/launch_benchmark.py takes Intel's launcher line");
    f.add_hint("num-intra-threads", "did you mean --threads?");
    f.add_hint("checkpoint", "did you mean --init_checkpoint or --output_dir?");
    f.add_hint("data-location", "did you mean --input_file?");
    add_common_hints(f);
    f.add_hint("per_device_train_batch_size", "did you mean --train_batch_size (per rank and micro-step)?");
}

void add_squad_hints(Flags& f) {
    add_common_hints(f);
    f.add_hint("per_device_train_batch_size", "did you mean --train_batch_size?");
    f.add_hint("per_device_eval_batch_size", "did you mean --predict_batch_size?");
    f.add_hint("lr", "did you mean --learning_rate?");
    f.add_hint("batch_size", "did you mean --train_batch_size or --predict_batch_size?");
    f.add_hint("eval_batch_size", "did you mean --predict_batch_size?");
    f.add_hint("max_seq_len", "did you mean --max_seq_length?");
    f.add_hint("num_train_steps", "squad trains int(examples / --train_batch_size x "
                                  "--num_train_epochs) steps, as run_squad.py: set "
                                  "--num_train_epochs");
    f.add_hint("input_file", "squad reads SQuAD JSON: --train_file / --predict_file");
    f.add_hint("model_dir", "did you mean --output_dir?");
    f.add_hint("batch-size", "did you mean --train_batch_size or --predict_batch_size? "
                             "scripts/launch_benchmark.py takes Intel's launcher line");
    f.add_hint("num-intra-threads", "did you mean --threads?");
}

void add_eval_hints(Flags& f) {
    add_common_hints(f);
    for (const char* name : {"eval_data", "eval_input_file", "eval_input_files", "eval_files_dir",
                             "train_data", "data-location"})
        f.add_hint(name, "eval reads its TFRecords or HDF5 shards from --input_file");
    for (const char* name : {"batch_size", "batch-size", "per_device_eval_batch_size", "predict_batch_size"})
        f.add_hint(name, "did you mean --eval_batch_size?");
    f.add_hint("checkpoint", "did you mean --init_checkpoint?");
    f.add_hint("max_seq_len", "did you mean --max_seq_length?");
    f.add_hint("num-intra-threads", "did you mean --threads?");
    f.add_hint("num_eval_samples", "use --max_eval_steps, in batches of --eval_batch_size");
    for (const char* name : {"output_dir", "model_dir"})
        f.add_hint(name, "eval writes no run directory: it prints its metrics (--json=FILE writes "
                         "them too); run_pretraining.py's eval line is bertbench pretrain --do_eval "
                         "--nodo_train --output_dir=DIR");
    for (const char* name : {"learning_rate", "lr", "train_batch_size", "num_train_steps", "do_train"})
        f.add_hint(name, "eval does not train: bertbench pretrain does");
}

void TokenizationFlags::add(Flags& f) {
    f.add("preserve_unused_tokens", &preserve_unused_tokens,
          "MLPerf's tokenization.py flag: False (its default) only; True would keep [unusedN] "
          "vocabulary tokens whole, which bertbench's tokenizer does not");
}

void check_case_matches_checkpoint(bool do_lower_case, const std::string& init_checkpoint) {
    static const std::regex kModelDir("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt");  // re.match: a prefix
    std::smatch m;
    if (init_checkpoint.empty() || !std::regex_search(init_checkpoint, m, kModelDir)) return;
    const std::string model = m[1];
    static const char* const kLower[] = {"uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                                         "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"};
    static const char* const kCased[] = {"cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                                         "multi_cased_L-12_H-768_A-12"};
    const auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), model) != std::end(names); };
    if (!(in(kLower) && !do_lower_case) && !(in(kCased) && do_lower_case)) return;
    fail("--do_lower_case={} with --init_checkpoint={}: {} is a {} model, expected --do_lower_case={} so that "
         "fine-tuning matches its pre-training (run_squad.py's validate_case_matches_checkpoint raises "
         "ValueError here)", do_lower_case ? "True" : "False", init_checkpoint, model,
         do_lower_case ? "cased" : "lowercased", do_lower_case ? "False" : "True");
}

void TokenizationFlags::check() const {
    if (preserve_unused_tokens)
        fail("--preserve_unused_tokens=True: expected False (tokenization.py's default); "
             "bertbench's tokenizer does not keep [unusedN] vocabulary tokens whole");
}

void Tf2StepFlags::add(Flags& f) {
    f.add("num_accumulation_steps", &num_accumulation_steps,
          "PerfZero/TF2: gradient accumulation; --train_batch_size is then the global batch per "
          "update and each micro-batch is train_batch_size / this (0 = not given)");
    f.add("num_steps_per_epoch", &num_steps_per_epoch,
          "PerfZero/TF2: optimizer updates per epoch; x --num_train_epochs = the schedule length "
          "(sets --num_train_steps; 0 = not given)");
    f.add("num_train_epochs", &num_train_epochs,
          "PerfZero/TF2: epochs of --num_steps_per_epoch updates (not given: 3, its default)");
    f.add("warmup_steps", &warmup_steps,
          "PerfZero/TF2: warm-up length in optimizer updates (sets --num_warmup_steps; -1 = not "
          "given)");
    f.add("epsilon", &epsilon,
          "MLPerf TF2: LAMB's epsilon (sets --log_epsilon = log10 of it)");
    f.add("stop_steps", &stop_steps,
          "PerfZero/TF2: stop after this many optimizer updates; the LR schedule still runs to "
          "--num_train_steps (0 = not given)");
    f.add("steps_between_eval", &steps_between_eval,
          "PerfZero/TF2: evaluate every this many optimizer updates (sets --eval_every_samples; "
          "0 = not given)");
    f.add("steps_before_eval_start", &steps_before_eval_start,
          "PerfZero/TF2: first evaluation after this many optimizer updates (0 = not given: "
          "after one eval interval)");
    f.add("num_gpus", &num_gpus,
          "accepted: bertbench runs 1 process that computes the whole global batch (0 = not "
          "given)");
}

void NgcTfFlags::add(Flags& f) {
    f.add("input_files_dir", &input_files_dir,
          "NVIDIA NGC TF: directories of training TFRecords (comma list), every file in them read "
          "(= --input_file=DIR/*); marks the NGC meaning of the batch and step flags");
    f.add("eval_files_dir", &eval_files_dir,
          "NVIDIA NGC TF: directories of eval TFRecords (comma list), every file in them read "
          "(= --eval_input_file=DIR/*)");
    f.add("horovod", &horovod,
          "NVIDIA NGC TF: data parallel over the mpirun ranks (it is, under mpirun, without the "
          "flag); the NGC script then multiplies --learning_rate by the rank count, and so does "
          "bertbench");
    const std::string cpu = "on a CPU run";
    f.add_ignored("amp", false, "on a CPU run (fp32 unless --dtype=bf16)");
    f.add_ignored("manual_fp16", false, "on a CPU run (fp32 unless --dtype=bf16)");
    f.add_ignored("use_fp16", false, "on a CPU run (fp32 unless --dtype=bf16; the older NGC scripts' --amp)");
    f.add_ignored("init_loss_scale", true, "on a CPU run (fp32 unless --dtype=bf16)");
    f.add("allreduce_post_accumulation", &allreduce_post_accumulation,
          "NVIDIA NGC TF, under mpirun with --num_accumulation_steps > 1: each rank clips its own "
          "micro-batch gradients and the update's sum is averaged once; otherwise (its default) "
          "every micro-batch gradient is averaged over the ranks, then clipped, as Horovod's "
          "DistributedOptimizer does. No effect on NVIDIA PyTorch's line (it clips the averaged "
          "gradient)");
    f.add_ignored("dllog_path", true, "(the training log is train_log.jsonl in --output_dir)");
    f.add_ignored("display_loss_steps", true, "(every step is logged in train_log.jsonl)");
    f.add_ignored("report_loss", false, "(every step is logged in train_log.jsonl)");
    f.add_ignored("verbose_logging", false, "(every step is logged in train_log.jsonl)");
}

std::string NgcTfFlags::marker(const Flags& f, bool shared) const {
    if (f.is_set("input_files_dir")) return "--input_files_dir";
    if (f.is_set("eval_files_dir")) return "--eval_files_dir";
    if (f.is_set("horovod")) return horovod ? "--horovod" : "--nohorovod";
    for (const char* name : {"use_xla", "manual_fp16", "use_fp16", "dllog_path", "display_loss_steps",
                             "report_loss", "verbose_logging"})
        if (const std::string g = f.ignored_given(name); !g.empty()) return g;
    if (shared) {  // also NVIDIA's PyTorch run_pretraining.py's flags
        if (f.is_set("allreduce_post_accumulation"))
            return "--" + std::string(allreduce_post_accumulation ? "" : "no") + "allreduce_post_accumulation";
        for (const char* name : {"amp", "init_loss_scale"})
            if (const std::string g = f.ignored_given(name); !g.empty()) return g;
    }
    return "";
}

void NgcTfSquadFlags::add(Flags& f) {
    const std::string who = "NVIDIA NGC TF run_squad.py: ";
    f.add("horovod", &horovod,
          who + "data parallel over the mpirun ranks (it is, under mpirun, without the flag); "
                "the script then multiplies --learning_rate by the rank count, and so does "
                "bertbench");
    f.add("num_accumulation_steps", &num_accumulation_steps,
          who + "micro-batches of --train_batch_size per update; bertbench computes the update's "
                "sequences in one batch (the same update)");
    f.add_ignored("dllog_path", true, "(the training log is train_log.jsonl in --output_dir)");
    f.add_ignored("display_loss_steps", true, "(every step is logged in train_log.jsonl)");
    f.add_ignored("use_trt", false, "on a CPU run (TF-TRT serves the same model)");
    f.add_ignored("use_fp16", false, "on a CPU run (the older NGC scripts' --amp)");
    f.add("export_triton", &export_triton,
          who + "export a SavedModel for Triton: not supported (bertbench's model is its "
                "checkpoint; `bertbench convert` writes TF, PyTorch and HF files)");
    for (const char* name : {"triton_model_name", "triton_model_version", "triton_server_url",
                             "triton_model_overwrite", "triton_max_batch_size",
                             "triton_dyn_batching_delay", "triton_engine_count"})
        f.add_ignored(name, std::string(name) != "triton_model_overwrite", "(no Triton export)");
    f.add("num_eval_iterations", &num_eval_iterations,
          who + "predict only the first N x --predict_batch_size questions: not supported "
                "(bertbench predicts them all; 0 = not given)");
}

std::string NgcTfSquadFlags::marker(const Flags& f) const {
    const std::string amp = f.ignored_given("amp");  // argparse's store_true takes no value
    if (amp == "--noamp" || amp.starts_with("--amp=")) return amp;
    if (f.is_set("horovod")) return horovod ? "--horovod" : "--nohorovod";
    for (const char* name : {"use_xla", "use_fp16", "dllog_path", "display_loss_steps", "use_trt"})
        if (const std::string g = f.ignored_given(name); !g.empty()) return g;
    for (const char* name : {"num_accumulation_steps", "export_triton", "num_eval_iterations"})
        if (f.is_set(name)) return std::string("--") + name;
    return "";
}

std::string apply_ngc_tf_squad(const Flags& f, const NgcTfSquadFlags& n,
                               train::SquadTrainOptions& o, int ranks) {
    const std::string m = n.marker(f);
    if (m.empty()) return "";
    if (n.export_triton)
        fail("--export_triton: not supported (NGC TF's SavedModel for Triton; bertbench's model "
             "is its checkpoint, and `bertbench convert` writes TF, PyTorch and HF files)");
    if (n.num_eval_iterations != 0)
        fail("--num_eval_iterations={}: not supported (NGC TF predicts only the first N x "
             "--predict_batch_size questions; bertbench predicts every one: leave it out)",
             n.num_eval_iterations);
    const int k = n.num_accumulation_steps;
    if (k < 1) fail("--num_accumulation_steps={}: expected >= 1", k);
    if (o.train_batch_size < 1 ||
        int64_t{o.train_batch_size} * k * ranks > std::numeric_limits<int>::max())
        fail("--train_batch_size={}: expected 1..{} (NGC TF: sequences per GPU and micro-batch)",
             o.train_batch_size, std::numeric_limits<int>::max() / k / ranks);
    const int given = o.train_batch_size;
    o.train_batch_size = given * k * ranks;
    o.batch_per_rank = true;
    o.ngc_tf_adam = true;
    std::string notes;
    if (n.horovod && ranks > 1) {
        o.learning_rate *= ranks;
        notes = fmt::format("; --horovod: --learning_rate x {} ranks = {}", ranks, o.learning_rate);
    }
    log::info("NVIDIA NGC TF run_squad.py meaning of the flags ({} given): --train_batch_size={} "
              "per GPU (here per rank) and micro-batch x --num_accumulation_steps={} x {} rank{} "
              "= {} sequences per update, computed as one batch (bertbench "
              "--train_batch_size={}); its AdamWeightDecay decays from lr / (1 - warm-up / "
              "steps), meeting the warm-up's end{}",
              m, given, k, ranks, ranks == 1 ? "" : "s", o.train_batch_size, o.train_batch_size,
              notes);
    return m;
}

}  // namespace bertbench::cli
