// NVIDIA DeepLearningExamples PyTorch run_pretraining.py / run_squad.py flags (nvidia_pt_flags.hpp).
#include "cli/nvidia_pt_flags.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <vector>

#include "cli/reference_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "dist/comm.hpp"
#include "model/convert.hpp"

namespace bertbench::cli {
namespace {

namespace fs = std::filesystem;

const std::string kGpu = "on a CPU run (fp32 unless --dtype=bf16)";  // NgcTfFlags' --amp reason
const std::string kLauncher =
    "(processes come from mpirun -np N here, not torch.distributed.launch)";

// --input_dir: the files NVIDIA's run_pretraining.py reads, the regular files of the directory
// whose names contain "training", sorted (it then shuffles them per epoch; bertbench reads them in
// this order and shuffles records).
std::string training_files(const std::string& dir) {
    std::error_code ec;
    const fs::file_status st = fs::status(dir, ec);
    if (!fs::exists(st))
        fail("--input_dir={}: expected a directory of HDF5 shards, got no such directory", dir);
    if (!fs::is_directory(st))
        fail("--input_dir={}: expected a directory (NVIDIA's script reads its files named "
             "*training*), got a file (hint: --input_file={} takes files and globs)", dir, dir);
    std::vector<std::string> files;
    size_t others = 0, parquet = 0;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file(ec) && name.find("training") != std::string::npos &&
            !is_own_temporary_or_sidecar(name))
            files.push_back(e.path().string());
        else
            ++others;
        parquet += name.ends_with(".parquet");
    }
    // (NVIDIA's script since 2022 reads LDDL's parquet shards instead: docs/compatibility.md)
    if (files.empty())
        fail("--input_dir={}: expected HDF5 shards whose names contain \"training\" (what NVIDIA's "
             "run_pretraining.py read until its LDDL rewrite), got none ({} other entr{}{})", dir, others,
             others == 1 ? "y" : "ies",
             parquet ? fmt::format(", {} LDDL .parquet: bertbench reads HDF5 or TFRecord shards, not LDDL's", parquet)
                     : "");
    std::sort(files.begin(), files.end());
    std::string list;
    for (const std::string& f : files) {
        if (!list.empty()) list += ',';
        list += list_item_for_file(f, "--input_dir");  // read as listed, never as a pattern
    }
    return list;
}

void one_of(const Flags& f, const char* ours, const char* theirs) {
    if (f.is_set(ours) && f.is_set(theirs))
        fail("--{} and --{}: expected one of them (they set the same thing), got both", ours,
             theirs);
}

// `value` optimizer updates as micro-steps (x k), range-checked.
int64_t micro_steps(const char* flag, int64_t value, int k) {
    if (value < 1 || value > std::numeric_limits<int64_t>::max() / k)
        fail("--{}={}: expected 1..{} optimizer updates", flag, value,
             std::numeric_limits<int64_t>::max() / k);
    return value * k;
}

