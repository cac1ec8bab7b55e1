// `bertbench pretrain`: MLPerf BERT pretraining (run_pretraining.py flags) with online evaluation
// to a target masked-LM accuracy, checkpoints and exact resume. The loop: src/train/pretrain.cpp.
#include "cli/commands.hpp"
#include "core/flags.hpp"
#include "train/pretrain.hpp"

namespace bertbench::cli {

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
    f.add("input_file", &o.input_file, "training TFRecords: comma list of files/globs");
    f.add("eval_input_file", &o.eval_input_file,
          "eval TFRecords (comma list/globs); empty = --input_file, as the reference");
    f.add("output_dir", &o.output_dir, "directory for checkpoints and logs (created; resumed from)");
    f.add("init_checkpoint", &o.init_checkpoint,
          "initial weights: a bertbench safetensors checkpoint (TF names) or a Hugging Face BERT "
          "safetensors file; optimizer state starts at zero");
    f.add("train_batch_size", &o.train_batch_size, "sequences per micro-batch");
    f.add("eval_batch_size", &o.eval_batch_size, "sequences per eval batch");
    f.add("max_seq_length", &o.max_seq_length, "tokens per sequence; must equal the TFRecords'");
    f.add("max_predictions_per_seq", &o.max_predictions_per_seq,
          "masked positions per sequence; must equal the TFRecords'");
    f.add("num_train_steps", &o.num_train_steps, "micro-steps to train (LR decays to 0 here)");
    f.add("num_warmup_steps", &o.num_warmup_steps, "linear warm-up length, micro-steps");
    f.add("start_warmup_step", &o.start_warmup_step, "step where warm-up starts (may be negative)");
    f.add("learning_rate", &o.learning_rate, "peak learning rate");
    f.add("poly_power", &o.poly_power, "power of the polynomial decay");
    f.add("optimizer", &o.optimizer, "lamb | adamw (adamw uses the reference's fixed betas/eps/wd)");
    f.add("lamb_beta_1", &o.lamb_beta_1, "LAMB beta_1");
    f.add("lamb_beta_2", &o.lamb_beta_2, "LAMB beta_2");
    f.add("lamb_weight_decay_rate", &o.lamb_weight_decay_rate, "LAMB weight decay rate");
    f.add("log_epsilon", &o.log_epsilon, "LAMB epsilon = 10^log_epsilon");
    f.add("steps_per_update", &o.steps_per_update, "gradient accumulation: micro-steps per update");
    f.add("save_checkpoints_steps", &o.save_checkpoints_steps,
          "checkpoint every this many micro-steps (at an update boundary); 0 = only at the end");
    f.add("keep_checkpoint_max", &o.keep_checkpoint_max, "checkpoints kept (0 = all)");
    f.add("max_eval_steps", &o.max_eval_steps, "eval batches per evaluation (0 = whole eval set)");
    f.add("do_train", &o.do_train, "train (--nodo_train: evaluate the initial weights only)");
    f.add("do_eval", &o.do_eval, "evaluate online (default: on when --eval_input_file is given)");
    f.add("seed", &o.seed, "seed of initialisation, data order and dropout");
    f.add("threads", &o.threads, "compute threads (0 = all available CPUs)");
    f.add("shuffle_buffer", &o.shuffle_buffer, "record shuffle buffer (0 = file order)");
    f.add("eval_every_samples", &o.eval_every_samples,
          "evaluate every this many training samples (0 = MLPerf formula for the global batch)");
    f.add("target_mlm_accuracy", &o.target_mlm_accuracy, "stop when masked-LM accuracy reaches this");
    f.add("skip_nonfinite_steps", &o.skip_nonfinite_steps,
          "skip micro-steps with a NaN/Inf loss or gradient instead of stopping");
    f.add("warmup_updates_excluded", &o.warmup_updates_excluded,
          "optimizer updates left out of the reported training throughput");
    if (!f.parse(argc, argv)) return 0;
    if (!f.is_set("do_eval") && !o.eval_input_file.empty()) o.do_eval = true;
    nlohmann::json j = f.to_json();
    j["do_eval"] = o.do_eval;
    return train::run_pretraining(o, j);
}

}  // namespace bertbench::cli
