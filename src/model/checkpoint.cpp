// Checkpoints (ParamTable <-> safetensors) and Hugging Face BERT import.
// HF names: transformers BertForPreTraining / BertModel / BertForQuestionAnswering state dicts;
// TF names: google-research/bert. HF nn.Linear stores weight [out, in]; TF dense kernels are
// [in, out], so Linear weights are transposed; cls.seq_relationship.weight and qa_outputs.weight
// are already [2, H] like cls/seq_relationship/output_weights and cls/squad/output_weights.
#include "model/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "io/torch_checkpoint.hpp"

namespace bertbench::model {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
}

const char* heads_name(Heads h) {
    switch (h) {
        case Heads::pretraining:
            return "pretraining";
        case Heads::squad:
            return "squad";
        case Heads::none:
            return "none";
    }
    return "?";
}

bool starts_with(const std::string& s, std::string_view p) {
    return s.rfind(p, 0) == 0;
}

// "weight|gamma" -> gamma, "bias|beta" -> beta for LayerNorm; false otherwise.
bool layer_norm_param(const std::string& leaf, std::string* out) {
    if (leaf == "weight" || leaf == "gamma")
        *out = "gamma";
    else if (leaf == "bias" || leaf == "beta")
        *out = "beta";
    else
        return false;
    return true;
}

// A Linear "<module>.weight|bias" -> "<module>/kernel" (transposed) | "<module>/bias".
bool linear_param(const std::string& leaf, std::string* out, bool* transpose) {
    if (leaf == "weight") {
        *out = "kernel";
        *transpose = true;
    } else if (leaf == "bias") {
        *out = "bias";
        *transpose = false;
    } else {
        return false;
    }
    return true;
}

// Where an HF name's module path starts: after DistributedDataParallel's "module." and then
// BertForPreTraining's "bert." (or "model.").
size_t hf_prefix_length(const std::string& n) {
    size_t at = starts_with(n, "module.") ? 7 : 0;
    if (n.compare(at, 5, "bert.") == 0) at += 5;
    else if (n.compare(at, 6, "model.") == 0) at += 6;
    return at;
}

}  // namespace

// ---- writer ----

CheckpointWriter::CheckpointWriter(std::string path, const ParamTable& table)
    : table_(table), writer_(std::move(path)) {
    writer_.set_metadata("format", kCheckpointFormat);
    writer_.set_metadata("bert_config", table.config().to_json().dump());
    writer_.set_metadata("heads", heads_name(table.heads()));
}

void CheckpointWriter::add_table(std::span<const float> buffer, const std::string& suffix) {
    BB_CHECK(buffer.size() >= table_.total_floats());
    for (const ParamInfo& p : table_.entries())
        writer_.add(p.name + suffix, io::DType::F32, p.shape, buffer.data() + p.offset,
                    p.size * sizeof(float));
}

void CheckpointWriter::add_tensor(const std::string& name, io::DType dtype,
                                  std::vector<int64_t> shape, const void* data, size_t nbytes) {
    writer_.add(name, dtype, std::move(shape), data, nbytes);
}

void CheckpointWriter::add_i64(const std::string& name, std::span<const int64_t> values) {
    writer_.add_i64(name, {static_cast<int64_t>(values.size())}, values);
}

void CheckpointWriter::add_f32(const std::string& name, std::span<const float> values) {
    writer_.add_f32(name, {static_cast<int64_t>(values.size())}, values);
}

void CheckpointWriter::set_metadata(const std::string& key, const std::string& value) {
    writer_.set_metadata(key, value);
}

void CheckpointWriter::commit() {
    writer_.write();
}

void save_checkpoint(const std::string& path, const ParamTable& table,
                     std::span<const float> params,
                     const std::map<std::string, std::string>& metadata) {
    CheckpointWriter w(path, table);
    for (const auto& [k, v] : metadata) w.set_metadata(k, v);
    w.add_table(params);
    w.commit();
}

// ---- reader ----

CheckpointReader::CheckpointReader(const std::string& path) : file_(path) {}

