// ParamTable: names, shapes and offsets of BERT's parameters, and the reference initialisation.
// Names and shapes follow google-research/bert modeling.py (BertModel) and run_pretraining.py
// (get_masked_lm_output, get_next_sentence_output); run_squad.py for cls/squad/*. Checked against
// the variable listing of Google's released BERT-Base checkpoint (tests/model/param_table_test).
// Initialisation is counter-based per tensor (seed, name), so it does not depend on table order,
// on the heads present or on the thread count.
#include "model/param_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "core/sysinfo.hpp"

namespace bertbench::model {
namespace {

constexpr size_t kAlignFloats = 16;  // 64 bytes

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

enum class Init { truncated_normal, zeros, ones };

Init init_kind(const std::string& name) {
    const auto ends_with = [&](std::string_view s) { return name.ends_with(s); };
    if (ends_with("/gamma")) return Init::ones;
    if (ends_with("/beta") || ends_with("bias")) return Init::zeros;  // bias, output_bias
    return Init::truncated_normal;  // embeddings, kernels, output_weights
}

// a * b and a + b, or an Error: the config's bounds keep them far inside 64 bits, but a table
// whose sizes wrapped around would hand out overlapping views of a too-small buffer.
size_t checked_mul(size_t a, size_t b) {
    size_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        fail("model config: parameter sizes overflow 64 bits ({} x {})", a, b);
    return r;
}
size_t checked_add(size_t a, size_t b) {
    size_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
        fail("model config: parameter sizes overflow 64 bits ({} + {})", a, b);
    return r;
}

// Error if the parameters alone (fp32) exceed the machine's memory, naming the part of the model
// that dominates, before anything is allocated.
void check_fits_in_memory(const BertConfig& c, size_t total_floats) {
    const uint64_t memory = sysinfo::memory_bytes();
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double need = static_cast<double>(total_floats) * sizeof(float);
    if (memory == 0 || need <= static_cast<double>(memory)) return;
    const double H = c.hidden_size, I = c.intermediate_size;
    const std::pair<double, std::string> parts[] = {
        {c.vocab_size * H,
         fmt::format("word embeddings: vocab_size {} x hidden_size {}", c.vocab_size,
                     c.hidden_size)},
        {c.max_position_embeddings * H,
         fmt::format("position embeddings: max_position_embeddings {} x hidden_size {}",
                     c.max_position_embeddings, c.hidden_size)},
        {c.type_vocab_size * H,
         fmt::format("token type embeddings: type_vocab_size {} x hidden_size {}",
                     c.type_vocab_size, c.hidden_size)},
        {c.num_hidden_layers * (4 * H * H + 2 * H * I),
         fmt::format("encoder: num_hidden_layers {} x (4 x hidden_size {}^2 + 2 x hidden_size x "
                     "intermediate_size {})",
                     c.num_hidden_layers, c.hidden_size, c.intermediate_size)},
    };
    const auto* big = &parts[0];
    for (const auto& p : parts)
        if (p.first > big->first) big = &p;
    fail(
        "model config: the parameters need {:.1f} GiB, more than this machine's {:.1f} GiB of "
        "memory; most of it is the {} = {:.1f} GiB (hint: check bert_config.json)",
        need / gib, static_cast<double>(memory) / gib, big->second, big->first * 4 / gib);
}

}  // namespace

ParamTable::ParamTable(const BertConfig& config, Heads heads) : config_(config), heads_(heads) {
    config.validate("model config");
    const int64_t H = config.hidden_size, I = config.intermediate_size, V = config.vocab_size;
    int layer = -1;  // of the parameters added next
    bool embedding = true;
    auto add = [&](std::string name, std::vector<int64_t> shape) {
        ParamInfo p;
        p.layer = layer;
        p.embedding = embedding;
        p.size = 1;
        for (int64_t d : shape) p.size = checked_mul(p.size, static_cast<size_t>(d));
        p.decay = !excluded_from_decay(name);
        p.name = std::move(name);
        p.shape = std::move(shape);
        p.offset = total_;
        index_[p.name] = entries_.size();
        total_ = checked_add(total_, checked_add(p.size, kAlignFloats - 1) / kAlignFloats *
                                         kAlignFloats);
        entries_.push_back(std::move(p));
        return entries_.back().offset;
    };
    EmbeddingParams& e = embeddings_;
    e.word = add("bert/embeddings/word_embeddings", {V, H});
    e.type = add("bert/embeddings/token_type_embeddings", {config.type_vocab_size, H});
    e.position = add("bert/embeddings/position_embeddings", {config.max_position_embeddings, H});
    e.gamma = add("bert/embeddings/LayerNorm/gamma", {H});
    e.beta = add("bert/embeddings/LayerNorm/beta", {H});
    embedding = false;
    for (int l = 0; l < config.num_hidden_layers; ++l) {
        layer = l;
        const std::string p = "bert/encoder/layer_" + std::to_string(l) + "/";
        LayerParams& w = layers_.emplace_back();
        w.wq = add(p + "attention/self/query/kernel", {H, H});
        w.bq = add(p + "attention/self/query/bias", {H});
        w.wk = add(p + "attention/self/key/kernel", {H, H});
        w.bk = add(p + "attention/self/key/bias", {H});
        w.wv = add(p + "attention/self/value/kernel", {H, H});
        w.bv = add(p + "attention/self/value/bias", {H});
        w.wo = add(p + "attention/output/dense/kernel", {H, H});
        w.bo = add(p + "attention/output/dense/bias", {H});
        w.g1 = add(p + "attention/output/LayerNorm/gamma", {H});
        w.b1 = add(p + "attention/output/LayerNorm/beta", {H});
        w.wi = add(p + "intermediate/dense/kernel", {H, I});
        w.bi = add(p + "intermediate/dense/bias", {I});
        w.wout = add(p + "output/dense/kernel", {I, H});
        w.bout = add(p + "output/dense/bias", {H});
        w.g2 = add(p + "output/LayerNorm/gamma", {H});
        w.b2 = add(p + "output/LayerNorm/beta", {H});
    }
    layer = -1;
    PretrainingHeadParams& h = pretraining_;
    h.pooler_w = add("bert/pooler/dense/kernel", {H, H});
    h.pooler_b = add("bert/pooler/dense/bias", {H});
    if (heads == Heads::pretraining) {
        h.transform_w = add("cls/predictions/transform/dense/kernel", {H, H});
        h.transform_b = add("cls/predictions/transform/dense/bias", {H});
        h.transform_g = add("cls/predictions/transform/LayerNorm/gamma", {H});
        entries_.back().decayed_in_tf2 = true;  // TF2's masked_lm.py keeps its TF1 name
        h.transform_beta = add("cls/predictions/transform/LayerNorm/beta", {H});
        entries_.back().decayed_in_tf2 = true;
        h.output_bias = add("cls/predictions/output_bias", {V});
        h.nsp_w = add("cls/seq_relationship/output_weights", {2, H});
        h.nsp_b = add("cls/seq_relationship/output_bias", {2});
    } else if (heads == Heads::squad) {
        for (ParamInfo& p : entries_) p.trained = p.layer >= 0 || p.embedding;  // the pooler is not
        squad_.w = add("cls/squad/output_weights", {2, H});
        squad_.b = add("cls/squad/output_bias", {2});
    }
    check_fits_in_memory(config, total_);
}

const PretrainingHeadParams& ParamTable::pretraining_head() const {
    if (heads_ != Heads::pretraining)
        fail("engine: BertPretrainer needs a ParamTable with the pretraining heads (got another "
             "head set; hint: ParamTable(config, Heads::pretraining))");
    return pretraining_;
}

const SquadHeadParams& ParamTable::squad_head() const {
    if (heads_ != Heads::squad)
        fail("engine: BertSquad needs a ParamTable with the squad head (hint: ParamTable(config, "
             "Heads::squad))");
    return squad_;
}

const ParamInfo* ParamTable::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
}

