// `bertbench convert`'s input side (model/convert_inputs.hpp): any checkpoint format read into
// TF-named tensors of raw bytes, and the checks of a config against them.
#include "model/convert_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/error.hpp"
#include "io/safetensors.hpp"
#include "io/tf_bundle.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/checkpoint.hpp"
#include "model/param_table.hpp"

namespace bertbench::model {

namespace {
struct DTypePair {
    io::DType st;
    io::TfDType tf;
};
constexpr DTypePair kDTypes[] = {
    {io::DType::F64, io::TfDType::float64}, {io::DType::F32, io::TfDType::float32},
    {io::DType::F16, io::TfDType::half},    {io::DType::BF16, io::TfDType::bfloat16},
    {io::DType::I64, io::TfDType::int64},   {io::DType::I32, io::TfDType::int32},
    {io::DType::I16, io::TfDType::int16},   {io::DType::I8, io::TfDType::int8},
    {io::DType::U8, io::TfDType::uint8},    {io::DType::BOOL, io::TfDType::boolean},
};

bool from_tf(io::TfDType d, io::DType* out) {
    for (const auto& p : kDTypes)
        if (p.tf == d) {
            *out = p.st;
            return true;
        }
    return false;
}
}  // namespace

io::TfDType to_tf(io::DType d) {
    for (const auto& p : kDTypes)
        if (p.st == d) return p.tf;
    BB_CHECK(false);
    return io::TfDType::invalid;
}

// [rows, cols] -> [cols, rows] for elements of `es` bytes.
std::vector<uint8_t> transpose(const std::vector<uint8_t>& src, int64_t rows, int64_t cols,
                               size_t es) {
    std::vector<uint8_t> dst(src.size());
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            std::memcpy(&dst[(size_t(c) * size_t(rows) + size_t(r)) * es],
                        &src[(size_t(r) * size_t(cols) + size_t(c)) * es], es);
    return dst;
}

namespace {
Loaded read_tf(const std::string& prefix) {
    const io::TfBundleReader r(io::TfBundleReader::prefix_of(prefix));
    Loaded in;
    in.files.push_back(r.index_path());
    for (int32_t s : r.used_shards()) in.files.push_back(r.shard_path(s));
    for (const io::TfTensorEntry& e : r.entries()) {
        Tensor t;
        if (e.partitioned || !from_tf(e.dtype, &t.dtype)) {
            const std::string why = e.partitioned ? "a partitioned (sliced) variable"
                                                  : std::string("of type ") + io::tf_dtype_name(e.dtype);
            // skipping a BERT weight would write a checkpoint without it (other variables, e.g.
            // TF2's object graph string, are listed as skipped)
            const bool bert = e.name.starts_with("bert/") || e.name.starts_with("cls/");
            if (bert && !optimizer_state(e.name))
                fail("convert: {}: tensor \"{}\" is {}, expected whole numeric tensors (bertbench "
                     "reads neither, so the output would lack this weight; hint: save the variable "
                     "unpartitioned, as tf.train.Saver does by default)",
                     prefix, e.name, why);
            in.skipped.push_back(fmt::format("{} ({})", e.name, e.partitioned
                                                                     ? "partitioned"
                                                                     : io::tf_dtype_name(e.dtype)));
            continue;
        }
        t.name = e.name;
        t.shape = e.shape;
        t.bytes = r.read_raw(e);
        const size_t es = io::dtype_size(t.dtype);
        if (r.header().big_endian)
            for (size_t i = 0; i + es <= t.bytes.size(); i += es)
                std::reverse(t.bytes.begin() + i, t.bytes.begin() + i + es);
        in.tensors.push_back(std::move(t));
    }
    // The scalar global_step --to=tf derives from ours: dropped again, so that a bertbench
    // checkpoint comes back from TF as it went
    const auto named = [&](const char* name) {
        return std::find_if(in.tensors.begin(), in.tensors.end(), [&](const Tensor& t) { return t.name == name; });
    };
    if (const auto tf = named("global_step"), ours = named("bertbench/global_step");
        tf != in.tensors.end() && ours != in.tensors.end() && tf->shape.empty() && tf->bytes == ours->bytes)
        in.tensors.erase(tf);
    return in;
}

// hf_to_tf_name, and the MLM decoder as the word embeddings it is tied to in BERT: is_copy then
// requires equal copies (an untied decoder is not this model, as the loaders refuse it).
bool tied_or_hf_name(const std::string& name, HfName* m) {
    if (!name.ends_with("predictions.decoder.weight")) return hf_to_tf_name(name, m);
    *m = {"bert/embeddings/word_embeddings", false};
    return true;
}

// Whether `t` (the file's `name`, under its TF name) is a second copy of a tensor already read
// (cls.predictions.bias and .decoder.bias; "module.x" beside "x"): listed as skipped when its bytes
// are the first's; different bytes are an error (the output would depend on the file's key order).
bool is_copy(const std::string& path, const std::string& name, const Tensor& t, Loaded& in,
             std::map<std::string, std::string>& seen) {
    const auto [first, fresh] = seen.emplace(t.name, name);
    if (fresh) return false;
    const auto kept = std::find_if(in.tensors.begin(), in.tensors.end(),
                                   [&](const Tensor& k) { return k.name == t.name; });
    if (kept == in.tensors.end() || kept->dtype != t.dtype || kept->shape != t.shape ||
        kept->bytes != t.bytes)
        fail(
            "{}: tensors \"{}\" and \"{}\" are both {} but hold different values (expected one of "
            "them, or equal copies)",
            path, first->second, name, t.name);
    in.skipped.push_back(name + " (a copy of " + first->second + ")");
    return true;
}

// An HF-named tensor of `path` as the model tensor it is (its layer index checked), or false with
// why not in `skipped`: a buffer (position_ids) or a name with no TF name.
bool model_tensor_name(const std::string& path, const std::string& name, HfName* m,
                       std::vector<std::string>& skipped) {
    check_hf_layer_index(path, name);
    if (name.ends_with("position_ids")) {
        skipped.push_back(name + " (a buffer)");
        return false;
    }
    if (!tied_or_hf_name(name, m)) {
        skipped.push_back(name + " (no TF name)");
        return false;
    }
    return true;
}

Loaded read_safetensors(const std::string& path, bool hf) {
    const io::SafetensorsReader r(path);
    Loaded in;
    in.files.push_back(path);
    if (!hf) in.metadata = r.metadata();
    std::map<std::string, std::string> seen;  // TF name -> the file's name of it
    for (const io::TensorInfo& info : r.tensors()) {
        const auto b = r.bytes(info);
        Tensor t{info.name, info.dtype, info.shape, std::vector<uint8_t>(b.size())};
        if (!b.empty()) std::memcpy(t.bytes.data(), b.data(), b.size());
        if (hf) {
            HfName m;
            if (!model_tensor_name(path, info.name, &m, in.skipped)) continue;
            t.name = m.tf_name;
            if (m.transpose) {
                if (t.shape.size() != 2)
                    fail("{}: tensor \"{}\": expected a 2-D Linear weight, found shape {}", path,
                         info.name, info.shape_str());
                t.bytes = transpose(t.bytes, t.shape[0], t.shape[1], io::dtype_size(t.dtype));
                std::swap(t.shape[0], t.shape[1]);
            }
            if (is_copy(path, info.name, t, in, seen)) continue;
        }
        in.tensors.push_back(std::move(t));
    }
    return in;
}

// A PyTorch checkpoint's state dict (HF or NVIDIA names; TF names, with '/', kept as they are),
// every float tensor widened to fp32; the rest (optimizer state, ints, buffers) skipped.
Loaded read_pt(const std::string& path) {
    const io::TorchCheckpointReader r(path);
    Loaded in;
    in.files.push_back(path);
    for (const std::string& s : r.ignored()) in.skipped.push_back(s);  // "'optimizer' (392 tensors)"
    std::map<std::string, std::string> seen;  // TF name -> the file's name of it
    for (const io::TorchTensor& info : r.tensors()) {
        HfName m{info.name, false};
        if (info.name.find('/') == std::string::npos && !model_tensor_name(path, info.name, &m, in.skipped))
            continue;
        if (std::string hf; !r.is_float(info)) {  // a model weight: an error, as for safetensors
            bool tr = false;
            if (tf_to_hf_name(m.tf_name, &hf, &tr))
                fail("{}: tensor \"{}\": expected a floating-point weight, found {}", path, info.name,
                     io::dtype_name(info.dtype));
            in.skipped.push_back(fmt::format("{} ({})", info.name, io::dtype_name(info.dtype)));
            continue;
        }
        Tensor t{m.tf_name, io::DType::F32, info.shape, std::vector<uint8_t>(info.numel * 4)};
        r.read_f32(info, {reinterpret_cast<float*>(t.bytes.data()), info.numel});
        if (m.transpose) {
            if (t.shape.size() != 2)
                fail("{}: tensor \"{}\": expected a 2-D Linear weight, found shape {}", path,
                     info.name, info.shape_str());
            t.bytes = transpose(t.bytes, t.shape[0], t.shape[1], 4);
            std::swap(t.shape[0], t.shape[1]);
        }
        if (is_copy(path, info.name, t, in, seen)) continue;
        in.tensors.push_back(std::move(t));
    }
    return in;
}
}  // namespace

Loaded read_checkpoint_tensors(const std::string& path, CheckpointFormat format) {
    return format == CheckpointFormat::tf_bundle ? read_tf(path)
           : format == CheckpointFormat::pytorch ? read_pt(path)
                                                 : read_safetensors(path, format == CheckpointFormat::hf_safetensors);
}

// A float tensor's values as fp32 (F32 bit for bit); false for other dtypes.
bool to_f32(const Tensor& t, std::vector<float>* out) {
    const size_t es = io::dtype_size(t.dtype), n = t.bytes.size() / es;
    out->resize(n);
    for (size_t i = 0; i < n; ++i) {
        const uint8_t* p = t.bytes.data() + i * es;
        switch (t.dtype) {
            case io::DType::F32: std::memcpy(&(*out)[i], p, 4); break;
            case io::DType::F16: (*out)[i] = io::half_to_float(uint16_t(p[0] | p[1] << 8)); break;
            case io::DType::BF16: {
                const uint32_t bits = uint32_t(p[0] | p[1] << 8) << 16;
                std::memcpy(&(*out)[i], &bits, 4);
                break;
            }
            case io::DType::F64: {
                double d;
                std::memcpy(&d, p, 8);
                (*out)[i] = float(d);
                break;
            }
            default: return false;
        }
    }
    return true;
}

// NVIDIA's vocabulary padding (checkpoint.hpp vocab_padding_rows) dropped from the input's word
// embeddings and MLM output bias, each noted in `notes`.
void drop_vocab_padding(const BertConfig& config, std::vector<Tensor>& tensors, std::vector<std::string>& notes) {
    const ParamTable pretraining(config, Heads::pretraining);
    for (Tensor& t : tensors) {
        const ParamInfo* p = pretraining.find(t.name);
        const int64_t extra = p ? vocab_padding_rows(config, t.name, p->shape, t.shape) : 0;
        if (extra == 0) continue;
        t.bytes.resize(t.bytes.size() / static_cast<size_t>(t.shape[0]) * static_cast<size_t>(p->shape[0]));
        notes.push_back(fmt::format("{} rows {}..{} (NVIDIA's vocabulary padding to a multiple of 8)", t.name,
                                    p->shape[0], t.shape[0] - 1));
        t.shape[0] = p->shape[0];
    }
}

// Every model tensor of the input must have the shape `config` gives it (a config of another size
// would be written beside the weights, and found wrong only by whatever loads them).
void check_config_fits(const BertConfig& config, const std::string& config_source, const std::vector<Tensor>& tensors) {
    const ParamTable pretraining(config, Heads::pretraining), squad(config, Heads::squad);
    for (const Tensor& t : tensors) {
        const ParamInfo* p = pretraining.find(t.name);
        if (p == nullptr) p = squad.find(t.name);
        if (p != nullptr && p->shape != t.shape)
            fail("{}: does not fit the weights: tensor \"{}\" has shape [{}], the config gives it [{}] "
                 "(hidden_size {}, intermediate_size {}, vocab_size {})",
                 config_source, t.name, fmt::join(t.shape, ", "), fmt::join(p->shape, ", "), config.hidden_size,
                 config.intermediate_size, config.vocab_size);
    }
    // And as many encoder layers: none beyond num_hidden_layers, none of them without a tensor
    // (when the input has encoder layers at all).
    std::vector<std::string> names;
    std::vector<bool> present(static_cast<size_t>(config.num_hidden_layers), false);
    for (const Tensor& t : tensors) {
        names.push_back(t.name);
        const int64_t layer = encoder_layer_of(t.name);
        if (layer >= 0 && layer < config.num_hidden_layers) present[static_cast<size_t>(layer)] = true;
    }
    refuse_deeper_layers(names, config_source + ": does not fit the weights", config.num_hidden_layers);
    const auto absent = std::find(present.begin(), present.end(), false);
    if (std::find(present.begin(), present.end(), true) == present.end()) return;
    if (absent != present.end())
        fail("{}: does not fit the weights: num_hidden_layers {}, but the input has no tensor of "
             "encoder layer {} (hint: the input's own bert_config.json)",
             config_source, config.num_hidden_layers, absent - present.begin());
    // And every tensor of those layers and of the embeddings: an output lacking one would be
    // refused by eval and initialised afresh by training, after a conversion that said nothing.
    std::sort(names.begin(), names.end());
    std::vector<std::string> lacking;
    for (const ParamInfo& p : pretraining.entries())
        if ((p.layer >= 0 || p.embedding) && !std::binary_search(names.begin(), names.end(), p.name))
            lacking.push_back(p.name);
    if (!lacking.empty())
        fail("{}: expected every tensor of the embeddings and the {} encoder layers, the input lacks {} "
             "(first: {}) (hint: a complete checkpoint; a model without heads or pooler converts)",
             config_source, config.num_hidden_layers, lacking.size(), lacking.front());
}

}  // namespace bertbench::model