// NVIDIA's --phase2 --resume_from_checkpoint: phase 2 continues from phase 1's last checkpoint in
// the same --output_dir. Here phase 2 is a run of its own in <output_dir>/phase2 (phase 1's logs,
// results and checkpoints stay as they are; rerunning resumes phase 2) initialised with phase 1's
// weights. Returns the note for the start-up line.
std::string apply_phase2(const NvidiaPtFlags& n, train::PretrainOptions& o) {
    if (o.output_dir.empty()) fail("--phase2: expected --output_dir, phase 1's directory, got none");
    const std::string phase1 = o.output_dir;
    o.output_dir = (fs::path(phase1) / "phase2").string();
    const bool resuming = !train::latest_checkpoint(o.output_dir).empty();
    std::string from = "--init_checkpoint=" + o.init_checkpoint;
    if (o.init_checkpoint.empty()) {
        o.init_checkpoint = train::latest_checkpoint(phase1);
        if (o.init_checkpoint.empty() && !resuming)
            fail("--phase2: expected phase 1's checkpoint in --output_dir={} (NVIDIA's script "
                 "continues from its latest ckpt_<step>.pt), got none (hint: run phase 1 there "
                 "first, or --init_checkpoint=<phase 1's checkpoint>)", phase1);
        from = o.init_checkpoint;
    }
    // NVIDIA's phase 2 loads the checkpoint's optimizer state with its step counts reset
    // (run_pretraining.py: the param groups' `step` zeroed before optimizer.load_state_dict)
    o.init_optimizer_moments = !o.init_checkpoint.empty();
    // Phase 1's own count of updates, when its results say it: NVIDIA numbers phase 2's
    // checkpoints from --phase1_end_step, which should be that count.
    const std::string results = (fs::path(phase1) / "results.json").string();
    std::error_code ec;
    if (fs::is_regular_file(results, ec)) {
        const auto r = json_safe::parse(read_file(results), results, "phase 1's results.json");
        if (r.is_object() && r.contains("updates") && r["updates"].is_number_integer() &&
            r["updates"].get<int64_t>() != n.phase1_end_step && dist::world().rank() == 0)
            log::warn("--phase1_end_step={}: phase 1 in {} ended after {} optimizer updates "
                      "(NVIDIA's script numbers phase 2's checkpoints from --phase1_end_step and "
                      "starts phase 2's schedule at update {} - {}; bertbench starts it at 0)",
                      n.phase1_end_step, phase1, r["updates"].get<int64_t>(), r["updates"].get<int64_t>(),
                      n.phase1_end_step);
    }
    if (!n.resume_from_checkpoint && dist::world().rank() == 0)
        log::warn("--phase2 without --resume_from_checkpoint: NVIDIA's script refuses it (its output "
                  "directory holds phase 1's checkpoints); bertbench goes on as with it");
    // run_pretraining.py zeroes the checkpoint's optimizer step unless --resume_phase2: a rerun of
    // its phase-2 line restarts the warm-up and the bias correction, and the flag on a phase 2 not
    // yet started keeps phase 1's count. bertbench continues a started phase 2, starts a new one at 0.
    if (dist::world().rank() == 0) {
        if (resuming && !n.resume_phase2)
            log::warn("--phase2: phase 2 resumes in {} with its learning-rate schedule and LAMB's bias "
                      "correction continued, as NVIDIA's script does with --resume_phase2; its rerun "
                      "of this line without that flag zeroes the optimizer's step (the warm-up and the "
                      "bias correction start over) and leaves its loss scaler behind", o.output_dir);
        if (!resuming && n.resume_phase2)
            log::warn("--resume_phase2 before phase 2 has a checkpoint in {}: NVIDIA's script would "
                      "keep phase 1's update count in LAMB's step and run phase 2's schedule from it "
                      "(a NaN learning rate where it passes --max_steps, as at the script's "
                      "defaults); bertbench starts phase 2's schedule at update 0", o.output_dir);
    }
    if (resuming) return fmt::format("--phase2: resuming phase 2 in {}", o.output_dir);
    return fmt::format("--phase2: phase 2 trains in {} from {} (its weights and LAMB's moments, "
                       "the bias correction restarting, as NVIDIA's) with steps counted from 0 "
                       "(NVIDIA names its checkpoints ckpt_<{} + step>.pt)",
                       o.output_dir, from, n.phase1_end_step);
}

}  // namespace

