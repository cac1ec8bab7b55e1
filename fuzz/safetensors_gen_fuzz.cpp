// Structure-aware safetensors files (fuzz/recipe.hpp): the recipe writes the JSON header as text,
// so it can say what a serialiser would not: names repeated, TF / Hugging Face / NVIDIA names with
// hostile layer indices (layer.4294967296., layer.-1., layer.01.), dtypes valid and not, shape
// dims as edge integers, negatives, floats, 1e400 or strings, data_offsets consistent with the
// data section or overlapping, reversed, past the end, of the wrong arity; __metadata__ with our
// checkpoint format and a bert_config (the tiny model's, or with a hostile field), non-string
// values; the declared header length exact, padded, too long or too short; the data section the
// tensors' sizes (values from the recipe: NaN, inf, denormals) or not. Up to 12 tensors, or up to
// 3000 scalars. The file is opened as every loader does: SafetensorsReader (mapped) and every
// tensor read, format detection, load_checkpoint / import_hf_safetensors / load_init_checkpoint
// into the tiny model, convert_checkpoint to one of tf / safetensors / hf / pt.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_util.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint.hpp"
#include "model/param_table.hpp"
#include "recipe.hpp"

using namespace bertbench;
namespace fs = std::filesystem;

namespace {

std::string json_string(const std::string& s) {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A number as a file might spell it: mostly the value, else an edge or not an integer at all.
std::string number(fuzz::Recipe& r, int64_t value) {
    static constexpr std::array<const char*, 12> kOdd{
        "-1", "1.5", "1e400", "18446744073709551616", "18446744073709551615",
        "9223372036854775808", "4611686018427387904", "\"3\"", "[2]", "null", "-0", "2.0"};
    if (!r.one_in(8)) return std::to_string(value);
    return r.flip() ? std::to_string(r.hostile_i64()) : r.pick(kOdd);
}

std::string layer_name(fuzz::Recipe& r, const std::string& tf_name) {
    std::string hf;
    bool transpose = false;
    if (!model::tf_to_hf_name(tf_name, &hf, &transpose)) return tf_name;
    if (r.one_in(3)) {  // a hostile layer index where HF names carry one
        static constexpr std::array<const char*, 9> kIdx{"-1", "4294967296", "01", "2", "1e3",
                                                         " 1", "+1", "2147483648", ""};
        const size_t at = hf.find("layer.");
        if (at != std::string::npos) {
            const size_t dot = hf.find('.', at + 6);
            hf = hf.substr(0, at + 6) + r.pick(kIdx) + hf.substr(dot);
        }
    }
    if (r.one_in(6)) hf = "module." + hf;
    return hf;
}

struct Tensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    size_t bytes = 0;  // what the dtype and shape make, when they make sense
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const model::ParamTable table(fuzz::tiny_config(), model::Heads::pretraining);
    static const fs::path dir = fuzz::scratch_dir();
    fuzz::Recipe r(data, size);
    const std::string path = (dir / "model.safetensors").string();

    static constexpr std::array<const char*, 11> kDTypes{"F32", "F32", "F16", "BF16", "F64", "I64",
                                                         "I32", "I8", "U8", "BOOL", "F8_E4M3"};
    std::vector<Tensor> tensors;
    const bool many = r.one_in(16);
    const size_t n = many ? r.upto(3000) : r.upto(12);
    size_t data_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
        Tensor t;
        const model::ParamInfo& p = table.entries()[r.upto(table.entries().size() - 1)];
        t.dtype = r.one_in(6) ? r.pick(kDTypes) : "F32";
        if (many) {
            t.name = "t" + std::to_string(i);
        } else if (r.one_in(10) && !tensors.empty()) {
            t = tensors[r.upto(tensors.size() - 1)];  // the same name again
        } else {
            t.name = r.flip() ? p.name : layer_name(r, p.name);
            t.shape = p.shape;
            if (r.flip() && t.shape.size() == 2 && t.name.find('/') == std::string::npos)
                std::swap(t.shape[0], t.shape[1]);  // HF Linear [out, in]
            if (r.one_in(6)) t.shape.push_back(1);
            if (r.one_in(8) && !t.shape.empty()) t.shape[r.upto(t.shape.size() - 1)] = r.hostile_i64(8);
            if (r.one_in(10)) t.name = r.text(64);
        }
        io::DType dt = io::DType::F32;
        uint64_t numel = 1;
        bool ok = io::parse_dtype(t.dtype, &dt);
        for (int64_t d : t.shape) ok = ok && d >= 0 && !__builtin_mul_overflow(numel, uint64_t(d), &numel);
        t.bytes = ok && numel <= (1u << 16) ? numel * io::dtype_size(dt) : r.upto(64);
        data_bytes += t.bytes;
        tensors.push_back(std::move(t));
    }

