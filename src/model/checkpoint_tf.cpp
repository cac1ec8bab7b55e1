// TensorFlow checkpoints as --init_checkpoint, and the one place that tells the four checkpoint
// formats apart. Load semantics follow the reference (run_pretraining.py / run_squad.py
// get_assignment_map_from_checkpoint): only the model's variables are restored by name; optimizer
// slots and global_step stay behind, so the optimizer starts at zero and the step at 0.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "io/tf_bundle.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/checkpoint.hpp"

namespace bertbench::model {
namespace {

std::string first_few(const std::vector<std::string>& v, size_t n = 4) {
    if (v.empty()) return "";
    std::string s = fmt::format(" ({}", fmt::join(v.begin(), v.begin() + std::min(v.size(), n), ", "));
    return s + (v.size() > n ? ", ...)" : ")");
}

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The first bytes of a file (fewer when it is shorter); Error naming the path if it cannot be read.
std::string file_head(const std::string& path, size_t n) {
    std::string why;
    const int fd = open_regular_file(path, &why);  // a FIFO is an error, not a wait
    if (fd < 0) fail("{}: {}", path, why);
    std::string head(n, '\0');
    ssize_t got = 0;
    for (size_t at = 0; at < n; at += size_t(got)) {
        got = ::read(fd, head.data() + at, n - at);
        if (got <= 0) {
            head.resize(at);
            break;
        }
    }
    ::close(fd);
    return head;
}

}  // namespace

// Variables the reference saves besides the model: optimizer slots (TF1 AdamWeightDecay/LAMB
// "adam_m"/"adam_v", MLPerf's lamb_optimizer_v1.py "LAMB"/"LAMB_1" (its slots m and v under the
// optimizer's name), MLPerf's checkpoint_add_gradacc.py "GradientAccumulator", TF Adam "Adam" /
// "Adam_1", Momentum, EMA), step counters and our own "bertbench/..." resume state.
bool optimizer_state(const std::string& name) {
    static const char* const kLeaves[] = {"adam_m", "adam_v", "LAMB", "LAMB_1",
                                          "GradientAccumulator", "Adam", "Adam_1", "Momentum",
                                          "ExponentialMovingAverage", "RMSProp", "RMSProp_1",
                                          "Adagrad", "lamb_m", "lamb_v"};
    if (name == "global_step" || name == "beta1_power" || name == "beta2_power" ||
        name.rfind("bertbench/", 0) == 0)
        return true;
    const size_t slash = name.rfind('/');
    if (slash == std::string::npos) return false;
    const std::string leaf = name.substr(slash + 1);
    return std::find(std::begin(kLeaves), std::end(kLeaves), leaf) != std::end(kLeaves);
}

bool tf_to_hf_name(const std::string& tf_name, std::string* hf_name, bool* transpose) {
    std::string hf;
    if (tf_name == "cls/predictions/output_bias") {
        hf = "cls.predictions.bias";
    } else if (tf_name == "cls/seq_relationship/output_weights") {
        hf = "cls.seq_relationship.weight";
    } else if (tf_name == "cls/seq_relationship/output_bias") {
        hf = "cls.seq_relationship.bias";
    } else if (tf_name == "cls/squad/output_weights") {
        hf = "qa_outputs.weight";
    } else if (tf_name == "cls/squad/output_bias") {
        hf = "qa_outputs.bias";
    } else {  // path with '.', layer_N -> layer.N, and the leaf in HF's words
        std::string s = tf_name;
        std::replace(s.begin(), s.end(), '/', '.');
        const size_t l = s.find(".layer_");
        if (l != std::string::npos) s[l + 6] = '.';
        const size_t dot = s.rfind('.');
        if (dot == std::string::npos) return false;
        const std::string leaf = s.substr(dot + 1), base = s.substr(0, dot + 1);
        if (leaf == "kernel" || leaf == "gamma")
            hf = base + "weight";
        else if (leaf == "beta" || leaf == "bias")
            hf = base + "bias";
        else if (leaf.ends_with("_embeddings"))
            hf = s + ".weight";
        else
            return false;
    }
    // Accept only what the import map sends back to the same TF name.
    HfName back;
    if (!hf_to_tf_name(hf, &back) || back.tf_name != tf_name) return false;
    *hf_name = hf;
    *transpose = back.transpose;
    return true;
}

std::string TfImportReport::summary() const {
    return fmt::format("loaded {} tensors; missing {}{}; shape-mismatched 0; ignored {} (optimizer "
                       "state, global_step, vocabulary padding){}; unexpected {}{}",
                       loaded.size(), missing.size(), first_few(missing), ignored.size(),
                       first_few(ignored, 3), unexpected.size(), first_few(unexpected));
}

int64_t encoder_layer_of(const std::string& tf_name) {
    constexpr std::string_view kLayer = "bert/encoder/layer_";
    if (!tf_name.starts_with(kLayer) || optimizer_state(tf_name)) return -1;
    const size_t end = tf_name.find('/', kLayer.size());
    const std::string idx = tf_name.substr(kLayer.size(), end == std::string::npos ? end : end - kLayer.size());
    if (idx.empty() || idx.size() > 9 || idx.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(idx);
}

void refuse_deeper_layers(const std::vector<std::string>& tf_names, const std::string& where,
                          int num_layers) {
    std::vector<std::string> deeper;
    for (const std::string& name : tf_names)
        if (encoder_layer_of(name) >= num_layers) deeper.push_back(name);
    if (!deeper.empty())
        fail("{}: expected encoder layers 0..{} (num_hidden_layers of the model), found {} tensors "
             "of deeper layers{} (hint: the checkpoint was written for another bert_config.json)",
             where, num_layers - 1, deeper.size(), first_few(deeper));
}

TfImportReport import_tf_checkpoint(const std::string& prefix, const ParamTable& table,
                                    std::span<float> params, bool missing_ok) {
    BB_CHECK(params.size() >= table.total_floats());
    const io::TfBundleReader r(io::TfBundleReader::prefix_of(prefix));
    TfImportReport rep;
    std::vector<std::string> mismatched, names;
    std::vector<std::pair<const ParamInfo*, const io::TfTensorEntry*>> plan;
    for (const io::TfTensorEntry& e : r.entries()) names.push_back(e.name);
    refuse_deeper_layers(names, "[tf_checkpoint] " + r.index_path(), table.config().num_hidden_layers);
    for (const io::TfTensorEntry& e : r.entries()) {
        const ParamInfo* p = table.find(e.name);
        if (p == nullptr) {
            (optimizer_state(e.name) ? rep.ignored : rep.unexpected).push_back(e.name);
            continue;
        }
        if (e.shape != p->shape && vocab_padding_rows(table.config(), e.name, p->shape, e.shape) == 0) {
            mismatched.push_back(fmt::format("{}: expected [{}], found {}", e.name,
                                             fmt::join(p->shape, ", "), e.shape_str()));
            continue;
        }
        const io::TfDType d = e.dtype;
        if (d != io::TfDType::float32 && d != io::TfDType::half && d != io::TfDType::bfloat16 &&
            d != io::TfDType::float64)
            fail("[tf_checkpoint] {}: tensor \"{}\": dtype: expected DT_FLOAT, DT_HALF, "
                 "DT_BFLOAT16 or DT_DOUBLE, found {}", r.index_path(), e.name,
                 io::tf_dtype_name(d));
        plan.emplace_back(p, &e);
    }
    std::vector<std::string> missing_bad;
    for (const ParamInfo& p : table.entries()) {
        if (r.find(p.name) != nullptr) continue;
        rep.missing.push_back(p.name);
        if (!(table.heads() == Heads::squad && p.name.rfind("cls/squad/", 0) == 0))
            missing_bad.push_back(p.name);
    }
    if (missing_ok) missing_bad.clear();  // the caller decides (--allow_missing_weights)
    if (!missing_bad.empty() || !mismatched.empty())
        fail("[tf_checkpoint] {}: expected every tensor of the model ({} of them), found {} "
             "missing{} and {} shape-mismatched{} (hint: the checkpoint was written for another "
             "bert_config.json, or with other heads)",
             r.index_path(), table.entries().size(), missing_bad.size(), first_few(missing_bad),
             mismatched.size(), first_few(mismatched, 3));
    for (const auto& [p, e] : plan) {
        rep.loaded.push_back(p->name);
        if (e->shape == p->shape) {
            r.read_f32(*e, params.subspan(p->offset, p->size));
            continue;
        }
        // NVIDIA's vocabulary padding (a checkpoint converted without its config): left out
        std::vector<float> all(e->numel());
        r.read_f32(*e, all);
        std::copy_n(all.begin(), p->size, params.begin() + static_cast<std::ptrdiff_t>(p->offset));
        rep.ignored.push_back(fmt::format("{} rows {}..{} (NVIDIA's vocabulary padding to a multiple of 8)",
                                          e->name, p->shape[0], e->shape[0] - 1));
    }
    return rep;
}

const char* checkpoint_format_name(CheckpointFormat f) {
    switch (f) {
        case CheckpointFormat::bertbench:
            return "bertbench safetensors";
        case CheckpointFormat::hf_safetensors:
            return "Hugging Face safetensors";
        case CheckpointFormat::tf_bundle:
            return "TensorFlow checkpoint";
        case CheckpointFormat::pytorch:
            return "PyTorch checkpoint";
    }
    return "?";
}

namespace {
std::string resolve_name(const std::string& path, const std::string* flag);

// The config.json beside a Hugging Face or PyTorch weights file that checkpoint_config reads (a
// BERT model's, as from_pretrained), "" where there is none.
std::string hf_config_beside(const std::string& path) {
    const std::string ext = std::filesystem::path(path).extension().string();
    if (ext != ".safetensors" && ext != ".pt" && ext != ".pth" && ext != ".bin") return "";
    const std::string beside = (std::filesystem::path(path).parent_path() / "config.json").string();
    if (!is_file(beside) || !is_file(path)) return "";
    const nlohmann::json j = nlohmann::json::parse(read_file(beside), nullptr, false);
    return j.is_object() && j.contains("model_type") && j["model_type"] == "bert" ? beside : "";
}
}  // namespace

std::vector<std::string> checkpoint_files(const std::string& name) {
    const std::string path = resolve_name(name, nullptr);  // what the loader reads for that name
    const std::string prefix = io::TfBundleReader::prefix_of(path);
    if (!io::TfBundleReader::is_bundle(prefix)) {
        const std::string config = hf_config_beside(path);
        return config.empty() ? std::vector<std::string>{path} : std::vector<std::string>{path, config};
    }
    std::vector<std::string> files{prefix + ".index"};
    const std::filesystem::path p(prefix);
    const std::string shard = p.filename().string() + ".data-";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(p.has_parent_path() ? p.parent_path() : ".", ec))
        if (e.path().filename().string().starts_with(shard)) files.push_back(e.path().string());
    return files;
}

std::vector<std::string> files_read(const std::vector<std::string>& lists) {
    std::vector<std::string> files;
    for (const std::string& list : lists)
        for (const std::string& path : paths_of_list(list))
            for (std::string& f : checkpoint_files(path)) files.push_back(std::move(f));
    return files;
}

CheckpointFormat detect_checkpoint_format(const std::string& path) {
    if (io::TfBundleReader::is_bundle(io::TfBundleReader::prefix_of(path))) return CheckpointFormat::tf_bundle;
    if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
        // A run's or save_pretrained's directory: which of its checkpoints is for the user to say
        std::vector<std::pair<std::filesystem::file_time_type, std::string>> found;
        for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
            std::string name = e.path().filename().string();
            if (name.ends_with(".index")) name.resize(name.size() - 6);  // a TF prefix
            else if (!name.ends_with(".safetensors") && !name.ends_with(".pt") && !name.ends_with(".pth") &&
                     !name.ends_with(".bin"))
                continue;
            found.emplace_back(e.last_write_time(ec), (std::filesystem::path(path) / name).string());
        }
        std::sort(found.rbegin(), found.rend());  // the newest first
        std::string names;
        for (size_t i = 0; i < std::min<size_t>(found.size(), 3); ++i) names += (i ? ", " : "") + found[i].second;
        fail("{}: a directory; expected a checkpoint file or TensorFlow prefix{}", path,
             found.empty() ? std::string(" (it holds none)")
                           : fmt::format(" (hint: name one of the {} it holds, newest first: {}{})", found.size(),
                                         names, found.size() > 3 ? ", ..." : ""));
    }
    if (!is_file(path))
        fail("{}: no such file or TensorFlow checkpoint prefix (expected a checkpoint: a safetensors or "
             "PyTorch file, or a TensorFlow prefix with {}.index beside it)", path, path);
    const std::string head = file_head(path, 24);  // a legacy torch file's magic, after a FRAME
    if (io::torch_format({reinterpret_cast<const std::byte*>(head.data()), head.size()}) !=
        io::TorchFormat::none)
        return CheckpointFormat::pytorch;
    if (head.size() < 9 || head[8] != '{') {
        std::string hex;
        for (unsigned char c : head) hex += fmt::format(" {:02x}", c);
        fail("{}: expected a checkpoint: safetensors (8-byte length, then '{{'), PyTorch (a zip "
             "archive, or torch's legacy magic number) or a TensorFlow prefix ({}.index beside "
             "it); the file starts with{}{}", path, path, hex.empty() ? " nothing" : hex,
             head.size() < 24 ? " (that is all of it)" : " ...");
    }
    const CheckpointReader r(path);  // validates the safetensors file
    // Not just any "format" key: transformers' save_pretrained writes {"format": "pt"}.
    const auto it = r.metadata().find("format");
    const bool ours_format = it != r.metadata().end() && it->second == kCheckpointFormat;
    // TF names: scopes joined by '/' under bert/ or cls/ (HF's state-dict keys join by '.')
    const auto& tensors = r.file().tensors();
    const bool tf_names = std::any_of(tensors.begin(), tensors.end(), [](const io::TensorInfo& t) {
        return t.name.starts_with("bert/") || t.name.starts_with("cls/");
    });
    return ours_format || tf_names ? CheckpointFormat::bertbench : CheckpointFormat::hf_safetensors;
}

