// NVIDIA DeepLearningExamples PyTorch BERT (PyTorch/LanguageModeling/BERT, the scripts the TBD
// suite runs): run_pretraining.py's flags on `pretrain` and run_squad.py's on `squad`, each
// accepted with its meaning, converted with one start-up line, or refused naming the equivalent.
// In those scripts --train_batch_size is per GPU (torch.distributed.launch process; here per
// mpirun rank) and per optimizer update, divided by --gradient_accumulation_steps into
// micro-batches; --max_steps, --num_steps_per_checkpoint and --steps_this_run count updates; the
// schedule is PolyWarmUpScheduler (linear warm-up over warmup_proportion x max_steps, then decay
// with power 0.5); FusedLAMB clips the averaged gradient to global norm 1. A command line has
// these meanings when it carries one of those scripts' own flags (marker()). docs/compatibility.md.
#pragma once

#include <cstdint>
#include <string>

#include "core/flags.hpp"
#include "train/pretrain.hpp"
#include "train/squad_train.hpp"

namespace bertbench::cli {

struct NvidiaPtFlags {
    enum class Script { pretraining, squad };
    std::string input_dir, json_summary;
    double max_steps = 1000;              // optimizer updates (a float in NVIDIA's argparse)
    double warmup_proportion = 0.01;      // run_pretraining.py's (squad: run_squad.py's own flag)
    double log_freq = 1;                  // updates between --json-summary loss lines
    int gradient_accumulation_steps = 1;
    int64_t num_steps_per_checkpoint = 100;
    int64_t phase1_end_step = 7038;
    int64_t steps_this_run = -1;
    bool skip_checkpoint = false, phase2 = false, resume_from_checkpoint = false, resume_phase2 = false;

    // Registers the script's flags on a command that has the other bertbench flags already
    // (bert_config_file, init_checkpoint, ...); call after add_accelerator_flags and, for
    // pretrain, NgcTfFlags::add (the flags both NVIDIA scripts share are registered there).
    void add(Flags& flags, Script script);
    // The first flag only NVIDIA's PyTorch scripts have, as given ("--input_dir"); "" if none, and
    // for squad "" on NGC TF's run_squad.py line (--horovod, --use_xla, absl's --noamp/--amp=...),
    // which shares --amp with PyTorch's but keeps google's meanings (uncased by default).
    std::string marker(const Flags& flags) const;
    // On the script's own line (`marker` not ""): its --json-summary default, results/dllogger.json
    // (both scripts write it unless given another path; '' = none).
    void default_json_summary(const Flags& flags, const std::string& marker);

private:
    Script script_ = Script::pretraining;
};

// pretrain: NVIDIA run_pretraining.py's meanings onto `o` when the command line is that script's
// (returns the marker, "" otherwise: nothing changes): --input_dir's training shards, the batch
// per rank and update over --gradient_accumulation_steps, the update-counted step flags, the
// schedule, checkpoints and clipping; --phase2 trains in <output_dir>/phase2 from phase 1's latest
// checkpoint. Every conversion is stated in one start-up line (rank 0). `ngc_marker` is NGC TF's
// marker: a line with both scripts' own flags is an error.
std::string apply_nvidia_pt_pretrain(const Flags& flags, const NvidiaPtFlags& n,
                                     const std::string& ngc_marker, train::PretrainOptions& o,
                                     int ranks);

// squad: run_squad.py's meanings (returns the marker, "" otherwise: nothing changes):
// --train_batch_size per rank and update (the update's batch is one micro-step here), the run's
// length, schedule and optimizer as that script's (o.nvidia: whole epochs over the features,
// --max_steps, warmup_linear, BertAdam or FusedAdam with --fp16/--amp), --seed 42 and
// --do_lower_case off unless given; with the marker, prediction without --do_train uses
// --init_checkpoint (NVIDIA's script always loads it) rather than the latest checkpoint in
// --output_dir.
std::string apply_nvidia_pt_squad(const Flags& flags, const NvidiaPtFlags& n,
                                  train::SquadTrainOptions& o, bool& do_lower_case, int ranks);

// run_squad.py's pytorch_model.bin after fine-tuning: `checkpoint` (the run's last) as a PyTorch
// state dict (HF names, qa_outputs for the span head) in `output_dir`, overwritten as the script
// does. Called on NVIDIA's command line unless --skip_checkpoint.
void write_nvidia_squad_model(const std::string& checkpoint, const std::string& output_dir,
                              const std::string& bert_config_file);

// Both scripts' --loss_scale=0 (their default: dynamic scaling under --fp16) on their command
// line: no loss scaling ('' here, the fp32/bf16 run needs none), said once; other values as is.
void apply_nvidia_pt_loss_scale(const std::string& marker, std::string& loss_scale);

}  // namespace bertbench::cli