BertConfig CheckpointReader::config() const {
    const auto it = metadata().find("bert_config");
    if (it == metadata().end())
        fail(
            "{}: __metadata__: expected a \"bert_config\" entry, got none (hint: not a bertbench "
            "checkpoint; give --bert_config_file)",
            path());
    const nlohmann::json j =
        json_safe::parse(it->second, path() + ": __metadata__[\"bert_config\"]",
                         "a JSON object (the model's bert_config)");
    BertConfig c = BertConfig::from_json(j, path() + ": bert_config");
    c.validate(path() + ": bert_config");
    return c;
}

void CheckpointReader::load_table(const ParamTable& table, std::span<float> buffer,
                                  const std::string& suffix,
                                  std::vector<std::string>* missing) const {
    BB_CHECK(buffer.size() >= table.total_floats());
    for (const ParamInfo& p : table.entries()) {
        const std::string name = p.name + suffix;
        const io::TensorInfo* t = file_.find(name);
        if (t == nullptr && missing != nullptr) {
            missing->push_back(name);
            continue;
        }
        if (t == nullptr)
            fail(
                "{}: tensor \"{}\": expected shape {}, got no such tensor (hint: the checkpoint "
                "was written for another model or other heads)",
                path(), name, shape_str(p.shape));
        if (t->dtype != io::DType::F32)
            fail("{}: tensor \"{}\": expected dtype F32, got {} (hint: `bertbench convert --input={} "
                 "--output=<new>.safetensors` writes its weights as F32)",
                 path(), name, io::dtype_name(t->dtype), path());
        const int64_t padding = vocab_padding_rows(table.config(), p.name, p.shape, t->shape);
        if (t->shape != p.shape && padding == 0)
            fail(
                "{}: tensor \"{}\": expected shape {}, got {} (hint: the checkpoint was written "
                "for another config)",
                path(), name, shape_str(p.shape), t->shape_str());
        if (padding == 0) {
            file_.read_f32(name, buffer.subspan(p.offset, p.size));
            continue;
        }
        // converted from an NVIDIA checkpoint without its config: its padding rows left out
        const std::vector<float> all = file_.read_f32(name);
        std::copy_n(all.begin(), p.size, buffer.begin() + static_cast<std::ptrdiff_t>(p.offset));
        log::info("{}: {} rows {}..{} left out (NVIDIA's vocabulary padding to a multiple of 8)", path(),
                  name, p.shape[0], t->shape[0] - 1);
    }
}

std::vector<float> CheckpointReader::read_f32(const std::string& name,
                                              const std::vector<int64_t>* expected_shape) const {
    const io::TensorInfo& t = file_.at(name);
    if (expected_shape != nullptr && t.shape != *expected_shape)
        fail("{}: tensor \"{}\": expected shape {}, got {}", path(), name,
             shape_str(*expected_shape), t.shape_str());
    return file_.read_f32(name);
}

std::vector<int64_t> CheckpointReader::read_i64(const std::string& name) const {
    return file_.read_i64(name);
}

void check_config_agrees(const BertConfig& saved, const BertConfig& want, const std::string& path,
                         const std::string& want_name) {
    const nlohmann::json s = saved.to_json_complete(), w = want.to_json_complete();
    for (const auto& [key, value] : w.items()) {
        // Dropout and init scale do not change the tensors; sizes and activation do.
        if (key.find("dropout") != std::string::npos || key == "initializer_range") continue;
        if (s.at(key) != value)
            fail("{}: bert_config.{}: expected {} ({}), got {} (hint: pass the checkpoint's "
                 "bert_config.json)",
                 path, key, value.dump(), want_name, s.at(key).dump());
    }
}

namespace {
void check_saved_config(const CheckpointReader& r, const std::string& path, const ParamTable& table) {
    if (r.metadata().count("bert_config"))
        check_config_agrees(r.config(), table.config(), path, "the model's config");
    std::vector<std::string> names;
    for (const io::TensorInfo& t : r.file().tensors()) names.push_back(t.name);
    refuse_deeper_layers(names, path, table.config().num_hidden_layers);
}
}  // namespace

void load_checkpoint(const std::string& path, const ParamTable& table, std::span<float> params) {
    CheckpointReader r(path);
    check_saved_config(r, path, table);
    r.load_table(table, params);
}