void NvidiaPtFlags::add(Flags& f, Script s) {
    script_ = s;
    const bool pt = s == Script::pretraining;
    if (!pt) max_steps = -1, log_freq = 50;  // run_squad.py's defaults: no limit, every 50
    const std::string who = pt ? "NVIDIA PyTorch run_pretraining.py: " : "NVIDIA PyTorch run_squad.py: ";
    f.alias("config_file", "bert_config_file",
            std::string("NVIDIA PyTorch's spelling, which also selects ") +
                (pt ? "run_pretraining.py" : "run_squad.py") +
                "'s defaults and semantics, docs/compatibility.md");
    f.add("gradient_accumulation_steps", &gradient_accumulation_steps,
          who + (pt ? "micro-batches per update: --train_batch_size (per GPU, here per rank) / "
                      "this sequences each (sets --steps_per_update)"
                    : "micro-batches per update; bertbench computes the update's "
                      "--train_batch_size sequences in one batch (the same update)"));
    f.add("json-summary", &json_summary,
          who + "write dllogger's JSON stream (config, loss every --log_freq updates, final "
                "throughput" + (pt ? "" : ", EM/F1") + ") to this file after the run ('' = none; on "
                "the script's line its default, results/dllogger.json)");
    f.add("log_freq", &log_freq, who + "updates between the --json-summary loss entries");
    f.add("max_steps", &max_steps,
          pt ? who + "optimizer updates to train (sets --num_train_steps = this x "
                     "--gradient_accumulation_steps)"
             : who + "-1: whole --num_train_epochs; N > 0: stop after update N + 1, as its "
                     "loop does (the schedule unchanged)");
    if (!pt) {  // a float there (argparse type=float): NaN and inf are no limit, as its test makes them
        f.allow_infinity("max_steps");
        f.allow_nan("max_steps");
    }
    f.add_ignored("bert_model", true,
                  "(the model is --config_file / --bert_config_file; NVIDIA's scripts use the "
                  "name for caches)");
    f.add_ignored("fp16", false, kGpu);
    f.add_ignored("local_rank", true, kLauncher);
    f.add_ignored("use_env", false, kLauncher);
    f.add_hint("resume_step",
               "not supported: bertbench resumes from the latest checkpoint in --output_dir");
    f.add_ignored("profile", false, "(bertbench bench --profile profiles the steps)");
    if (pt) {
        f.add_ignored("profile-start", true, "(the step --profile starts at; parsed and never read there)");
        f.add("input_dir", &input_dir,
              who + "directory of HDF5 shards; its files named *training* are read (sets "
                    "--input_file)");
        f.add("warmup_proportion", &warmup_proportion,
              who + "warm-up over this fraction of --max_steps (sets --num_warmup_steps)");
        f.add("num_steps_per_checkpoint", &num_steps_per_checkpoint,
              who + "optimizer updates between checkpoints (sets --save_checkpoints_steps)");
        f.add("skip_checkpoint", &skip_checkpoint,
              who + "no checkpoints during the run (bertbench still writes the final one, to "
                    "resume from)");
        f.add("steps_this_run", &steps_this_run,
              who + "stop after this optimizer update (of the phase), the schedule unchanged "
                    "(< 0, its default -1: --max_steps)");
        f.add("resume_from_checkpoint", &resume_from_checkpoint,
              who + "resume from the latest checkpoint in --output_dir (bertbench always does)");
        f.add("resume_phase2", &resume_phase2,
              who + "resume phase 2 with its schedule and LAMB's bias correction continued (bertbench "
                    "always does; without it NVIDIA's rerun restarts both)");
        f.add("phase2", &phase2,
              who + "phase 2: trains in <output_dir>/phase2 from phase 1's latest checkpoint in "
                    "--output_dir");
        f.add("phase1_end_step", &phase1_end_step,
              who + "phase 1's optimizer updates (checked against phase 1's results.json)");
        f.add_ignored("allreduce_post_accumulation_fp16", false,
                      "(gradients are all-reduced in fp32)");
        f.add_ignored("checkpoint_activations", false,
                      "(activation memory is planned once; nothing is recomputed)");
        f.add_ignored("disable_progress_bar", false,
                      "(progress is one line on a terminal, plain lines otherwise)");
        f.add_ignored("vocab_file", true, "(the records are already tokenized)");
        // The current script's (HEAD) flags, passed by its run_pretraining.sh: speed only.
        f.add_ignored("num_workers", true, "(the records are read ahead by one thread)");
        f.add_ignored("disable_jit_fusions", false, kGpu);
        f.add_ignored("cuda_graphs", false, kGpu);
        f.add_ignored("no_dense_sequence_output", false,
                      "(the MLM head runs on the masked positions only: the same results)");
        for (const char* name : {"train_file", "predict_file", "do_predict", "predict_batch_size",
                                 "eval_script", "cache_dir", "skip_cache", "no_cuda"})
            f.add_hint(name, "run_squad.py's flag: bertbench squad takes it");
    } else {
        f.add_ignored("amp", false, kGpu);
        f.add_ignored("no_cuda", false, kGpu);
        f.add_ignored("disable-progress-bar", false,
                      "(progress is one line on a terminal, plain lines otherwise)");
        f.add("skip_checkpoint", &skip_checkpoint,
              who + "do not write pytorch_model.bin (the fine-tuned model as a PyTorch state "
                    "dict) in --output_dir after --do_train");
        f.add_ignored("do_eval", false,
                      "(the official metric is built in: computed whenever --predict_file has "
                      "answers)");
        f.add_ignored("eval_script", true,
                      "(the official metric is built in: computed whenever --predict_file has "
                      "answers)");
        f.add_ignored("cache_dir", true,
                      "(no feature cache is written beside the data: the features go to "
                      "train.tf_record in --output_dir)");
        f.add_ignored("skip_cache", false,
                      "(no feature cache is written beside the data: the features go to "
                      "train.tf_record in --output_dir)");
        for (const char* name : {"input_dir", "phase2", "phase1_end_step", "num_steps_per_checkpoint",
                                 "steps_this_run", "resume_from_checkpoint"})
            f.add_hint(name, "run_pretraining.py's flag: bertbench pretrain takes it");
    }
}