    // The header, as text.
    std::string h = "{";
    bool first = true;
    const auto key = [&](const std::string& k) {
        h += first ? "" : ",";
        first = false;
        h += json_string(k) + ":";
    };
    if (r.flip()) {
        key("__metadata__");
        h += "{";
        std::string cfg = fuzz::tiny_config().to_json().dump();
        if (r.one_in(4)) {  // one field of the config made hostile
            nlohmann::json j = fuzz::tiny_config().to_json();
            static constexpr std::array<const char*, 6> kField{"vocab_size", "hidden_size",
                "num_hidden_layers", "num_attention_heads", "max_position_embeddings", "type_vocab_size"};
            j[r.pick(kField)] = r.hostile_i64(4);
            cfg = j.dump();
        }
        h += json_string("format") + ":" + json_string(r.one_in(8) ? "other" : model::kCheckpointFormat);
        if (r.flip()) h += "," + json_string("bert_config") + ":" + json_string(cfg);
        if (r.one_in(8)) h += "," + json_string("x") + ":" + (r.flip() ? "5" : "{\"a\":[1]}");
        h += "}";
    }
    size_t offset = 0;
    for (const Tensor& t : tensors) {
        key(t.name);
        h += "{\"dtype\":" + (r.one_in(16) ? std::string("7") : json_string(t.dtype)) + ",\"shape\":[";
        for (size_t k = 0; k < t.shape.size(); ++k) h += (k ? "," : "") + number(r, t.shape[k]);
        size_t begin = offset, end = offset + t.bytes;
        if (r.one_in(10)) begin = r.upto(data_bytes), end = begin + r.upto(64);  // overlap, gap
        if (r.one_in(16)) std::swap(begin, end);
        h += "],\"data_offsets\":[" + number(r, int64_t(begin));
        if (!r.one_in(32)) h += "," + number(r, int64_t(end));
        if (r.one_in(32)) h += ",0";
        h += "]";
        if (r.one_in(32)) h += ",\"extra\":true";
        h += "}";
        offset += t.bytes;
    }
    h += "}";
    if (r.flip()) h.append((8 - h.size() % 8) % 8, ' ');  // the writers' alignment padding
    uint64_t declared = h.size();
    if (r.one_in(10)) declared = r.flip() ? r.hostile_u64(h.size() + 16) : h.size() - r.upto(h.size());

    std::string file(8, '\0');
    for (int k = 0; k < 8; ++k) file[k] = static_cast<char>(declared >> (8 * k));
    file += h;
    size_t data_len = offset;
    if (r.one_in(8)) data_len = r.upto(offset + 64);
    std::string values = r.bytes(data_len);
    values.resize(data_len, static_cast<char>(r.flip() ? 0 : 0xff));  // 0xff..: NaN
    file += values;
    fuzz::write_file(path, file);

    fuzz::expect_clean([&] {
        const io::SafetensorsReader f(path);
        for (const io::TensorInfo& t : f.tensors()) {
            if (t.end - t.begin > file.size()) std::abort();  // inside the file
            fuzz::expect_clean([&] {
                if (t.dtype == io::DType::F32 || t.dtype == io::DType::F16 ||
                    t.dtype == io::DType::BF16 || t.dtype == io::DType::F64)
                    (void)f.read_f32(t.name);
                else
                    (void)f.read_i64(t.name);
            });
        }
    });
    std::vector<float> params(table.total_floats());
    fuzz::expect_clean([&] { (void)model::detect_checkpoint_format(path); });
    fuzz::expect_clean([&] { model::load_checkpoint(path, table, params); });
    fuzz::expect_clean([&] { (void)model::import_hf_safetensors(path, table, params); });
    fuzz::expect_clean([&] { (void)model::load_init_checkpoint(path, table, params); });
    fuzz::convert_into(r, path, dir / "out", file.size());
    return 0;
}