std::vector<std::string> load_checkpoint_present(const std::string& path, const ParamTable& table,
                                                 std::span<float> params) {
    CheckpointReader r(path);
    check_saved_config(r, path, table);
    std::vector<std::string> missing;
    r.load_table(table, params, "", &missing);
    return missing;
}

// ---- Hugging Face import ----

void check_hf_layer_index(const std::string& path, const std::string& hf_name, int num_layers) {
    const size_t at = hf_prefix_length(hf_name);
    if (hf_name.compare(at, 14, "encoder.layer.") != 0) return;
    const size_t begin = at + 14, dot = hf_name.find('.', begin);
    const std::string idx = hf_name.substr(begin, dot == std::string::npos ? dot : dot - begin);
    const int64_t limit = num_layers > 0 ? num_layers : int64_t(1) << 31;
    const bool canonical = !idx.empty() && idx.size() <= 10 &&
                           idx.find_first_not_of("0123456789") == std::string::npos &&
                           (idx == "0" || idx[0] != '0');
    if (!canonical || std::stoll(idx) >= limit)
        fail(
            "{}: tensor \"{}\": expected an encoder layer index 0..{} (decimal, no sign or leading "
            "zeros{}), got \"{}\"",
            path, hf_name, limit - 1, num_layers > 0 ? "; num_hidden_layers of the model" : "",
            idx);
}

bool hf_to_tf_name(const std::string& hf_name, HfName* out) {
    const std::string n = hf_name.substr(hf_prefix_length(hf_name));
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
        const size_t dot = n.find('.', start);
        parts.push_back(n.substr(start, dot - start));
        if (parts.back() == "dense_act") parts.back() = "dense";  // NVIDIA's LinearActivation
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    const size_t k = parts.size();
    const std::string& leaf = parts.back();
    std::string tail;
    bool transpose = false;
    auto done = [&](std::string tf) {
        out->tf_name = std::move(tf);
        out->transpose = transpose;
        return true;
    };
    if (parts[0] == "embeddings") {
        if (k == 3 && leaf == "weight" &&
            (parts[1] == "word_embeddings" || parts[1] == "position_embeddings" ||
             parts[1] == "token_type_embeddings"))
            return done("bert/embeddings/" + parts[1]);
        if (k == 3 && parts[1] == "LayerNorm" && layer_norm_param(leaf, &tail))
            return done("bert/embeddings/LayerNorm/" + tail);
        return false;
    }
    if (parts[0] == "encoder" && k >= 5 && parts[1] == "layer") {
        const std::string& idx = parts[2];
        if (idx.empty() || idx.size() > 6 ||
            idx.find_first_not_of("0123456789") != std::string::npos)
            return false;
        const std::string base = "bert/encoder/layer_" + idx + "/";
        const std::string mod =
            fmt::format("{}", fmt::join(parts.begin() + 3, parts.end() - 1, "."));
        static const char* kLinear[] = {"attention.self.query", "attention.self.key",
                                        "attention.self.value", "attention.output.dense",
                                        "intermediate.dense",   "output.dense"};
        for (const char* m : kLinear)
            if (mod == m && linear_param(leaf, &tail, &transpose)) {
                std::string path = mod;
                std::replace(path.begin(), path.end(), '.', '/');
                return done(base + path + "/" + tail);
            }
        if ((mod == "attention.output.LayerNorm" || mod == "output.LayerNorm") &&
            layer_norm_param(leaf, &tail)) {
            std::string path = mod;
            std::replace(path.begin(), path.end(), '.', '/');
            return done(base + path + "/" + tail);
        }
        return false;
    }
    if (parts[0] == "pooler" && k == 3 && parts[1] == "dense" &&
        linear_param(leaf, &tail, &transpose))
        return done("bert/pooler/dense/" + tail);
    if (parts[0] == "cls" && k >= 3) {
        if (parts[1] == "predictions") {
            if ((k == 3 && leaf == "bias") || (k == 4 && parts[2] == "decoder" && leaf == "bias"))
                return done("cls/predictions/output_bias");
            if (k == 5 && parts[2] == "transform" && parts[3] == "dense" &&
                linear_param(leaf, &tail, &transpose))
                return done("cls/predictions/transform/dense/" + tail);
            if (k == 5 && parts[2] == "transform" && parts[3] == "LayerNorm" &&
                layer_norm_param(leaf, &tail))
                return done("cls/predictions/transform/LayerNorm/" + tail);
            return false;
        }
        if (parts[1] == "seq_relationship" && k == 3) {  // [2, H] like TF: no transpose
            if (leaf == "weight") return done("cls/seq_relationship/output_weights");
            if (leaf == "bias") return done("cls/seq_relationship/output_bias");
        }
        return false;
    }
    if (parts[0] == "qa_outputs" && k == 2) {  // BertForQuestionAnswering: Linear(H, 2), [2, H]
        if (leaf == "weight") return done("cls/squad/output_weights");
        if (leaf == "bias") return done("cls/squad/output_bias");
    }
    return false;
}