namespace {

// A TF model directory's latest checkpoint, as tf.train.latest_checkpoint (and so
// init_from_checkpoint and list_variables given a directory) reads it from the directory's
// `checkpoint` state file; "" without one.
std::string latest_in_state_file(const std::filesystem::path& dir) {
    std::ifstream state(dir / "checkpoint");
    std::string line;
    std::getline(state, line);  // model_checkpoint_path: "model.ckpt-N"
    const size_t open = line.find('"'), close = line.rfind('"');
    if (!line.starts_with("model_checkpoint_path: ") || open == close) return "";
    const std::filesystem::path named = line.substr(open + 1, close - open - 1);
    return (named.is_absolute() ? named : dir / named).string();
}

}  // namespace

namespace {
// resolve_checkpoint_name's choice, said in one line naming `flag` where `flag` is not null.
std::string resolve_name(const std::string& path, const std::string* flag) {
    // A directory with TF's state file: its latest checkpoint, as TF takes it; any other
    // directory is refused by the reader, naming the checkpoints in it (which is for the user)
    if (struct stat st {}; !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        const std::string found = latest_in_state_file(path);
        if (found.empty()) return path;
        if (flag)
            log::info("{}={}: a directory; reading its checkpoint {} (its `checkpoint` file's latest, as "
                      "tf.train.latest_checkpoint)", *flag, path, found);
        return resolve_name(found, flag);
    }
    if (path.empty() || is_file(path) || io::TfBundleReader::is_bundle(io::TfBundleReader::prefix_of(path))) return path;
    const std::string ours = path + ".safetensors";
    if (!is_file(ours)) return path;  // the loader's error names `path`
    if (flag)
        log::info("{}={}: no such file or TensorFlow prefix; reading {}, the bertbench checkpoint of "
                  "that name", *flag, path, ours);
    return ours;
}
}  // namespace

