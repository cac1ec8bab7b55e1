// The attention-kernel choice, the engine environment main reads at start-up (bert.hpp), and the
// materialized kernel's memory figure (encoder.hpp).
#include <cstdlib>

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

AttentionKernel resolve_attention_kernel(AttentionKernel choice, size_t probs_bytes,
                                         size_t memory_bytes, bool fused_available) {
    if (choice != AttentionKernel::automatic) return choice;
    return fused_available && memory_bytes > 0 && probs_bytes > memory_bytes / 4 ? AttentionKernel::fused
                                                                                 : AttentionKernel::materialized;
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
}  // namespace detail

}  // namespace bertbench::model