void NvidiaPtFlags::default_json_summary(const Flags& f, const std::string& m) {
    if (!m.empty() && !f.is_set("json-summary")) json_summary = "results/dllogger.json";
}

std::string NvidiaPtFlags::marker(const Flags& f) const {
    // The flags add() registers for the script (set), then the accepted ones without effect.
    static const std::vector<const char*> pt_set{
        "input_dir", "max_steps", "warmup_proportion", "gradient_accumulation_steps",
        "num_steps_per_checkpoint", "skip_checkpoint", "steps_this_run", "resume_from_checkpoint",
        "resume_phase2", "phase2", "phase1_end_step", "json-summary", "log_freq"};
    static const std::vector<const char*> squad_set{"max_steps", "gradient_accumulation_steps",
                                                    "json-summary", "log_freq", "skip_checkpoint"};
    static const std::vector<const char*> pt_ignored{
        "bert_model", "fp16", "local_rank", "use_env", "allreduce_post_accumulation_fp16",
        "checkpoint_activations", "disable_progress_bar", "vocab_file", "num_workers",
        "disable_jit_fusions", "cuda_graphs", "no_dense_sequence_output", "profile",
        "profile-start"};
    static const std::vector<const char*> squad_ignored{
        "bert_model", "fp16", "local_rank", "use_env", "amp", "no_cuda", "disable-progress-bar",
        "do_eval", "eval_script", "cache_dir", "skip_cache", "profile"};
    const bool pt = script_ == Script::pretraining;
    // NGC TF's run_squad.py line (its scripts always pass --horovod and --amp or --noamp): this
    // script's step flags on it would be dropped, so they are an error (one script, one meaning)
    if (const std::string ngc = pt ? "" : NgcTfSquadFlags{}.marker(f); !ngc.empty()) {
        for (const char* name : {"max_steps", "gradient_accumulation_steps"})
            if (f.is_set(name))
                fail("--{}: expected the flags of one script, got NVIDIA PyTorch run_squad.py's --{} on NVIDIA "
                     "NGC TF run_squad.py's command line ({} given; its --num_accumulation_steps sets the "
                     "micro-steps per update, --num_train_epochs the length)",
                     name, name, ngc);
        return "";
    }
    for (const char* name : pt ? pt_set : squad_set)
        if (f.is_set(name)) return std::string("--") + name;
    if (f.is_set("bert_config_file") && f.spelling("bert_config_file") == "config_file")
        return "--config_file";
    for (const char* name : pt ? pt_ignored : squad_ignored)
        if (const std::string g = f.ignored_given(name); !g.empty()) return g;
    return "";
}