std::string resolve_checkpoint_name(const std::string& path, const std::string& flag) {
    return resolve_name(path, &flag);
}

bool checkpoint_config(const std::string& path, BertConfig* out) {
    const CheckpointFormat f = detect_checkpoint_format(path);
    if (f == CheckpointFormat::hf_safetensors || f == CheckpointFormat::pytorch) {
        // from_pretrained's reading of save_pretrained's directory: the config.json beside the
        // weights, where it is a BERT model's (a run's own config.json, the run record, is not)
        const std::string beside = (std::filesystem::path(path).parent_path() / "config.json").string();
        if (!is_file(beside)) return false;
        const nlohmann::json j = json_safe::parse(read_file(beside), beside, "a JSON object (config.json)");
        if (!j.is_object() || !j.contains("model_type") || j.at("model_type") != "bert") return false;
        *out = BertConfig::from_json(j, beside);
        out->validate(beside);
        if (log::first_time("config beside " + path))
            log::info("{}: the model's config is {}, Hugging Face's beside it (as from_pretrained reads it; "
                      "--bert_config_file or --model replaces it)", path, beside);
        return true;
    }
    if (f != CheckpointFormat::bertbench) return false;
    const CheckpointReader r(path);
    if (!r.metadata().count("bert_config")) return false;
    *out = r.config();
    return true;
}

