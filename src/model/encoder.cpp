// The attention-kernel choice, the engine environment main reads at start-up (bert.hpp), and the
// materialized kernel's memory figure (encoder.hpp).
#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/error.hpp"
#include "model/encoder.hpp"

namespace bertbench::model {

AttentionKernel parse_attention_kernel(const std::string& value, const std::string& flag) {
    if (value == "fused") return AttentionKernel::fused;
    if (value == "materialized") return AttentionKernel::materialized;
    if (value == "auto") return AttentionKernel::automatic;
    fail("{}: expected fused, materialized or auto, got \"{}\"", flag, value);
}

// Fused from 256 tokens on. The fused kernel recomputes q kᵀ in the backward (five small GEMMs per
// tile instead of four large ones per head) and saves B·NH·T²·(5·L + 4) bytes. Measured with
// `BB_ATTENTION=… bench --model=base --mode=train --batch_size=8 --threads=2` (interleaved, loaded
// 2-core host): at seq 512 the step times were equal within noise at 1.5 GB less RSS; at seq 128
// the materialized kernel was a few per cent faster for 0.14 GB more, so it stays below 256.
AttentionKernel attention_kernel_from_environment() {
    const char* e = std::getenv("BB_ATTENTION");
    return e ? parse_attention_kernel(e, "BB_ATTENTION (environment)") : AttentionKernel::automatic;
}

AttentionKernel resolve_attention_kernel(AttentionKernel choice, size_t probs_bytes, size_t memory_bytes,
                                         bool fused_available, bool fused_preferred) {
    if (choice != AttentionKernel::automatic) return choice;
    const bool large = memory_bytes > 0 && probs_bytes > memory_bytes / 4;
    return fused_available && (fused_preferred || large) ? AttentionKernel::fused : AttentionKernel::materialized;
}

namespace {
EngineEnvironment g_environment;
}
void set_engine_environment(const EngineEnvironment& e) { g_environment = e; }
const EngineEnvironment& engine_environment() { return g_environment; }

namespace detail {
// What the materialized kernel holds for this plan: per layer the fp32 probabilities and their
// dropout mask bytes, plus one fp32 probs-sized scratch (forward-only: one layer's, no mask).
size_t materialized_probs_bytes(const BertConfig& c, const Plan& p) {
    const size_t per = static_cast<size_t>(p.max_batch) * c.num_attention_heads * p.max_seq * p.max_seq;
    return p.forward_only ? per * 8 : per * (5 * static_cast<size_t>(c.num_hidden_layers) + 4);
}

// A plan whose activations alone (a lower bound: a float per token and hidden unit for each
// layer's saved input; two such buffers forward-only) exceed the machine's memory throws
// std::bad_alloc, which the commands report as "out of memory" with the size, before the engine
// allocates and zeroes one batch-sized buffer after another until the kernel's OOM killer ends it.
void check_plan(const Plan& plan, const BertConfig& cfg, size_t memory_bytes) {
    if (plan.max_batch <= 0 || plan.max_seq <= 0 || plan.max_predictions < 0)
        fail("engine plan: expected max_batch > 0, max_seq > 0, max_predictions >= 0, got {}, {}, {}",
             plan.max_batch, plan.max_seq, plan.max_predictions);
    if (plan.max_seq > cfg.max_position_embeddings)
        fail("engine plan: max_seq {} exceeds max_position_embeddings {} of the model config (hint: lower "
             "--max_seq_length)",
             plan.max_seq, cfg.max_position_embeddings);
    if (memory_bytes > 0 && plan_activation_bytes(plan, cfg) > static_cast<double>(memory_bytes))
        throw std::bad_alloc();
}

double plan_activation_bytes(const Plan& p, const BertConfig& c) {
    const double tokens = static_cast<double>(p.max_batch) * p.max_seq;
    const double saved = p.forward_only ? 2.0 : c.num_hidden_layers + 1.0;
    return tokens * c.hidden_size * 4.0 * saved;
}

void check_batch(const Batch& b, const BertConfig& cfg, const Plan& plan, size_t params_size,
                 size_t total_params) {
    if (params_size < total_params)
        fail("engine: parameter buffer has {} floats, expected at least {} (hint: build it "
             "from the same ParamTable)",
             params_size, total_params);
    if (b.batch_size < 0 || static_cast<int>(b.seq_offsets.size()) != b.batch_size + 1)
        fail("engine: batch: seq_offsets has {} entries, expected batch_size + 1 = {}",
             b.seq_offsets.size(), b.batch_size + 1);
    if (b.batch_size > plan.max_batch)
        fail("engine: batch larger than planned: batch_size {} > max_batch {} (hint: raise "
             "the Plan's max_batch)",
             b.batch_size, plan.max_batch);
    if (b.seq_offsets[0] != 0) fail("engine: batch: seq_offsets[0] = {}, expected 0", b.seq_offsets[0]);
    for (int i = 0; i < b.batch_size; ++i) {
        const int t = b.seq_offsets[i + 1] - b.seq_offsets[i];
        if (t < 1 || t > plan.max_seq)
            fail("engine: batch larger than planned: sequence {} has {} tokens, expected 1.."
                 "{} (max_seq of the Plan)",
                 i, t, plan.max_seq);
    }
    if (!b.key_lengths.empty()) {
        if (static_cast<int>(b.key_lengths.size()) != b.batch_size)
            fail("engine: batch: key_lengths has {} entries, expected batch_size = {} (or "
                 "none)",
                 b.key_lengths.size(), b.batch_size);
        for (int i = 0; i < b.batch_size; ++i) {
            const int t = b.seq_offsets[i + 1] - b.seq_offsets[i];
            if (b.key_lengths[i] < 1 || b.key_lengths[i] > t)
                fail("engine: batch: key_lengths[{}] = {}, expected 1..{} (the sequence's "
                     "rows)",
                     i, b.key_lengths[i], t);
        }
    }
    const int N = b.num_tokens();
    if (static_cast<int>(b.input_ids.size()) != N || static_cast<int>(b.segment_ids.size()) != N)
        fail("engine: batch: {} input_ids and {} segment_ids, expected N = {} tokens",
             b.input_ids.size(), b.segment_ids.size(), N);
    for (int i = 0; i < N; ++i) {
        if (b.input_ids[i] < 0 || b.input_ids[i] >= cfg.vocab_size)
            fail("engine: batch: input_ids[{}] = {} outside the vocabulary [0, {}) (hint: "
                 "vocab file and bert_config.json vocab_size disagree)",
                 i, b.input_ids[i], cfg.vocab_size);
        if (b.segment_ids[i] < 0 || b.segment_ids[i] >= cfg.type_vocab_size)
            fail("engine: batch: segment_ids[{}] = {} outside [0, {})", i, b.segment_ids[i],
                 cfg.type_vocab_size);
    }
}

// The int8 engine's set-up (Encoder::init_int8, encoder.hpp).
template <typename T>
void Encoder<T>::init_int8(const Plan& plan) {
    if constexpr (!std::is_same_v<T, float>) fail("engine: int8 precision needs the float engine");
    if (!plan.forward_only)
        fail("engine: int8 is for inference (eval, squad --do_predict, bench --mode=infer); training "
             "runs in fp32 or bf16");
    int8_ = be_.int8_weights();
    if (!int8_) fail("[backend {}] has no int8 path (int8 inference runs on the CPU backend)", be_.name());
    (void)BB_OP(be_, quantize_rows);
    (void)BB_OP(be_, linear_forward_int8);
    (void)BB_OP(be_, attention_forward_int8);
    for (const LayerParams& w : layers_) {
        const size_t qkv[] = {w.wq, w.wk, w.wv}, bias[] = {w.bq, w.bk, w.bv};
        int8_->add_side_by_side(qkv, bias, H_, H_);
        int8_->add(w.wo, H_, H_);
        int8_->add(w.wi, H_, I_);
        int8_->add(w.wout, I_, H_);
    }
    const size_t nmax = static_cast<size_t>(plan.max_batch) * plan.max_seq;
    q_qkv_.assign(be_, nmax * 3 * H_);
    s_qkv_.assign(be_, nmax * 3 * NH_);
    q_in_.assign(be_, nmax * H_);
    q_mid_.assign(be_, nmax * std::max(H_, I_));  // the attention's context (H), then FFN-in's output (I)
    s_in_.assign(be_, nmax);
    s_mid_.assign(be_, nmax);
}
template void Encoder<float>::init_int8(const Plan&);
template void Encoder<double>::init_int8(const Plan&);
}  // namespace detail

}  // namespace bertbench::model