std::string apply_nvidia_pt_pretrain(const Flags& f, const NvidiaPtFlags& n,
                                     const std::string& ngc_marker, train::PretrainOptions& o,
                                     int ranks) {
    const std::string m = n.marker(f);
    if (m.empty()) return "";
    if (!ngc_marker.empty())
        fail("{}: expected the flags of one script, got NVIDIA NGC TF's {} on NVIDIA PyTorch "
             "run_pretraining.py's command line ({} given)", ngc_marker, ngc_marker, m);
    // its own --num_train_epochs (a float) is parsed and never read there: no effect
    if (f.is_set("num_train_epochs"))
        log::info("--num_train_epochs: no effect (NVIDIA run_pretraining.py parses it and never reads it; "
                  "--max_steps sets the length)");
    // NGC TF's flag too, where it moves the clip: here the averaged gradient is clipped either way
    if (f.is_set("allreduce_post_accumulation"))
        log::info("--allreduce_post_accumulation: no effect on NVIDIA PyTorch run_pretraining.py's line (its "
                  "gradient is averaged over the ranks, then clipped, with or without it)");
    for (const char* other : {"num_accumulation_steps", "num_steps_per_epoch",
                              "warmup_steps", "stop_steps", "steps_between_eval",
                              "steps_before_eval_start", "steps_per_update"})
        if (f.is_set(other))
            fail("--{}: expected the flags of one script, got PerfZero/MLPerf's --{} on NVIDIA "
                 "PyTorch run_pretraining.py's command line ({} given; there "
                 "--gradient_accumulation_steps splits the batch and --max_steps, "
                 "--warmup_proportion set the schedule in updates)", other, other, m);
    // setup_training's `if not args.do_train: raise ValueError(" \`do_train\` must be True.")`; here
    // training is the default (--nodo_train --do_eval: an eval alone)
    if (!f.is_set("do_train") && dist::world().rank() == 0)
        log::warn("--do_train not given: NVIDIA PyTorch run_pretraining.py raises \"`do_train` must be True\" "
                  "without it ({} given); bertbench trains, its default", m);
    // `training_steps % (args.log_freq * args.gradient_accumulation_steps)` divides by it
    if (!(n.log_freq > 0 && std::isfinite(n.log_freq)))
        fail("--log_freq={}: expected a positive number (NVIDIA run_pretraining.py takes a step modulo it)", n.log_freq);
    one_of(f, "input_file", "input_dir");
    one_of(f, "num_train_steps", "max_steps");
    one_of(f, "num_warmup_steps", "warmup_proportion");
    one_of(f, "save_checkpoints_steps", "num_steps_per_checkpoint");
    one_of(f, "save_checkpoints_steps", "skip_checkpoint");
    const int k = n.gradient_accumulation_steps;
    if (k < 1) fail("--gradient_accumulation_steps={}: expected >= 1", k);
    if (o.train_batch_size < 1 || o.train_batch_size % k != 0)
        fail("--train_batch_size={}: expected a positive multiple of --gradient_accumulation_steps="
             "{} (NVIDIA PyTorch: the batch per GPU and update, split into that many "
             "micro-batches)", o.train_batch_size, k);
    const int per_rank = o.train_batch_size / k;
    if (per_rank > std::numeric_limits<int>::max() / ranks)
        fail("--train_batch_size={}: expected at most {} per rank", o.train_batch_size,
             std::numeric_limits<int>::max() / ranks);
    const int per_update = o.train_batch_size;
    o.train_batch_size = per_rank * ranks;
    o.batch_per_rank = true;
    o.steps_per_update = k;
    o.batch_hint = "a larger --gradient_accumulation_steps keeps --train_batch_size per update, in smaller micro-batches";
    o.stop_flag = "--steps_this_run";
    std::vector<std::string> notes;
    if (!f.is_set("seed")) {
        o.seed = 42;
        notes.push_back("--seed=42 (its default)");
    }
    if (!n.input_dir.empty()) {
        o.input_file = training_files(n.input_dir);
        notes.push_back(fmt::format("--input_dir: its {} *training* file(s)",
                                    std::count(o.input_file.begin(), o.input_file.end(), ',') + 1));
    }
    // Its loader takes a shard's arrays as they are (its defaults, 512 and 80, check nothing)
    if (!f.is_set("max_seq_length") || !f.is_set("max_predictions_per_seq")) {
        if (!f.is_set("max_seq_length")) o.max_seq_length = 0;
        if (!f.is_set("max_predictions_per_seq")) o.max_predictions_per_seq = 0;
        notes.push_back("the sequence length and predictions per row from the data, as its loader takes them");
    }
    int64_t updates = o.num_train_steps / k;
    // Its rate itself, per update, unless bertbench's own schedule flags were given
    const bool poly_warmup = !f.is_set("num_train_steps") && !f.is_set("num_warmup_steps") && !f.is_set("poly_power");
    if (!f.is_set("num_train_steps")) {
        if (!(n.max_steps >= 1 && n.max_steps < 9e15))
            fail("--max_steps={}: expected a number of optimizer updates >= 1", n.max_steps);
        updates = static_cast<int64_t>(std::ceil(n.max_steps));
        o.num_train_steps = micro_steps("max_steps", updates, k);
        notes.push_back(fmt::format("--max_steps={} updates{} -> --num_train_steps={}", updates,
                                    n.max_steps != static_cast<double>(updates)
                                        ? fmt::format(" (its {} rounded up{})", n.max_steps,
                                                      poly_warmup ? fmt::format("; its schedule's T stays {}", n.max_steps) : "")
                                        : "",
                                    o.num_train_steps));
    }
    if (!f.is_set("num_warmup_steps")) {
        if (!(n.warmup_proportion >= 0 && n.warmup_proportion <= 1))
            fail("--warmup_proportion={}: expected a fraction in [0, 1]", n.warmup_proportion);
        o.num_warmup_steps = std::llround(n.warmup_proportion * static_cast<double>(updates)) * k;
        notes.push_back(fmt::format("--warmup_proportion={} -> --num_warmup_steps={}",
                                    n.warmup_proportion, o.num_warmup_steps));
    }
    if (!f.is_set("poly_power")) o.poly_power = 0.5;
    if (poly_warmup) {
        o.nvidia_poly_warmup = {n.max_steps, n.warmup_proportion, 0.5, k};
        notes.push_back("the rate as its PolyWarmUpScheduler: update u of --max_steps=T gets lr x (u/T) / "
                        "warmup_proportion, then lr x (1 - u/T)^0.5");
    } else {
        notes.push_back(fmt::format("bertbench's own --{} given: not its PolyWarmUpScheduler but TF's schedule, in "
                                    "micro-steps (a linear warm-up over --num_warmup_steps={}, then polynomial decay "
                                    "to --num_train_steps={} with power {})",
                                    f.is_set("num_warmup_steps") ? "num_warmup_steps"
                                    : f.is_set("num_train_steps") ? "num_train_steps"
                                                                  : "poly_power",
                                    o.num_warmup_steps, o.num_train_steps, o.poly_power));
    }
    if (!f.is_set("save_checkpoints_steps")) {
        o.save_checkpoints_steps =
            n.skip_checkpoint ? 0 : micro_steps("num_steps_per_checkpoint", n.num_steps_per_checkpoint, k);
        o.save_at_multiples = true;  // its updates that are multiples of N, a resumed run's too
        notes.push_back(n.skip_checkpoint
                            ? std::string("--skip_checkpoint: only the final checkpoint")
                            : fmt::format("a checkpoint at the updates that are multiples of {} -> "
                                          "--save_checkpoints_steps={} at its multiples",
                                          n.num_steps_per_checkpoint, o.save_checkpoints_steps));
    }
    if (!f.is_set("keep_checkpoint_max")) {
        o.keep_checkpoint_max = 3;
        notes.push_back("the last 3 kept (--keep_checkpoint_max=3)");
    }
    if (n.steps_this_run >= 0) {  // `if args.steps_this_run < 0: args.steps_this_run = args.max_steps`
        o.stop_steps = micro_steps("steps_this_run", n.steps_this_run, k);
        notes.push_back(fmt::format("--steps_this_run={} -> stop at micro-step {}",
                                    n.steps_this_run, o.stop_steps));
        if (o.stop_steps > o.num_train_steps && dist::world().rank() == 0)
            log::warn("--steps_this_run={}: past the run's end, micro-step {}, where bertbench stops "
                      "(NVIDIA's script trains on past --max_steps, at a NaN learning rate)",
                      n.steps_this_run, o.num_train_steps);
    }
    if (!f.is_set("clip_by_global_norm_after_gradient_allreduce")) {
        o.clip_by_global_norm_after_gradient_allreduce = true;
        notes.push_back("FusedLAMB's clip of the averaged gradient to norm 1 "
                        "(--clip_by_global_norm_after_gradient_allreduce)");
    }
    if (n.phase2) {
        notes.push_back(apply_phase2(n, o));
    } else if (!o.init_checkpoint.empty() && !n.resume_from_checkpoint) {
        // run_pretraining.py reads --init_checkpoint only in its resume_from_checkpoint branch
        if (dist::world().rank() == 0)
            log::warn("--init_checkpoint={} without --resume_from_checkpoint: not read, as "
                      "NVIDIA's run_pretraining.py does not read it then; the model starts from "
                      "random weights (add --resume_from_checkpoint to start from the weights and "
                      "LAMB's moments of a bertbench checkpoint; a PyTorch file's weights alone: "
                      "bertbench's own pretrain line with --init_checkpoint)", o.init_checkpoint);
        o.init_checkpoint.clear();
    } else if (!o.init_checkpoint.empty()) {
        o.init_optimizer_moments = true;
        notes.push_back("--resume_from_checkpoint --init_checkpoint: its weights and LAMB's "
                        "moments, the steps and the bias correction from 0, as NVIDIA's (a "
                        "checkpoint in --output_dir is resumed instead: bertbench always resumes)");
    } else if (n.resume_from_checkpoint) {
        notes.push_back("--resume_from_checkpoint: from the latest checkpoint in --output_dir, "
                        "if any (bertbench always resumes)");
    }
    std::string said;
    for (const std::string& s : notes) said += "; " + s;
    log::info("NVIDIA PyTorch run_pretraining.py meaning of the flags ({} given): "
              "--train_batch_size={} per GPU (here per rank) and update / "
              "--gradient_accumulation_steps={} = micro-batches of {} x {} rank{} = global batch "
              "{} per update (bertbench --train_batch_size={} --steps_per_update={}){}",
              m, per_update, k, per_rank, ranks, ranks == 1 ? "" : "s",
              int64_t{o.train_batch_size} * k, o.train_batch_size, k, said);
    return m;
}