const ParamInfo& ParamTable::at(const std::string& name) const {
    const ParamInfo* p = find(name);
    if (p == nullptr)
        fail(
            "parameter table: no tensor named \"{}\" (expected a name such as "
            "bert/encoder/layer_0/attention/self/query/kernel; the table has {} tensors)",
            name, entries_.size());
    return *p;
}

size_t ParamTable::num_parameters() const {
    size_t n = 0;
    for (const ParamInfo& p : entries_) n += p.size;
    return n;
}

std::span<float> ParamTable::view(std::span<float> buffer, const std::string& name) const {
    BB_CHECK(buffer.size() >= total_);
    const ParamInfo& p = at(name);
    return buffer.subspan(p.offset, p.size);
}

std::span<const float> ParamTable::view(std::span<const float> buffer,
                                        const std::string& name) const {
    BB_CHECK(buffer.size() >= total_);
    const ParamInfo& p = at(name);
    return buffer.subspan(p.offset, p.size);
}

bool ParamTable::excluded_from_decay(const std::string& name) {
    // run_pretraining.py: exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]
    // (re.search).
    return name.find("LayerNorm") != std::string::npos ||
           name.find("layer_norm") != std::string::npos || name.find("bias") != std::string::npos;
}

void ParamTable::initialize(std::span<float> buffer, uint64_t seed) const {
    BB_CHECK(buffer.size() >= total_);
    std::fill(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(total_), 0.0f);
    const double stddev = config_.initializer_range;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t t = 0; t < entries_.size(); ++t) {
        const ParamInfo& p = entries_[t];
        float* out = buffer.data() + p.offset;
        const Init kind = init_kind(p.name);
        if (kind != Init::truncated_normal) {
            std::fill(out, out + p.size, kind == Init::ones ? 1.0f : 0.0f);
            continue;
        }
        // tf.truncated_normal_initializer: standard normals outside [-2, 2] are redrawn.
        // Box-Muller on a counter-based stream keyed by (seed, name).
        const uint64_t key = splitmix64(seed ^ splitmix64(fnv1a(p.name)));
        uint64_t counter = 0;
        auto uniform = [&]() {  // in (0, 1]
            return (static_cast<double>(splitmix64(key + counter++) >> 11) + 1.0) * 0x1.0p-53;
        };
        size_t i = 0;
        while (i < p.size) {
            const double r = std::sqrt(-2.0 * std::log(uniform()));
            const double theta = 2.0 * std::numbers::pi * uniform();
            for (double z : {r * std::cos(theta), r * std::sin(theta)}) {
                if (i < p.size && std::abs(z) <= 2.0) out[i++] = static_cast<float>(z * stddev);
            }
        }
    }
}

}  // namespace bertbench::model
