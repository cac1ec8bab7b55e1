#include "model/convert_outputs.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace bertbench::model {

namespace fs = std::filesystem;

void check_tf_prefix(const std::string& output) {
    struct stat st {};
    bool stream = false;
    const bool exists = ::stat(output.c_str(), &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) (void)output_target(output, &stream);
    const bool dir = output.ends_with('/') || (exists && S_ISDIR(st.st_mode));
    if (!dir && !stream) return;
    fail("--output={}: {}, expected a TensorFlow checkpoint prefix, the name before .index and "
         ".data-00000-of-00001 (hint: {}--to=safetensors|pt for one file)",
         output, output.ends_with('/') ? "ends in '/'" : dir ? "a directory" : "a stream (a device, a FIFO or an open descriptor)",
         dir ? "--output=" + (fs::path(output) / "model.ckpt-0").string() + ", or " : "");
}

void check_outputs_free(const std::string& output, const std::vector<std::string>& outs,
                        const std::string& tf_state, bool overwrite) {
    if (overwrite) return;
    for (const std::string& out : outs) {
        std::error_code ec;
        bool stream = false;
        if (!fs::exists(out, ec) && named_descriptor(out) < 0) continue;
        (void)output_target(out, &stream);
        if (!stream) fail("--output={}: {} exists (hint: --overwrite to replace it)", output, out);
    }
    if (tf_state.empty() || !fs::is_regular_file(tf_state)) return;
    constexpr std::string_view kState = "model_checkpoint_path: ";
    std::string head(kState.size(), '\0');
    std::ifstream in(tf_state, std::ios::binary);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (!head.empty() && head != kState)
        fail("--output={}: {} is not a TensorFlow checkpoint state file (expected one starting with "
             "model_checkpoint_path, as the Saver writes it), and --to=tf writes one there (hint: "
             "--overwrite to replace it, or another directory)", output, tf_state);
}

int64_t tf_global_step(int64_t micro_steps, const std::map<std::string, std::string>& metadata) {
    const auto it = metadata.find("flags");
    if (it == metadata.end()) return micro_steps;
    const nlohmann::json flags = nlohmann::json::parse(it->second, nullptr, false);  // not JSON: discarded
    const nlohmann::json* k = flags.is_object() && flags.contains("schedule_update_counter")
                                  ? &flags["schedule_update_counter"] : nullptr;
    return k && k->is_number_integer() && k->get<int64_t>() > 1 ? micro_steps / k->get<int64_t>() : micro_steps;
}

nlohmann::json hf_config(const BertConfig& c, bool pretraining, bool squad) {
    // Our "gelu"/"gelu_new" is the tanh form (HF "gelu_new"); "gelu_erf" is HF's "gelu".
    const std::string act = c.hidden_act == "gelu_erf" ? "gelu"
                            : c.hidden_act == "relu"   ? "relu"
                                                       : "gelu_new";
    const nlohmann::json ours = c.to_json();  // its floats as given (0.1, not 0.10000000149…)
    return {{"architectures", {squad         ? "BertForQuestionAnswering"
                               : pretraining ? "BertForPreTraining"
                                             : "BertModel"}},
            {"model_type", "bert"},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"num_hidden_layers", c.num_hidden_layers},
            {"num_attention_heads", c.num_attention_heads},
            {"intermediate_size", c.intermediate_size},
            {"hidden_act", act},
            {"hidden_dropout_prob", ours.at("hidden_dropout_prob")},
            {"attention_probs_dropout_prob", ours.at("attention_probs_dropout_prob")},
            {"max_position_embeddings", c.max_position_embeddings},
            {"type_vocab_size", c.type_vocab_size},
            {"initializer_range", ours.at("initializer_range")},
            {"layer_norm_eps", c.layer_norm_eps},
            {"pad_token_id", 0},
            {"position_embedding_type", "absolute"}};
}

}  // namespace bertbench::model