std::string apply_nvidia_pt_squad(const Flags& f, const NvidiaPtFlags& n,
                                  train::SquadTrainOptions& o, bool& do_lower_case, int ranks) {
    const std::string m = n.marker(f);
    if (m.empty()) return "";
    if (o.init_checkpoint.empty())  // else it fine-tuned random weights without a word
        fail("--init_checkpoint: required on NVIDIA's run_squad.py line ({} given; its argparse has "
             "required=True): the pretrained checkpoint to fine-tune, or the fine-tuned one to predict with", m);
    const int k = n.gradient_accumulation_steps;
    if (k < 1) fail("--gradient_accumulation_steps={}: expected >= 1", k);
    // run_squad.py's --log_freq is an int (run_pretraining.py's a float), and it divides by it
    if (f.is_set("log_freq") && !(n.log_freq >= 1 && n.log_freq == std::floor(n.log_freq)))
        fail("--log_freq={}: expected a positive integer (NVIDIA run_squad.py's argparse type=int; its "
             "`step % args.log_freq` divides by it)", n.log_freq);
    const int per_update = o.train_batch_size / k * k;  // run_squad.py floors the micro-batch
    if (per_update < 1 || per_update > std::numeric_limits<int>::max() / ranks)
        fail("--train_batch_size={}: expected {}..{} (NVIDIA run_squad.py: sequences per GPU and "
             "update, at least one per micro-batch)", o.train_batch_size, k,
             std::numeric_limits<int>::max() / ranks);
    const int given = o.train_batch_size;
    o.train_batch_size = per_update * ranks;
    o.batch_per_rank = true;
    o.nvidia.micro_batch = per_update / k;
    o.nvidia.accumulation = k;
    o.nvidia.ranks = ranks;
    // run_squad.py's `if args.max_steps > 0 and global_step > args.max_steps: break`: <= 0, NaN,
    // inf (and any count no run reaches) are no limit
    o.nvidia.max_steps = n.max_steps > 0 && n.max_steps < 9e15 ? n.max_steps : -1;
    o.nvidia.fused_adam = !f.ignored_given("fp16").empty() || !f.ignored_given("amp").empty();
    std::string notes;
    if (!f.is_set("do_lower_case")) {
        do_lower_case = false;
        notes += "; cased (NVIDIA's run_squad.py lower-cases only with --do_lower_case)";
    }
    if (!f.is_set("seed")) {
        o.seed = 42;
        notes += "; --seed=42 (its default)";
    }
    log::info("NVIDIA PyTorch run_squad.py meaning of the flags ({} given): --train_batch_size={} "
              "per GPU (here per rank) and update{} x {} rank{} = {} sequences per update, computed "
              "as one batch (bertbench --train_batch_size={}); whole epochs over the features and "
              "its warmup_linear schedule with {}; prediction without --do_train uses "
              "--init_checkpoint, as that script{}",
              m, given, k == 1 ? "" : fmt::format(" ({} micro-batches of {})", k, per_update / k),
              ranks, ranks == 1 ? "" : "s", o.train_batch_size, o.train_batch_size,
              o.nvidia.fused_adam ? "FusedAdam (--fp16)" : "BertAdam", notes);
    return m;
}

