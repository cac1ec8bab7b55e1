// `convert`'s checks of where it writes, before any tensor is read, the TF output's step counter
// and the HF output's config.json (model/convert.cpp's).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace bertbench::model {

// --output of --to=tf: a prefix (PREFIX.index, PREFIX.data-*). Error naming it when it is a
// directory, ends in '/', or is a stream (a device, a FIFO, /dev/stdout), where no names can be
// appended.
void check_tf_prefix(const std::string& output);
// Without --overwrite: an output that exists is an error (a stream is written into, nothing
// replaced), and so is a `checkpoint` file in the directory (`tf_state`, "" for other formats)
// that is not TensorFlow's state file (the user's own, which --to=tf would rewrite).
void check_outputs_free(const std::string& output, const std::vector<std::string>& outs,
                        const std::string& tf_state, bool overwrite);
// TF's global_step for a bertbench checkpoint of `micro_steps` (its bertbench/global_step), in the
// counter of the command line that trained it (its metadata's flags): updates where that line's
// global_step counts them (NVIDIA NGC TF's: schedule_update_counter micro-steps each), else
// micro-steps.
int64_t tf_global_step(int64_t micro_steps, const std::map<std::string, std::string>& metadata);
// HF's BertConfig (config.json) for our config, its architecture from the heads the output holds
// (the span head: BertForQuestionAnswering; the pretraining heads: BertForPreTraining; none:
// BertModel).
nlohmann::json hf_config(const BertConfig& c, bool pretraining, bool squad);

}  // namespace bertbench::model
