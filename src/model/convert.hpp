// Checkpoint conversion between bertbench safetensors (TF names), Hugging Face BERT safetensors
// (HF names, Linear weights [out, in], config.json beside), TensorFlow tensor bundles
// (PREFIX.index + PREFIX.data-00000-of-00001) and PyTorch checkpoints (read: zip or legacy, HF or
// NVIDIA names, widened to fp32; written: zip, HF names, fp32, for torch.load(weights_only=True)). Tensors are copied byte for byte (HF kernels
// transposed), so safetensors -> TF -> safetensors and safetensors -> HF -> safetensors give back
// the same tensors bit for bit (--to=tf adds TF's scalar int64 `global_step` from ours, dropped
// again on the way back, and writes the directory's `checkpoint` state file, as TF's Saver
// does). Outputs are written atomically; an existing output is an error
// without `overwrite`, and an output that is the input (same inode) always is.
#pragma once

#include <string>
#include <vector>

namespace bertbench::model {

struct ConvertOptions {
    std::string input;             // safetensors, .pt/.bin file or TF prefix (format detected)
    std::string output;            // safetensors file, TF prefix, .pt file, or for hf a file or
                                   // directory
    std::string to;                // "tf" | "safetensors" | "hf" | "pt" | "nvidia_pt"; "" = safetensors when
                                   // output ends in .safetensors, pt for .pt/.bin, else tf
    std::string bert_config_file;  // config for HF's config.json / our metadata (optional when
                                   // the input is a bertbench checkpoint that carries one)
    bool overwrite = false;
    // --to=tf: the optimizer slots' names. "adam": as bertbench keeps them, google's
    // AdamWeightDecayOptimizer's <var>/adam_m, <var>/adam_v; "lamb": MLPerf's lamb_optimizer_v1.py
    // graph's <var>/LAMB, <var>/LAMB_1 and its scalars beta1_power, beta2_power (from
    // bertbench/beta_powers), so that its Saver restores the moments too.
    std::string tf_slots = "adam";
    // --to=tf: also <name>/GradientAccumulator, zeros of its shape and dtype, for every tensor
    // written but bertbench's own, as MLPerf's checkpoint_add_gradacc.py adds them for a run of
    // its run_pretraining.py with --steps_per_update > 1 (GradientAggregationOptimizer's slots).
    bool tf_gradient_accumulators = false;
};

struct ConvertResult {
    std::string from, to;              // format names
    std::vector<std::string> written;  // output files
    size_t tensors = 0;                // tensors written
    std::vector<std::string> skipped;  // "name (why)": DT_STRING, optimizer state for hf, ...
    std::string summary() const;       // one line
};

ConvertResult convert_checkpoint(const ConvertOptions& o);

}  // namespace bertbench::model