void apply_nvidia_pt_loss_scale(const std::string& marker, std::string& loss_scale) {
    // argparse's type=float: "0", "0.0", "0." and "0e0" are all its default, 0
    double v = 1;
    if (marker.empty() || (!loss_scale.empty() && !python_float(loss_scale, &v)) || v != 0) return;
    log::info("--loss_scale={} (NVIDIA's dynamic scaling for --fp16): no loss scaling on this "
              "run (fp32 unless --dtype=bf16, which needs none)", loss_scale);
    loss_scale.clear();
}

void write_nvidia_squad_model(const std::string& checkpoint, const std::string& output_dir,
                              const std::string& bert_config_file) {
    model::ConvertOptions c;
    c.input = checkpoint;
    c.output = (fs::path(output_dir) / "pytorch_model.bin").string();
    c.to = "nvidia_pt";  // {"model": state_dict()} of its modeling.py, the vocabulary padded to 8
    c.bert_config_file = bert_config_file;
    c.overwrite = true;  // run_squad.py rewrites it after every fine-tuning
    model::convert_checkpoint(c);
    log::info("wrote {}: the fine-tuned model as run_squad.py saves it ({{\"model\": state_dict}} in its "
              "modeling.py's names and padded vocabulary, which its own --init_checkpoint loads, as this eval "
              "line does; --skip_checkpoint: not written)", c.output);
}

}  // namespace bertbench::cli
