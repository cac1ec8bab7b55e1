// Other scripts' spellings of bertbench's flags, so that their command lines paste unchanged:
// MLPerf TF1 run_pretraining.py (GPU, eval and TPU forms), PerfZero's TF2 BERT benchmark flags,
// NVIDIA's NGC TensorFlow run_pretraining.py, google-research/bert, NVIDIA DLE PyTorch and Intel
// model zoo names. docs/compatibility.md has
// the table per script; tests/cli/reference_cli_test.cpp runs each reference command line.
#pragma once

#include <cstdint>
#include <string>

#include "core/flags.hpp"
#include "train/squad_train.hpp"

namespace bertbench::cli {

// Accelerator-only settings (--use_tpu, --tpu_name, --iterations_per_loop, --steps_per_loop,
// --device_warmup, --all_reduce_alg, --distribution_strategy, --verbosity, ...): accepted, no
// effect on a CPU run. --num_gpus is not among them: the commands take it themselves; nor is
// --horovod without `horovod` (pretrain takes it itself, as NVIDIA's NGC TF script's flag).
void add_accelerator_flags(Flags& flags, bool horovod = true);

// Names of other scripts that bertbench does not accept, with the hint their error gives
// (our spelling, or why not): pretrain's, squad's (run_squad.py's neighbours) and eval's.
void add_foreign_hints(Flags& flags);
void add_squad_hints(Flags& flags);
void add_eval_hints(Flags& flags);  // eval's: every hint names a flag eval itself takes

// google-research/bert tokenization.py's own flag, defined in every script that imports it
// (create_pretraining_data.py, run_squad.py): its default False is bertbench's tokenizer; True
// (keep "[unusedN]" vocabulary tokens whole) is refused by check(), after parsing.
struct TokenizationFlags {
    bool preserve_unused_tokens = false;
    void add(Flags& f);
    void check() const;
};

// google's tokenization.validate_case_matches_checkpoint, which run_squad.py runs first: an
// --init_checkpoint of the form .../<model>/bert_model.ckpt* whose <model> is one of Google's
// released uncased (cased) models with --do_lower_case=False (True) is refused, as its ValueError.
void check_case_matches_checkpoint(bool do_lower_case, const std::string& init_checkpoint);

// PerfZero / TF2 pretraining flags: they count optimizer updates and --train_batch_size is the
// global batch per update. Registered by add(); cmd_pretrain turns them into bertbench's
// micro-step options after parsing.
struct Tf2StepFlags {
    int num_accumulation_steps = 0;   // 0 = not given
    int64_t num_steps_per_epoch = 0;  // updates
    double num_train_epochs = 0;  // an integer (absl); a float on NVIDIA run_pretraining.py's line, unused there
    double warmup_steps = -1;         // updates (a float flag there); -1 = not given
    double epsilon = 0;               // MLPerf TF2's LAMB epsilon (where given: Flags::is_set)
    int64_t stop_steps = 0;           // updates; 0 = not given
    int64_t steps_between_eval = 0;   // updates
    int64_t steps_before_eval_start = 0;  // updates
    int num_gpus = 0;

    void add(Flags& flags);
};

// NVIDIA's NGC TensorFlow run_pretraining.py (DeepLearningExamples TensorFlow/LanguageModeling/
// BERT): --train_batch_size is per GPU and per micro-step, the global batch is train_batch_size x
// --num_accumulation_steps x GPUs (Horovod ranks; here mpirun's), its step flags count optimizer
// updates (its global_step advances once per update), and with --horovod its learning rate is
// multiplied by the rank count. --input_files_dir/--eval_files_dir are directories (comma list)
// whose every file is read. A command line has these meanings only when it carries one of that
// script's own flags (marker()); otherwise --num_accumulation_steps keeps PerfZero's.
struct NgcTfFlags {
    std::string input_files_dir, eval_files_dir;
    bool horovod = false;
    bool allreduce_post_accumulation = false;  // where its clip meets the all-reduce (apply_ngc)

    // Registers the script's flags; call after add_accelerator_flags(flags, false).
    void add(Flags& flags);
    // The first NGC-only flag given, as given ("--input_files_dir", "--nouse_xla"); "" if none.
    // `shared`: also the flags NVIDIA's PyTorch run_pretraining.py has too (--amp,
    // --allreduce_post_accumulation, --init_loss_scale); false on that script's command line.
    std::string marker(const Flags& flags, bool shared = true) const;
};

// NVIDIA's NGC TensorFlow run_squad.py (its scripts/run_squad.sh: --horovod, --amp or --noamp,
// --use_xla or --nouse_xla): google's script with GPU flags, so google's meanings (uncased by
// default, the Estimator's checkpoint for prediction) except where NVIDIA changed them:
// --train_batch_size per GPU (here per rank) and micro-step, the global batch train_batch_size x
// --num_accumulation_steps x ranks, --learning_rate x ranks with --horovod, and its
// AdamWeightDecay's linear decay from lr / (1 - W/T) so that it meets the warm-up's end.
struct NgcTfSquadFlags {
    bool horovod = false;
    int num_accumulation_steps = 1;
    bool export_triton = false;
    int64_t num_eval_iterations = 0;  // 0 = not given

    // Registers the script's own flags; call after add_accelerator_flags(flags, false) (which
    // accepts --use_xla) and NvidiaPtFlags::add (which accepts --amp).
    void add(Flags& flags);
    // The first flag of that script's line given, as given ("--horovod", "--noamp"); "" if none.
    // Its scripts always pass --horovod and --amp or --noamp (absl's spelling; NVIDIA's PyTorch
    // run_squad.py's --amp takes no value).
    std::string marker(const Flags& flags) const;
};

// squad: NGC TF run_squad.py's meanings onto `o` when the command line is that script's (returns
// the marker, "" otherwise: nothing changes), stated in one start-up line.
std::string apply_ngc_tf_squad(const Flags& flags, const NgcTfSquadFlags& n,
                               train::SquadTrainOptions& o, int ranks);

}  // namespace bertbench::cli
