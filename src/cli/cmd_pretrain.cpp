// `bertbench pretrain`: MLPerf BERT pretraining (run_pretraining.py flags) with online evaluation
// to a target masked-LM accuracy, checkpoints and exact resume. The loop: src/train/pretrain.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>

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
#include "data/shard_source.hpp"
#include "dist/comm.hpp"
#include "model/checkpoint.hpp"
#include "train/eval_checkpoint.hpp"
#include "train/pretrain.hpp"

namespace bertbench::cli {
namespace {

namespace fs = std::filesystem;

// PerfZero/TF2's own step flags (bertbench's --steps_per_update is MLPerf TF1's).
constexpr const char* kTf2StepFlags[] = {"num_steps_per_epoch", "num_train_epochs", "warmup_steps",
                                         "stop_steps", "steps_between_eval", "steps_before_eval_start"};

// --input_files_dir=a,b (NVIDIA NGC TF) as bertbench's --input_file=a/*,b/*: each item must be a
// directory, as the NGC script globs DIR/* in each.
std::string files_in_dirs(const std::string& flag, const std::string& ours, const std::string& dirs) {
    std::string globs;
    for (const std::string& d : split_commas(dirs)) {
        std::error_code ec;
        const fs::file_status st = fs::status(d, ec);
        if (!fs::exists(st))
            fail("--{}={}: expected a directory of TFRecord files, got no such directory", flag, d);
        if (!fs::is_directory(st))
            fail("--{}={}: expected a directory (NVIDIA's script reads every file in it), got a "
                 "file (hint: --{}={} takes files and globs)", flag, d, ours, d);
        if (!globs.empty()) globs += ',';
        globs += (fs::path(d) / "*").string();
    }
    if (globs.empty()) fail("--{}: expected a directory of TFRecord files, got none", flag);
    return globs;
}

// --max_seq_length=0 / --max_predictions_per_seq=0: the widths of the first input file's records
// (the training files', else the eval files'), as PyTorch's HDF5 loaders take them from the data.
void resolve_widths(train::PretrainOptions& o) {
    if (o.max_seq_length != 0 && o.max_predictions_per_seq != 0) return;
    const bool train = o.do_train && !o.input_file.empty();
    const std::string& list = train || o.eval_input_file.empty() ? o.input_file : o.eval_input_file;
    const std::string flag = train || o.eval_input_file.empty() ? "input_file" : "eval_input_file";
    const std::vector<std::string> files = expand_globs(list, flag);
    if (files.empty())
        fail("--max_seq_length={} --max_predictions_per_seq={}: 0 takes the width from the first "
             "--{}, got no file", o.max_seq_length, o.max_predictions_per_seq, flag);
    const auto [seq, pred] = data::record_widths(files.front());
    if (o.max_seq_length == 0) o.max_seq_length = seq;
    if (o.max_predictions_per_seq == 0) o.max_predictions_per_seq = pred;
    if (dist::world().rank() == 0)
        log::info("--max_seq_length={} --max_predictions_per_seq={}: the widths of {}",
                  o.max_seq_length, o.max_predictions_per_seq, files.front());
}

// NGC's phase-2 script names phase 1's last checkpoint by its global_step, an update count
// (--init_checkpoint=<phase 1>/model.ckpt-<updates>), where bertbench names it by micro-step: a
// name "DIR/model.ckpt-N" that is neither a file nor a TF prefix, in the run directory of an NGC
// line (its config.json: nvidia_ngc_tf, K micro-steps per update), is DIR/model.ckpt-<N x K>.
std::string ngc_checkpoint_name(const std::string& name) {
    const fs::path p(name);
    const std::string base = p.filename().string(), prefix = train::kCheckpointPrefix;
    if (!base.starts_with(prefix) || fs::exists(p) || fs::exists(name + ".index")) return name;
    const std::string digits = base.substr(prefix.size());
    const fs::path config = p.parent_path() / "config.json";
    if (digits.empty() || digits.size() > 15 || digits.find_first_not_of("0123456789") != std::string::npos ||
        !fs::exists(config))
        return name;
    const nlohmann::json c = nlohmann::json::parse(read_file(config.string()), nullptr, false);
    if (c.is_discarded() || !c.contains("flags") || c["flags"].value("batch_flags_meaning", "") != "nvidia_ngc_tf")
        return name;
    const int64_t k = c["flags"].value("steps_per_update", int64_t{1});
    const std::string ours = train::checkpoint_path(p.parent_path().string(), std::stoll(digits) * k);
    if (!fs::exists(ours)) return name;
    log::info("--init_checkpoint={}: NVIDIA NGC TF names a checkpoint by its update count; that run ({}) has {} "
              "micro-steps per update: reading {}", name, config.string(), k, ours);
    return ours;
}

// NVIDIA NGC TF run_pretraining.py's meanings (NgcTfFlags), when the command line carries one of
// that script's own flags: --train_batch_size per rank and micro-step, --num_accumulation_steps
// micro-steps per update, its step flags in updates, --learning_rate x ranks with --horovod. One
// line states the meaning and the global batch; config.json records the effective values.
// Returns the marker ("" when the command line is not NGC's).
std::string apply_ngc(const Flags& f, const NgcTfFlags& n, const Tf2StepFlags& t,
                      train::PretrainOptions& o, int ranks) {
    const std::string marker = n.marker(f);
    if (marker.empty()) return "";
    std::vector<const char*> others(std::begin(kTf2StepFlags), std::end(kTf2StepFlags));
    others.push_back("steps_per_update");
    others.push_back("clip_by_global_norm_after_gradient_allreduce");
    for (const char* tf2 : others)
        if (f.is_set(tf2))
            fail("--{}: expected the flags of one script, got PerfZero/MLPerf's --{} on NVIDIA NGC "
                 "TF's command line ({} given; its step flags --num_train_steps, "
                 "--num_warmup_steps and --save_checkpoints_steps count updates, "
                 "--num_accumulation_steps sets the micro-steps per update)", tf2, tf2, marker);
    const auto one_of = [&](const char* ours, const char* theirs) {
        if (f.is_set(ours) && f.is_set(theirs))
            fail("--{} and --{}: expected one of them (they set the same thing), got both", ours,
                 theirs);
    };
    one_of("input_file", "input_files_dir");
    one_of("eval_input_file", "eval_files_dir");
    if (!o.init_checkpoint.empty()) o.init_checkpoint = ngc_checkpoint_name(o.init_checkpoint);
    if (!n.input_files_dir.empty())
        o.input_file = files_in_dirs("input_files_dir", "input_file", n.input_files_dir);
    if (!n.eval_files_dir.empty())
        o.eval_input_file = files_in_dirs("eval_files_dir", "eval_input_file", n.eval_files_dir);
    const int k = t.num_accumulation_steps != 0 ? t.num_accumulation_steps : 1;
    if (o.train_batch_size < 1 || o.train_batch_size > std::numeric_limits<int>::max() / ranks)
        fail("--train_batch_size={}: expected 1..{} (NVIDIA NGC TF: sequences per GPU and "
             "micro-step, x {} ranks)", o.train_batch_size,
             std::numeric_limits<int>::max() / ranks, ranks);
    const int per_rank = o.train_batch_size;
    o.train_batch_size = per_rank * ranks;
    o.batch_per_rank = true;
    o.steps_per_update = k;
    o.batch_hint = "a smaller --train_batch_size (the micro-batch) with a larger --num_accumulation_steps keeps the "
                   "global batch";
    o.schedule_update_counter = k;  // its global_step counts updates: the rate follows it
    // Its clip: each micro-batch's gradient of loss / K to global norm 1, i.e. norm K in the
    // micro-batch gradient's units; under Horovod's DistributedOptimizer (which wraps its
    // optimizer unless K > 1 with --allreduce_post_accumulation) averaged over the ranks first.
    o.clip_norm = static_cast<float>(k);
    o.clip_mode = k > 1 && n.allreduce_post_accumulation ? optim::ClipMode::per_micro_batch
                                                         : optim::ClipMode::averaged_micro_batch;
    // Given or not: NGC's defaults (100000, 10000 and 1000 updates) are bertbench's in micro-steps,
    // so a line that leaves one out means that many updates too.
    std::string steps;
    const auto updates = [&](const char* name, int64_t& value) {
        if (k == 1) return;
        if (value < 0 || value > std::numeric_limits<int64_t>::max() / k)
            fail("--{}={}: expected 0..{} updates", name, value,
                 std::numeric_limits<int64_t>::max() / k);
        steps += fmt::format("{}--{}={}{} -> {} micro-steps", steps.empty() ? "" : ", ", name, value,
                             f.is_set(name) ? "" : " (its default)", value * k);
        value *= k;
    };
    updates("num_train_steps", o.num_train_steps);
    updates("num_warmup_steps", o.num_warmup_steps);
    updates("save_checkpoints_steps", o.save_checkpoints_steps);
    log::info("NVIDIA NGC TF meaning of the batch flags ({} given): --train_batch_size={} per GPU "
              "(here per rank) and micro-step x --num_accumulation_steps={} x {} rank{} = global "
              "batch {} per update (bertbench --train_batch_size={} --steps_per_update={}){}",
              marker, per_rank, k, ranks, ranks == 1 ? "" : "s",
              int64_t{o.train_batch_size} * k, o.train_batch_size, k,
              steps.empty() ? "" : "; its step flags count updates: " + steps +
                                       ", and the learning rate follows its update counter");
    if (n.horovod && ranks > 1) {
        log::info("--horovod on {} ranks: --learning_rate={} x {} = {}, as NVIDIA's script "
                  "multiplies it by the Horovod size", ranks, o.learning_rate, ranks,
                  o.learning_rate * ranks);
        o.learning_rate *= ranks;
    }
    if (o.optimizer == "adam") {  // NGC: anything but "lamb" is its AdamWeightDecayOptimizer
        log::info("--optimizer_type=adam: NVIDIA's AdamWeightDecayOptimizer, bertbench "
                  "--optimizer=adamw");
        o.optimizer = "adamw";
    }
    if (o.optimizer == "lamb") {  // NGC's LAMBOptimizer has no exclude_from_layer_adaptation
        o.optimizer_variant = optim::OptimizerVariant::ngc_tf;
        log::info("NVIDIA NGC TF's LAMB: the trust ratio ||w||/||update|| applies to every tensor "
                  "(LayerNorm and bias ones too; MLPerf's LAMB gives those ratio 1), weight decay "
                  "as MLPerf's");
    }
    // NGC's optimization.py: LAMB decays with power 0.5; AdamWeightDecay with power 1 from
    // lr / (1 - warm-up / steps), so that the decay meets the warm-up's end at lr.
    if (o.optimizer == "lamb" && !f.is_set("poly_power")) {
        o.poly_power = 0.5;
        log::info("NVIDIA NGC TF's LAMB schedule: the learning rate decays with power 0.5 "
                  "(bertbench --poly_power=0.5)");
    } else if (o.optimizer == "adamw" && o.num_warmup_steps > 0 && o.num_warmup_steps == o.num_train_steps) {
        fail("--num_warmup_steps and --num_train_steps: both {} updates, where NVIDIA NGC TF's adam "
             "schedule divides by 1 - warm-up / steps (its script stops with ZeroDivisionError); "
             "expected fewer warm-up steps", o.num_warmup_steps / k);
    } else if (o.optimizer == "adamw" && o.learning_rate > 0 && o.num_warmup_steps > 0 &&
               o.num_warmup_steps < o.num_train_steps) {
        const double w = static_cast<double>(o.num_warmup_steps) / static_cast<double>(o.num_train_steps);
        o.decay_learning_rate = o.learning_rate / (1.0 - w);
        log::info("NVIDIA NGC TF's AdamWeightDecay schedule: the decay starts from --learning_rate / "
                  "(1 - warm-up / steps) = {:g}, to meet the warm-up's end at {:g}",
                  o.decay_learning_rate, o.learning_rate);
    }
    return marker;
}

// PerfZero/TF2 flags onto bertbench's: --train_batch_size is the global batch per optimizer
// update, split into --num_accumulation_steps micro-batches; their step flags count updates and
// become micro-steps here. Each conversion is stated once at start-up.
void apply_tf2(const Flags& f, const Tf2StepFlags& t, train::PretrainOptions& o, bool ngc,
               int ranks) {
    const auto both = [&](const char* ours, const char* theirs) {
        if (f.is_set(ours) && f.is_set(theirs))
            fail("--{} and --{}: expected one of them (they set the same thing), got both", ours,
                 theirs);
    };
    if (t.num_accumulation_steps != 0 && !ngc) {
        both("steps_per_update", "num_accumulation_steps");
        // in the user's units: each rank's micro-batch is the batch / (accumulation x ranks)
        const int64_t unit = int64_t{t.num_accumulation_steps} * ranks;
        if (o.train_batch_size % unit != 0)
            fail("--train_batch_size={}: expected a multiple of --num_accumulation_steps={}{} "
                 "(PerfZero: the global batch, split into that many micro-batches{}) (hint: "
                 "--train_batch_size={})",
                 o.train_batch_size, t.num_accumulation_steps,
                 ranks == 1 ? std::string() : fmt::format(" x {} ranks = {}", ranks, unit),
                 ranks == 1 ? "" : ", each split over the ranks",
                 (o.train_batch_size / unit + 1) * unit);
        log::info("PerfZero/TF2 meaning of --num_accumulation_steps (no flag of NVIDIA NGC TF's "
                  "script such as --input_files_dir given): --train_batch_size={} is the global "
                  "batch per update = {} micro-batches of {} sequences (bertbench "
                  "--train_batch_size={} --steps_per_update={}); NGC's meaning would be {} x {} "
                  "x {} rank{} = {}",
                  o.train_batch_size, t.num_accumulation_steps,
                  o.train_batch_size / t.num_accumulation_steps,
                  o.train_batch_size / t.num_accumulation_steps, t.num_accumulation_steps,
                  o.train_batch_size, t.num_accumulation_steps, ranks, ranks == 1 ? "" : "s",
                  int64_t{o.train_batch_size} * t.num_accumulation_steps * ranks);
        o.train_batch_size /= t.num_accumulation_steps;
        o.steps_per_update = t.num_accumulation_steps;
        o.batch_hint = "a larger --num_accumulation_steps keeps --train_batch_size, the global batch, in smaller "
                       "micro-batches";
        o.schedule_update_counter = t.num_accumulation_steps;  // optimizer.iterations: updates
    }
    const int64_t spu = o.steps_per_update;
    const int64_t global_batch = int64_t{o.train_batch_size} * spu;
    std::string said;
    const auto note = [&](const std::string& s) { said += (said.empty() ? "" : ", ") + s; };
    if (f.is_set("num_train_epochs") && !ngc &&
        (t.num_train_epochs != std::trunc(t.num_train_epochs) || std::fabs(t.num_train_epochs) > 1e9))
        fail("--num_train_epochs={}: expected an integer below 1e9 (PerfZero/TF2's absl integer flag)",
             t.num_train_epochs);
    // PerfZero's line (one of its schedule's flags, or its --num_accumulation_steps): what it leaves
    // out takes TF2's defaults (official/nlp/bert: 1000 updates per epoch, 3 epochs, warm-up 10000
    // updates, AdamW), not bertbench's, unless bertbench's own flag for it is given. Its run
    // controls (--stop_steps, the eval cadence) do not make a line PerfZero's: a bertbench run
    // paused with --stop_steps and continued without it is one run.
    const bool line = !ngc && (t.num_accumulation_steps != 0 || f.is_set("num_steps_per_epoch") ||
                               f.is_set("num_train_epochs") || f.is_set("warmup_steps"));
    if (line && f.is_set("num_train_epochs")) both("num_train_steps", "num_train_epochs");
    if (line && !f.is_set("optimizer")) {
        o.optimizer = "adamw";
        note("--optimizer_type=adamw (its default)");
    }
    int64_t per_epoch = t.num_steps_per_epoch;
    if (line && per_epoch == 0 && !f.is_set("num_train_steps")) {
        per_epoch = 1000;
        note("--num_steps_per_epoch=1000 (its default)");
    }
    if (per_epoch != 0) {
        both("num_train_steps", "num_steps_per_epoch");
        const int64_t epochs = f.is_set("num_train_epochs") ? static_cast<int64_t>(t.num_train_epochs) : 3;
        if (!f.is_set("num_train_epochs")) note("--num_train_epochs=3 (its default)");
        if (per_epoch < 1 || epochs < 1)
            fail("--num_steps_per_epoch={} --num_train_epochs={}: expected both >= 1", per_epoch, epochs);
        o.num_train_steps = per_epoch * epochs * spu;
        note(fmt::format("--num_train_steps={}", o.num_train_steps));
    }
    if (t.warmup_steps != -1) {
        both("num_warmup_steps", "warmup_steps");
        if (!(t.warmup_steps >= 0 && t.warmup_steps == std::floor(t.warmup_steps) && t.warmup_steps < 1e15))
            fail("--warmup_steps: expected a whole number of updates >= 0, got {}", t.warmup_steps);
        o.num_warmup_steps = static_cast<int64_t>(t.warmup_steps) * spu;
        note(fmt::format("--num_warmup_steps={}", o.num_warmup_steps));
    } else if (line && !f.is_set("num_warmup_steps")) {
        o.num_warmup_steps = 10000 * spu;
        note(fmt::format("--warmup_steps=10000 (its default): --num_warmup_steps={}", o.num_warmup_steps));
    }
    if (f.is_set("epsilon")) {  // 0 too: given, and refused (it has no log10)
        both("log_epsilon", "epsilon");
        if (!(t.epsilon > 0 && std::isfinite(t.epsilon)))
            fail("--epsilon: expected a finite value > 0 (bertbench keeps it as --log_epsilon, its log10), "
                 "got {}", t.epsilon);
        o.log_epsilon = std::log10(t.epsilon);
        log::info("--epsilon={:g}: the optimizer's epsilon (bertbench --log_epsilon={:.17g})", t.epsilon, o.log_epsilon);
    }
    if (t.stop_steps != 0) {
        if (t.stop_steps < 1) fail("--stop_steps: expected >= 1, got {}", t.stop_steps);
        o.stop_steps = t.stop_steps * spu;
        note(fmt::format("stop at micro-step {}", o.stop_steps));
    }
    if (t.steps_between_eval != 0) {
        both("eval_every_samples", "steps_between_eval");
        if (t.steps_between_eval < 1 || t.steps_between_eval > train::kMaxRunSamples / global_batch)
            fail("--steps_between_eval: expected 1..{} (at most 2^53 samples), got {}",
                 train::kMaxRunSamples / global_batch, t.steps_between_eval);
        o.eval_every_samples = t.steps_between_eval * global_batch;
        note(fmt::format("--eval_every_samples={}", o.eval_every_samples));
    }
    if (t.steps_before_eval_start != 0) {
        if (t.steps_before_eval_start < 0 || t.steps_before_eval_start > train::kMaxRunSamples / global_batch)
            fail("--steps_before_eval_start: expected 0..{} (at most 2^53 samples), got {}",
                 train::kMaxRunSamples / global_batch, t.steps_before_eval_start);
        // The reference evaluates after update u when u % steps_between_eval == 0 and
        // u >= steps_before_eval_start: the first multiple at or after the start.
        const int64_t between = t.steps_between_eval != 0 ? t.steps_between_eval : 1;
        o.first_eval_samples = std::max<int64_t>((t.steps_before_eval_start + between - 1) / between, 1) *
                               between * global_batch;
        note(fmt::format("first evaluation at {} samples", o.first_eval_samples));
    }
    if (!said.empty())
        log::info("PerfZero/TF2 step flags count optimizer updates ({} micro-step{} each): {}", spu,
                  spu == 1 ? "" : "s", said);
    if (t.num_gpus < 0) fail("--num_gpus: expected >= 0, got {}", t.num_gpus);
    if (t.num_gpus > 1 && ranks == 1)
        log::info("--num_gpus={}: 1 process computes the global batch of {} ({} sequences x {} "
                  "micro-steps per update); the reference splits it over {} GPUs",
                  t.num_gpus, global_batch, o.train_batch_size, spu, t.num_gpus);
    else if (t.num_gpus > 0 && ranks > 1)
        log::info("--num_gpus={}: {} ranks compute the global batch of {} ({} sequences per rank "
                  "x {} micro-steps per update){}", t.num_gpus, ranks, global_batch,
                  o.train_batch_size / ranks, spu,
                  t.num_gpus == ranks ? "" : fmt::format("; the reference splits it over {} GPUs",
                                                         t.num_gpus));
}

}  // namespace

int cmd_pretrain(int argc, char** argv) {
    train::PretrainOptions o;
    Flags f("pretrain",
            "Pretrain BERT (masked LM + next sentence) on MLPerf-schema TFRecords with LAMB or "
            "AdamW, evaluating masked-LM accuracy every --eval_every_samples and stopping at "
            "--target_mlm_accuracy. Running the same command again with the same --output_dir "
            "resumes from its latest checkpoint, bit-identically. Step counts are micro-steps "
            "(as TF's global_step). Outputs in --output_dir: train_log.jsonl, eval_log.jsonl, "
            "mlperf.log, results.json, curves.svg, config.json, model.ckpt-<step>.safetensors. "
            "See docs/pretraining.md.");
    f.add("bert_config_file", &o.bert_config_file, "bert_config.json of the model");
    f.add("model", &o.model, "instead of --bert_config_file: preset tiny|mini|small|medium|base|large");
    f.add("input_file", &o.input_file,
          "training TFRecords or NVIDIA HDF5 shards (.hdf5/.h5): comma list of files/globs");
    f.add("eval_input_file", &o.eval_input_file,
          "eval TFRecords or .hdf5/.h5 shards (comma list/globs); empty = --input_file, as the "
          "reference");
    f.add("output_dir", &o.output_dir, "directory for checkpoints and logs (created; resumed from)");
    f.add("init_checkpoint", &o.init_checkpoint,
          "initial weights: a TensorFlow checkpoint prefix (PREFIX.index: the model's variables "
          "only, optimizer state and global_step ignored), a bertbench safetensors checkpoint "
          "(TF names), a Hugging Face BERT safetensors file or a PyTorch .pt/.bin state dict "
          "(Hugging Face's or NVIDIA's names); optimizer state starts at zero");
    f.add("train_batch_size", &o.train_batch_size,
          "sequences per micro-batch, GLOBAL: under mpirun -np N each rank takes 1/N");
    f.add("eval_batch_size", &o.eval_batch_size, "sequences per eval batch");
    f.add("max_seq_length", &o.max_seq_length,
          "tokens per sequence; must equal the TFRecords' (0: the first input file's)");
    f.add("max_predictions_per_seq", &o.max_predictions_per_seq,
          "masked positions per sequence; must equal the TFRecords' (0: the first input file's)");
    f.add("last_layer_subset", &o.last_layer_subset,
          "run the last layer's attention output and FFN only on the rows the heads read ([CLS] "
          "and masked positions): the same losses and gradients to fp32 rounding, fewer FLOPs");
    f.add("num_train_steps", &o.num_train_steps, "micro-steps to train (LR decays to 0 here)");
    f.add("num_warmup_steps", &o.num_warmup_steps, "linear warm-up length, micro-steps");
    f.add("start_warmup_step", &o.start_warmup_step, "step where warm-up starts (may be negative)");
    f.add("learning_rate", &o.learning_rate, "peak learning rate");
    f.add("poly_power", &o.poly_power, "power of the polynomial decay");
    f.add("optimizer", &o.optimizer, "lamb | adamw (adamw: google's fixed betas/eps/wd; on PerfZero/TF2's line Keras "
          "AdamWeightDecay with the flags' values)");
    f.add("lamb_beta_1", &o.lamb_beta_1, "LAMB beta_1");
    f.add("lamb_beta_2", &o.lamb_beta_2, "LAMB beta_2");
    f.add("lamb_weight_decay_rate", &o.lamb_weight_decay_rate, "LAMB weight decay rate");
    f.add("log_epsilon", &o.log_epsilon, "LAMB epsilon = 10^log_epsilon");
    f.add("steps_per_update", &o.steps_per_update, "gradient accumulation: micro-steps per update");
    f.add("save_checkpoints_steps", &o.save_checkpoints_steps,
          "checkpoint every this many micro-steps (at an update boundary); 0 = only at the end");
    f.add("keep_checkpoint_max", &o.keep_checkpoint_max, "checkpoints kept (0 = all)");
    f.add("max_eval_steps", &o.max_eval_steps, "eval batches per evaluation (0 = whole eval set)");
    f.add("do_train", &o.do_train,
          "train (--nodo_train --do_eval: evaluate --init_checkpoint, else the latest checkpoint "
          "in --output_dir, once, into eval_results.txt/.json; not a resume)");
    f.add("do_eval", &o.do_eval, "evaluate online (default: on when --eval_input_file is given)");
    f.add("seed", &o.seed, "seed of initialisation, data order and dropout");
    f.add("threads", &o.threads, "compute threads (0 = all available CPUs)");
    f.add("shuffle_buffer", &o.shuffle_buffer, "record shuffle buffer (0 = file order)");
    f.add("eval_every_samples", &o.eval_every_samples,
          "evaluate every this many training samples (0 = MLPerf formula for the global batch)");
    f.add("target_mlm_accuracy", &o.target_mlm_accuracy, "stop when masked-LM accuracy reaches this");
    f.add("clip_by_global_norm_after_gradient_allreduce",
          &o.clip_by_global_norm_after_gradient_allreduce,
          "clip the averaged gradient (all ranks, all micro-batches of an update) by global norm "
          "1.0 once per update, as MLPerf's optimization.py; default: each micro-batch's own "
          "gradient, per rank");
    f.add("skip_nonfinite_steps", &o.skip_nonfinite_steps,
          "skip micro-steps with a NaN/Inf loss or gradient instead of stopping");
    f.add("skip_nonfinite_limit", &o.skip_nonfinite_limit,
          "with --skip_nonfinite_steps: stop with the error once this many micro-steps in a row were "
          "non-finite (a diverged model); 0 = no limit");
    f.add("warmup_updates_excluded", &o.warmup_updates_excluded,
          "optimizer updates left out of the reported training throughput");
    f.add("skip_corrupt_records", &o.skip_corrupt_records,
          "skip TFRecord records whose length or CRC does not match instead of stopping");
    f.add("allow_missing_weights", &o.allow_missing_weights,
          "eval-only (--nodo_train --do_eval): evaluate even when --init_checkpoint lacks some of "
          "the model's tensors (they keep their initial values); without it that is an error");
    f.add("allow_changed_flags", &o.allow_changed_flags,
          "resume although hyper-parameters differ from the checkpoint's (each change is logged "
          "and appended to changed_flags.jsonl)");
    PrecisionFlags pf;
    pf.add(f, true);
    DeviceFlag device;
    device.add(f);
    // Other scripts' spellings (docs/compatibility.md).
    f.alias("model_dir", "output_dir");
    f.alias("input_files", "input_file");
    f.alias("train_files", "input_file");  // MLPerf TF2's run_pretraining.py
    f.alias("eval_files", "eval_input_file");
    f.alias("stop_threshold", "target_mlm_accuracy");
    f.alias("beta_1", "lamb_beta_1");
    f.alias("beta_2", "lamb_beta_2");
    f.alias("weight_decay_rate", "lamb_weight_decay_rate");
    f.alias("optimizer_type", "optimizer");
    Tf2StepFlags tf2;
    tf2.add(f);
    add_accelerator_flags(f, false);
    NgcTfFlags ngc;
    ngc.add(f);
    NvidiaPtFlags nvpt;
    nvpt.add(f, NvidiaPtFlags::Script::pretraining);
    add_foreign_hints(f);
    // Under mpirun rank 0 alone says what the run is (its notices and the flags without effect).
    const int ranks = dist::world().size();
    dist::quiet_other_ranks();
    if (!f.parse(argc, argv)) return 0;
    const std::unique_ptr<backend::Backend> be = device.backend();  // before any output
    // Every script's --num_accumulation_steps is a count of micro-batches (theirs divide by it).
    if (f.is_set("num_accumulation_steps") && tf2.num_accumulation_steps < 1)
        fail("--num_accumulation_steps: expected >= 1, got {}", tf2.num_accumulation_steps);
    // Which script's command line this is: NVIDIA PyTorch's, NGC TF's, or PerfZero's/MLPerf's.
    const std::string pt_marker = apply_nvidia_pt_pretrain(
        f, nvpt, ngc.marker(f, nvpt.marker(f).empty()), o, ranks);
    const std::string ngc_marker = pt_marker.empty() ? apply_ngc(f, ngc, tf2, o, ranks) : "";
    nvpt.default_json_summary(f, pt_marker);
    apply_tf2(f, tf2, o, !ngc_marker.empty() || !pt_marker.empty(), ranks);
    if (o.optimizer != "lamb" && o.optimizer != "adamw")  // as the user spelled it (NGC's --optimizer_type)
        fail("--{}: expected \"lamb\" or \"{}\", got \"{}\"", f.spelling("optimizer"),
             ngc_marker.empty() ? "adamw" : "adam", o.optimizer);
    if (ngc_marker.empty() && o.clip_by_global_norm_after_gradient_allreduce) {
        o.clip_mode = optim::ClipMode::after_accumulation;
        if (o.optimizer == "adamw" && pt_marker.empty()) {
            o.clip_norm = std::numeric_limits<float>::infinity();
            log::info("--clip_by_global_norm_after_gradient_allreduce with --optimizer=adamw: no "
                      "gradient clipping, as MLPerf's optimization.py (the flag moves the clip into "
                      "its LAMB; AdamWeightDecayOptimizer has none)");
        }
    }
    // PerfZero's / MLPerf TF2's line (its step or accumulation flags): create_optimizer's
    // AdamWeightDecay is Keras Adam with decoupled decay, its constants from the flags
    const bool tf2_line = pt_marker.empty() && ngc_marker.empty() &&
                          (tf2.num_accumulation_steps != 0 ||
                           std::any_of(std::begin(kTf2StepFlags), std::end(kTf2StepFlags),
                                       [&](const char* name) { return f.is_set(name); }));
    if (tf2_line && o.optimizer == "adamw") {
        o.optimizer_variant = optim::OptimizerVariant::keras;
        log::info("PerfZero/MLPerf TF2's AdamWeightDecay: Keras Adam (bias-corrected) after the "
                  "decay w -= lr * {:g} * w, beta_1 {:g}, beta_2 {:g}, epsilon {:g} (its --beta_1, "
                  "--beta_2, --epsilon, --weight_decay_rate)",
                  o.lamb_weight_decay_rate, o.lamb_beta_1, o.lamb_beta_2, std::pow(10.0, o.log_epsilon));
    } else if (o.optimizer == "adamw") {  // google's AdamWeightDecayOptimizer hard-codes its own
        std::vector<std::string> given;
        for (const char* k : {"lamb_beta_1", "lamb_beta_2", "lamb_weight_decay_rate", "log_epsilon"})
            if (f.is_set(k)) given.push_back("--" + f.spelling(k));
        if (!given.empty() && dist::world().rank() == 0)
            log::warn("{}: no effect with --optimizer=adamw (google's AdamWeightDecayOptimizer: beta_1 0.9, "
                      "beta_2 0.999, epsilon 1e-6, weight decay 0.01, as mlperf.log records)",
                      fmt::join(given, ", "));
    }
    // A TF-style name of one of our checkpoints (the eval-only run resolves its own choice)
    if (o.do_train) o.init_checkpoint = model::resolve_checkpoint_name(o.init_checkpoint, "--init_checkpoint");
    if (!nvpt.json_summary.empty()) {
        check_dllogger_path(nvpt.json_summary, {o.bert_config_file, o.input_file, o.eval_input_file,
                                                o.init_checkpoint});
        check_output_not_in_run(nvpt.json_summary, "--json-summary", o.output_dir, "--output_dir",
                                train::run_output_names(), {train::kCheckpointPrefix});
    }
    check_not_directory(o.bert_config_file, "--" + f.spelling("bert_config_file"),
                        "a file (bert_config.json)");
    apply_nvidia_pt_loss_scale(pt_marker, pf.loss_scale);
    o.precision = pf.precision(o.do_train);
    require_precision(be.get(), o.precision);
    o.backend = be.get();
    o.loss_scale = pf.loss_scale;
    o.initial_loss_scale = pf.initial_loss_scale;
    o.loss_scale_window = pf.loss_scale_window;
    if (!f.is_set("do_eval") && !o.eval_input_file.empty()) o.do_eval = true;
    resolve_widths(o);
    nlohmann::json j = f.to_json();
    j["max_seq_length"] = o.max_seq_length;
    j["max_predictions_per_seq"] = o.max_predictions_per_seq;
    j["do_eval"] = o.do_eval;
    // The effective values after the PerfZero/TF2 conversions above.
    j["train_batch_size"] = o.train_batch_size;
    j["steps_per_update"] = o.steps_per_update;
    j["num_train_steps"] = o.num_train_steps;
    j["num_warmup_steps"] = o.num_warmup_steps;
    j["eval_every_samples"] = o.eval_every_samples;
    j["save_checkpoints_steps"] = o.save_checkpoints_steps;
    j["learning_rate"] = o.learning_rate;
    j["optimizer"] = o.optimizer;
    j["optimizer_variant"] = optim::to_string(o.optimizer_variant);
    j["input_file"] = o.input_file;
    j["eval_input_file"] = o.eval_input_file;
    j["output_dir"] = o.output_dir;
    j["init_checkpoint"] = o.init_checkpoint;
    j["poly_power"] = o.poly_power;
    if (o.decay_learning_rate > 0) j["decay_learning_rate"] = o.decay_learning_rate;
    j["schedule_update_counter"] = o.schedule_update_counter;  // 1: micro-steps (TF1's global_step)
    if (o.first_eval_samples > 0) j["first_eval_samples"] = o.first_eval_samples;
    j["keep_checkpoint_max"] = o.keep_checkpoint_max;
    j["clip_by_global_norm_after_gradient_allreduce"] = o.clip_by_global_norm_after_gradient_allreduce;
    // what the line's script makes of it: where the clip applies, its norm (null: no clip)
    j["clip_mode"] = optim::to_string(o.clip_mode);
    j["clip_norm"] = std::isinf(o.clip_norm) ? nlohmann::json(nullptr) : nlohmann::json(o.clip_norm);
    // Which script's meaning the batch and step flags had (docs/compatibility.md).
    // (PerfZero's with its accumulation or step flags: tf2_line, as the start-up line says)
    j["batch_flags_meaning"] = !pt_marker.empty()  ? "nvidia_pytorch"
                               : !ngc_marker.empty() ? "nvidia_ngc_tf"
                               : tf2_line            ? "perfzero_tf2"
                                                     : "mlperf_tf1";
    if (!o.do_train && !o.do_eval)
        fail("--do_train/--do_eval: expected at least one of them to be true, got neither");
    // run_pretraining.py (google's, MLPerf TF1's, NGC TF's) defaults --do_train to False: there a
    // line with --do_eval alone only evaluates. PerfZero/TF2 and NVIDIA PyTorch lines always train.
    if (f.is_set("do_eval") && o.do_eval && !f.is_set("do_train") && pt_marker.empty() &&
        std::none_of(std::begin(kTf2StepFlags), std::end(kTf2StepFlags),
                     [&](const char* name) { return f.is_set(name); }))
        log::warn("--do_eval without --do_train: bertbench trains (its --do_train defaults to "
                  "true), where run_pretraining.py's default is false and its line only "
                  "evaluates; add --nodo_train for that (an eval of the latest checkpoint in "
                  "--output_dir, else --init_checkpoint)");
    // A failed start leaves no empty directory; rank 0 alone removes it (another rank failing
    // would remove it under rank 0, which is writing into it)
    const CreatedDirCleanup cleanup(dist::world().rank() == 0 ? o.output_dir : std::string());
    // MLPerf's eval line (--do_eval --nodo_train --init_checkpoint=... --output_dir=<the training
    // dir>) is not a resume: one evaluation of that checkpoint, its own output files.
    if (!o.do_train) return train::run_pretrain_eval_only(o, j);
    const int status = train::run_pretraining(o, j);
    if (!nvpt.json_summary.empty() && dist::world().rank() == 0) {
        DlloggerRun run{o.output_dir, j, o.seed, nvpt.log_freq, o.train_batch_size / ranks, o.learning_rate};
        run.checkpoint_every = o.save_checkpoints_steps / std::max(o.steps_per_update, 1);
        write_pretrain_dllogger(nvpt.json_summary, run);
    }
    return status;
}

}  // namespace bertbench::cli
