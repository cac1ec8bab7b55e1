// `bertbench eval`: offline pretraining evaluation of a checkpoint (masked-LM accuracy and loss,
// next-sentence accuracy and loss), as run_pretraining.py --do_eval --nodo_train computes them.
#include <omp.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/device_flag.hpp"
#include "cli/precision_flags.hpp"
#include "cli/reference_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
#include "model/checkpoint.hpp"
#include "train/eval_checkpoint.hpp"

namespace bertbench::cli {

int cmd_eval(int argc, char** argv) {
    std::string config_file, preset, checkpoint, input, json_path;
    int eval_batch_size = 8, max_seq_length = 128, max_predictions = 20, threads = 0;
    int64_t max_eval_steps = 100;
    Flags f("eval",
            "Evaluate a pretraining checkpoint on MLPerf-schema TFRecords with dropout off: "
            "masked_lm_accuracy = sum w*[argmax=label] / sum w and masked_lm_loss = sum w*CE / "
            "sum w over every masked position of every example (streaming, as tf.metrics); "
            "next_sentence_accuracy and mean next_sentence_loss. Prints JSON.");
    f.add("bert_config_file", &config_file, "bert_config.json (default: the checkpoint's own)");
    f.add("model", &preset, "instead of --bert_config_file: a preset name");
    f.add("init_checkpoint", &checkpoint,
          "weights: a bertbench safetensors checkpoint, a Hugging Face BERT safetensors file, a "
          "PyTorch .pt/.bin state dict or a TensorFlow checkpoint prefix (PREFIX.index, "
          "PREFIX.data-*; give --bert_config_file)");
    f.add("input_file", &input,
          "eval TFRecords or NVIDIA HDF5 shards (.hdf5/.h5): comma list of files/globs");
    f.add("eval_batch_size", &eval_batch_size, "sequences per eval batch");
    f.add("max_seq_length", &max_seq_length, "tokens per sequence; must equal the TFRecords'");
    f.add("max_predictions_per_seq", &max_predictions, "masked positions per sequence");
    f.add("max_eval_steps", &max_eval_steps, "eval batches (0 = the whole input)");
    f.add("threads", &threads, "compute threads (0 = all available CPUs)");
    f.add("json", &json_path, "also write the metrics JSON to this file");
    bool skip_corrupt_records = false;
    f.add("skip_corrupt_records", &skip_corrupt_records,
          "skip TFRecord records whose length or CRC does not match instead of stopping");
    bool allow_missing_weights = false;
    f.add("allow_missing_weights", &allow_missing_weights,
          "evaluate even when the checkpoint lacks some of the model's tensors (they keep their "
          "initial values: zeros); without it that is an error naming the first");
    f.alias("input_files", "input_file");
    PrecisionFlags pf;
    pf.add(f, false);
    DeviceFlag device;
    device.add(f);
    add_accelerator_flags(f);
    add_eval_hints(f);
    dist::quiet_other_ranks();
    if (!f.parse(argc, argv)) return 0;
    const std::unique_ptr<backend::Backend> be = device.backend();  // before any output
    if (checkpoint.empty()) fail("--init_checkpoint: expected a checkpoint, got none");
    checkpoint = model::resolve_checkpoint_name(checkpoint, "--init_checkpoint");
    const ops::Precision precision = pf.precision(false);
    require_precision(be.get(), precision);
    if (eval_batch_size < 1) fail("--eval_batch_size: expected >= 1, got {}", eval_batch_size);
    const int cpus = sysinfo::cpus_available();
    if (threads < 0 || threads > cpus)
        fail("--threads={}: expected 0..{} (CPUs available to this process{})", threads, cpus,
             sysinfo::cpus_binding_hint());
    omp_set_num_threads(threads > 0 ? threads : cpus);

    const std::vector<std::string> files = expand_globs(input, "input_file");
    if (!json_path.empty()) {
        check_output_file_writable(json_path, "--json");
        std::vector<std::string> inputs = model::checkpoint_files(checkpoint);  // a TF prefix's every file
        inputs.insert(inputs.end(), files.begin(), files.end());
        if (!config_file.empty()) inputs.push_back(config_file);
        check_output_not_input(json_path, "--json", inputs,
                               "--input_file/--init_checkpoint/--bert_config_file");
    }
    train::CheckpointEvalOptions eo;
    eo.checkpoint = checkpoint;
    eo.bert_config_file = config_file;
    eo.model = preset;
    eo.files = files;
    eo.eval_batch_size = eval_batch_size;
    eo.max_seq_length = max_seq_length;
    eo.max_predictions_per_seq = max_predictions;
    eo.max_eval_steps = max_eval_steps;
    eo.skip_corrupt_records = skip_corrupt_records;
    eo.precision = precision;
    eo.backend = be.get();
    eo.allow_missing_weights = allow_missing_weights;
    const train::EvalMetrics m = train::evaluate_checkpoint(eo);
    dist::Comm& comm = dist::world();
    nlohmann::json out = m.to_json();
    out["dtype"] = ops::precision_name(precision);
    out["bf16_emulated"] = ops::bf16_emulated(precision);
    const std::string text = out.dump(2) + "\n";
    if (comm.rank() != 0) return 0;
    std::cout << text;
    if (!json_path.empty()) write_file_atomic(json_path, text);
    return 0;
}

}  // namespace bertbench::cli