std::string ImportReport::summary() const {
    auto list = [](const std::vector<std::string>& v) {
        if (v.empty()) return std::string("none");
        std::string s;
        for (size_t i = 0; i < std::min<size_t>(v.size(), 5); ++i)
            s += (i ? ", " : "") + json_safe::printable(v[i]);  // names from the file
        if (v.size() > 5) s += fmt::format(", ... ({} in all)", v.size());
        return s;
    };
    return fmt::format(
        "loaded {} tensors; missing (left as initialised): {}; unexpected: {}; "
        "ignored: {}",
        loaded.size(), list(missing), list(unexpected), list(ignored));
}

int64_t vocab_padding_rows(const BertConfig& config, const std::string& tf_name, const std::vector<int64_t>& want,
                           const std::vector<int64_t>& got) {
    if (tf_name != "bert/embeddings/word_embeddings" && tf_name != "cls/predictions/output_bias") return 0;
    const int64_t padded = (config.vocab_size + 7) / 8 * 8;
    if (padded == config.vocab_size || want.empty() || got.size() != want.size() || want[0] != config.vocab_size ||
        got[0] != padded || !std::equal(want.begin() + 1, want.end(), got.begin() + 1))
        return 0;
    return padded - config.vocab_size;
}

ImportReport import_hf_tensors(const std::string& path, const std::vector<HfSourceTensor>& tensors,
                               const std::function<void(size_t, std::span<float>)>& read,
                               const ParamTable& table, std::span<float> params) {
    BB_CHECK(params.size() >= table.total_floats());
    ImportReport report;
    std::map<std::string, std::string> filled;  // tf name -> hf name
    std::vector<size_t> decoders;                // cls.predictions.decoder.weight: checked below
    for (size_t i = 0; i < tensors.size(); ++i) {
        const std::string& hf = tensors[i].name;
        const size_t at = hf_prefix_length(hf);
        if (hf.ends_with("position_ids") || hf.compare(at, std::string::npos, "cls.predictions.decoder.weight") == 0) {
            report.ignored.push_back(hf);  // a buffer, and the decoder tied to word_embeddings
            if (!hf.ends_with("position_ids")) decoders.push_back(i);
            continue;
        }
        check_hf_layer_index(path, hf, table.config().num_hidden_layers);
        HfName m;
        const ParamInfo* p = hf_to_tf_name(hf, &m) ? table.find(m.tf_name) : nullptr;
        if (p == nullptr) {
            report.unexpected.push_back(hf);
            continue;
        }
        std::vector<int64_t> want = p->shape;
        if (m.transpose) std::swap(want[0], want[1]);
        const int64_t extra_rows = vocab_padding_rows(table.config(), m.tf_name, want, tensors[i].shape);
        if (tensors[i].shape != want && extra_rows == 0)
            fail("{}: tensor \"{}\" (-> {}): expected shape {}{}, got {}", path, hf, m.tf_name,
                 shape_str(want), m.transpose ? " (HF [out, in])" : "", shape_str(tensors[i].shape));
        // The tensor's values in our layout (the vocabulary's padding rows dropped; [in, out])
        const auto fill = [&](std::span<float> dst) {
            if (extra_rows > 0) {  // the first vocab_size rows (row-major), the padding dropped
                std::vector<float> src(p->size + static_cast<size_t>(extra_rows) *
                                                     (p->size / static_cast<size_t>(want[0])));
                read(i, src);
                std::copy(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(p->size),
                          dst.begin());
            } else if (!m.transpose) {
                read(i, dst);
            } else {
                std::vector<float> src(p->size);  // [out, in]
                read(i, src);
                const size_t rows = static_cast<size_t>(p->shape[0]),
                             cols = static_cast<size_t>(p->shape[1]);
                for (size_t r = 0; r < rows; ++r)      // in
                    for (size_t o = 0; o < cols; ++o)  // out
                        dst[r * cols + o] = src[o * rows + r];
            }
        };
        std::span<float> dst = params.subspan(p->offset, p->size);
        if (const auto first = filled.find(m.tf_name); first != filled.end()) {
            // cls.predictions.bias and .decoder.bias, or "module." and plain names: one tensor,
            // so equal copies; different values would leave the model to the file's key order
            std::vector<float> copy(p->size);
            fill(copy);
            if (std::memcmp(copy.data(), dst.data(), p->size * sizeof(float)) != 0)
                fail(
                    "{}: tensors \"{}\" and \"{}\" are both {} but hold different values "
                    "(expected one of them, or equal copies)",
                    path, first->second, hf, m.tf_name);
            report.ignored.push_back(hf);
            continue;
        }
        fill(dst);
        if (extra_rows > 0)
            report.ignored.push_back(
                fmt::format("{} rows {}..{} (NVIDIA's vocabulary padding to a multiple of 8)", hf,
                            want[0], tensors[i].shape[0] - 1));
        filled[m.tf_name] = hf;
        report.loaded.push_back(m.tf_name);
    }
    // BERT ties the decoder to the word embeddings: a file whose decoder holds other values (an
    // untied model) is not this model; the rows past the vocabulary (NVIDIA's padding) aside
    const ParamInfo* words = table.find("bert/embeddings/word_embeddings");
    for (const size_t i : decoders) {
        if (words == nullptr || !filled.count(words->name) || tensors[i].shape.size() != 2 ||
            tensors[i].shape[1] != words->shape[1] || tensors[i].shape[0] < words->shape[0])
            continue;
        std::vector<float> decoder(static_cast<size_t>(tensors[i].shape[0] * tensors[i].shape[1]));
        read(i, decoder);
        if (std::memcmp(decoder.data(), params.data() + words->offset, words->size * sizeof(float)) != 0)
            fail("{}: tensor \"{}\" holds other values than the word embeddings \"{}\" it is tied to in "
                 "BERT (an untied decoder: expected equal copies, as BertForPreTraining saves them)",
                 path, tensors[i].name, filled[words->name]);
    }
    for (const ParamInfo& p : table.entries())
        if (!filled.count(p.name)) report.missing.push_back(p.name);
    return report;
}

ImportReport import_hf_safetensors(const std::string& path, const ParamTable& table,
                                   std::span<float> params) {
    const io::SafetensorsReader file(path);
    std::vector<HfSourceTensor> tensors;
    for (const io::TensorInfo& t : file.tensors()) tensors.push_back({t.name, t.shape});
    return import_hf_tensors(
        path, tensors,
        [&](size_t i, std::span<float> dst) { file.read_f32(file.tensors()[i].name, dst); }, table,
        params);
}

ImportReport import_torch_checkpoint(const std::string& path, const ParamTable& table,
                                     std::span<float> params) {
    const io::TorchCheckpointReader file(path);
    std::vector<HfSourceTensor> tensors;
    for (const io::TorchTensor& t : file.tensors()) tensors.push_back({t.name, t.shape});
    ImportReport report = import_hf_tensors(
        path, tensors, [&](size_t i, std::span<float> dst) { file.read_f32(file.tensors()[i], dst); },
        table, params);
    for (const std::string& s : file.ignored()) report.ignored.push_back(s);
    return report;
}

}  // namespace bertbench::model
