// `bertbench convert`: checkpoints between bertbench safetensors (TF names), Hugging Face BERT
// safetensors (+ config.json) and TensorFlow tensor bundles (model/convert.hpp).
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "model/convert.hpp"

namespace bertbench::cli {

int cmd_convert(int argc, char** argv) {
    model::ConvertOptions o;
    Flags f("convert",
            "Convert a checkpoint between bertbench safetensors (TF names), Hugging Face BERT "
            "safetensors (HF names, Linear weights [out, in], config.json beside), TensorFlow "
            "TF1/TF2 checkpoints (PREFIX.index + PREFIX.data-00000-of-00001) and PyTorch files "
            "(pytorch_model.bin, NVIDIA's ckpt_N.pt; zip or legacy, read without running any of "
            "their code). The input format is detected from its magic bytes. Tensors are copied "
            "bit for bit (HF kernels transposed; PyTorch fp16/bf16 widened to fp32); for --to=hf "
            "and --to=pt/nvidia_pt only the model's weights are written, optimizer state is skipped.");
    f.add("input", &o.input,
          "checkpoint: a .safetensors file, a PyTorch .pt/.bin file or a TensorFlow checkpoint "
          "prefix");
    f.add("output", &o.output,
          "output: TF prefix, .safetensors file, .pt/.bin file (--to=pt: an fp32 state dict "
          "with HF names, the decoder tied, for torch.load(f, weights_only=True), "
          "BertForPreTraining.load_state_dict or --init_checkpoint=; --to=nvidia_pt: NVIDIA "
          "DeepLearningExamples' {'model': ...} with its dense_act names and vocabulary padded to a "
          "multiple of 8, for its run_squad.py --init_checkpoint), or for --to=hf a .safetensors "
          "file or a directory (model.safetensors + config.json)");
    f.add("to", &o.to,
          "tf | safetensors | hf | pt | nvidia_pt (default: safetensors when --output ends in "
          ".safetensors, pt for .pt, .pth or .bin, in any case; else tf)");
    f.add("bert_config_file", &o.bert_config_file,
          "bert_config.json: needed for --to=hf unless the input is a bertbench checkpoint; "
          "with --to=safetensors it is stored in the checkpoint's metadata; with it, the rows "
          "NVIDIA pads the vocabulary with are dropped");
    f.add("tf_slots", &o.tf_slots,
          "--to=tf: the optimizer slots' names: adam (google's AdamWeightDecayOptimizer: "
          "<var>/adam_m, <var>/adam_v) or lamb (MLPerf's lamb_optimizer_v1.py: <var>/LAMB, "
          "<var>/LAMB_1, beta1_power, beta2_power), as the graph that restores them names them");
    f.add("tf_gradient_accumulators", &o.tf_gradient_accumulators,
          "--to=tf: also <var>/GradientAccumulator (zeros) beside every variable, as MLPerf's "
          "checkpoint_add_gradacc.py prepares a checkpoint for run_pretraining.py "
          "--steps_per_update > 1");
    f.add("overwrite", &o.overwrite, "replace existing output files");
    if (!f.parse(argc, argv)) return 0;
    install_temporary_cleanup();  // a stop by signal removes the outputs' temporaries (no GEMM runs here)
    const model::ConvertResult r = model::convert_checkpoint(o);
    std::cout << r.summary() << "\n";
    return 0;
}

}  // namespace bertbench::cli