void require_no_missing_weights(const std::vector<std::string>& missing, const ParamTable& table,
                                const std::string& flag, const std::string& path, bool allow) {
    if (missing.empty()) return;
    if (allow) {
        log::warn("{}={}: {} of the model's {} tensors missing (first {}), running with their "
                  "initial values (--allow_missing_weights)",
                  flag, path, missing.size(), table.entries().size(), missing.front());
        return;
    }
    fail("{}={}: {} of the model's {} tensors are not in it (first: {}); they would run at their "
         "initial values (hint: a checkpoint with every weight of this model and head, or "
         "--allow_missing_weights to run anyway)",
         flag, path, missing.size(), table.entries().size(), missing.front());
}

std::string load_init_checkpoint(const std::string& path, const ParamTable& table,
                                 std::span<float> params, const std::string& flag,
                                 std::vector<std::string>* missing) {
    const CheckpointFormat f = detect_checkpoint_format(path);
    std::string summary;
    std::vector<std::string> absent;
    switch (f) {
        case CheckpointFormat::bertbench: {
            // A pretraining checkpoint has no SQuAD head: that head keeps its initialisation
            // (as with TF checkpoints); any other absent tensor is an error.
            absent = load_checkpoint_present(path, table, params);
            for (const std::string& name : absent)
                if (name.rfind("cls/squad/", 0) != 0 && missing == nullptr)  // else: the caller's
                    fail("{}={}: tensor \"{}\": expected in the checkpoint, got no such tensor "
                         "(hint: the checkpoint was written for another model or other heads)",
                         flag, path, name);
            summary = fmt::format("loaded {} tensors (TF names)", table.entries().size() - absent.size());
            if (!absent.empty())
                summary += fmt::format("; {} absent, left as initialised: {}", absent.size(),
                                       fmt::join(absent, ", "));
            break;
        }
        case CheckpointFormat::hf_safetensors: {
            const ImportReport rep = import_hf_safetensors(path, table, params);
            if (rep.loaded.empty())
                fail("{}={}: expected BERT tensors (TF or Hugging Face names), found none of "
                     "the {} the model needs", flag, path, table.entries().size());
            summary = rep.summary();
            absent = rep.missing;
            break;
        }
        case CheckpointFormat::tf_bundle: {
            const TfImportReport rep = import_tf_checkpoint(path, table, params, missing != nullptr);
            summary = rep.summary();
            absent = rep.missing;
            break;
        }
        case CheckpointFormat::pytorch: {
            const ImportReport rep = import_torch_checkpoint(path, table, params);
            if (rep.loaded.empty())
                fail("{}={}: expected BERT tensors (Hugging Face or NVIDIA names), found none of "
                     "the {} the model needs{}", flag, path, table.entries().size(),
                     rep.unexpected.empty() ? "" : " (the file has " + rep.unexpected[0] + ", ...)");
            summary = rep.summary();
            absent = rep.missing;
            break;
        }
    }
    static const char* const kFrom[] = {"bertbench checkpoint", "Hugging Face file",
                                        "TensorFlow checkpoint", "PyTorch checkpoint"};
    std::string line = fmt::format("initialised from {} {}: {}", kFrom[static_cast<int>(f)], path, summary);
    if (missing) {  // the caller decides, then logs
        *missing = std::move(absent);
        return line;
    }
    if (!absent.empty() && (f == CheckpointFormat::hf_safetensors || f == CheckpointFormat::pytorch)) {
        // A head or the pooler may be absent (BertModel, BertForMaskedLM); an encoder tensor may
        // not: the encoder would run partly untrained (a config with more layers than the file).
        std::vector<std::string> encoder;
        for (const std::string& name : absent)
            if (const ParamInfo* p = table.find(name); p && (p->layer >= 0 || p->embedding)) encoder.push_back(name);
        if (!encoder.empty())
            fail("{}={}: {} of the encoder's tensors are not in it (first: {}); they would run at their initial "
                 "values (hint: the checkpoint was written for another bert_config.json: fewer layers, or other "
                 "names)",
                 flag, path, encoder.size(), encoder.front());
        log::warn("{}={}: {} tensor{} of the heads or pooler missing, left as initialised", flag, path, absent.size(),
                  absent.size() == 1 ? "" : "s");
    }
    log::info("{}", line);
    return line;
}

}  // namespace bertbench::model
