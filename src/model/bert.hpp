// The BERT forward/backward engine: encoder + pooler + pretraining heads (MLM at the gathered
// masked positions with the decoder tied to the word embeddings, NSP), and a SQuAD span head.
// Reference: google-research/bert modeling.py + run_pretraining.py / run_squad.py (MLPerf copy).
// Unpadded layout: dense layers on the N real tokens, attention per sequence. Activations live in
// one arena sized from a Plan at construction; forward/backward never allocate. Parameters are one
// flat buffer laid out by a ParamTable (kernels [in, out]); gradients ACCUMULATE (+=) into theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "model/batch.hpp"
#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"

namespace bertbench::model {

// Where a dropout mask sits in the encoder (dropout_mask(), for parity tests): the embeddings' (N,H);
// or encoder layer `layer`'s attention probabilities (per sequence b: NH×T_b×K_b, concatenated over
// b; K_b = Batch::key_lengths[b], or T_b without key_lengths), attention output (N,H) or output
// (N,H).
struct DropoutSite {
    enum Kind { embeddings, attention_probs, attention_output, output } kind = embeddings;
    int layer = 0;
};

// Sizes the arena once. A batch beyond it is an Error ("batch larger than planned: ...").
struct Plan {
    int max_batch = 0;        // B
    int max_seq = 0;          // longest sequence (tokens, incl. [CLS]/[SEP])
    int max_predictions = 0;  // P per sequence (the arena holds max_batch * max_predictions)
    // Inference only: the layers share one set of activation buffers and nothing is kept for a
    // backward (about 1/num_hidden_layers of the activation memory), and the GEMM weights are
    // kept packed for oneDNN's matmul (ops::PackedWeights: one more copy of them; results equal
    // a training engine's to fp32 rounding, docs/engine.md "Packed weights"). A training forward
    // or a backward() on such an engine is an Error.
    bool forward_only = false;
};

// The self-attention kernel (docs/engine.md "Fused attention"): materialized keeps the
// (NH·T·K) probabilities and dropout mask of every layer for the backward (ops/attention.hpp);
// fused keeps one log-sum-exp per row and head and recomputes them (ops/flash_attention.hpp).
// automatic: on a GPU the fused kernel; on the CPU the materialized kernel unless its probabilities
// would take more than a quarter of the machine's memory (EngineOptions::memory_bytes; BB_ATTENTION=fused|materialized|auto sets the
// choice itself, read at start-up: EngineEnvironment). Measured on AMD Zen 5, 2 threads, BERT-base seq 512 batch 8 training: fused saves
// 1.5 GB (peak RSS 5,986 -> 4,455 MB fp32, 5,552 -> 4,150 MB bf16) but runs 6.6 % (fp32) and
// 9.6 % (bf16) slower (the backward recomputes S and regenerates the dropout mask), so memory,
// not speed, is its reason (docs/engine.md "Fused attention"). On an H100 (BERT-base bf16 training,
// batch 16) the CUDA backend's materialized kernel took 2.6x (seq 128) and 12x (seq 512) the
// fused kernel's step time (docs/PERFORMANCE-gpu.md).
enum class AttentionKernel { automatic, materialized, fused };
// "fused", "materialized" or "auto" (-> automatic); anything else is an Error naming `flag`.
AttentionKernel parse_attention_kernel(const std::string& value, const std::string& flag);
// BB_ATTENTION's choice (automatic when unset); a bad value is an Error naming the variable.
AttentionKernel attention_kernel_from_environment();
// The kernel an engine with this choice runs (never automatic): probs_bytes is what the
// materialized kernel would hold (probabilities, masks and scratch), memory_bytes the machine's
// (0: unknown, materialized); fused_preferred: the backend's fused kernel is its faster one at
// every size (Backend::prefers_fused_attention, a GPU's; automatic is then fused).
// automatic on a backend without the fused kernel (fused_available false) is materialized; an
// explicit fused is then the backend's Error.
AttentionKernel resolve_attention_kernel(AttentionKernel choice, size_t probs_bytes, size_t memory_bytes,
                                         bool fused_available = true, bool fused_preferred = false);

// What the engine takes from the process's environment and machine: read once at start-up by
// main (BB_ATTENTION, the physical memory), and the defaults of every EngineOptions made after;
// the engine itself reads neither. Unset (tests): automatic, memory unknown.
struct EngineEnvironment {
    AttentionKernel attention = AttentionKernel::automatic;
    size_t memory_bytes = 0;
};
void set_engine_environment(const EngineEnvironment& e);
const EngineEnvironment& engine_environment();

}  // namespace bertbench::model
namespace bertbench::backend {
class Backend;
}
namespace bertbench::model {

struct EngineOptions {
    // bf16: the GEMMs of the encoder, the MLM transform and the tied decoder take bf16 operands
    // (a bf16 copy of the parameters, refreshed after weights_changed(); activations converted as
    // they enter a GEMM) and accumulate in fp32; everything else stays fp32. float engine only.
    ops::Precision precision = ops::Precision::fp32;
    AttentionKernel attention = engine_environment().attention;
    size_t memory_bytes = engine_environment().memory_bytes;  // the machine's: automatic, check_plan
    // The backend whose ops and memory the engine uses (backend/backend.hpp; not owned, it must
    // outlive the engine): null for a CPU backend of the engine's own. The parameters and
    // gradients given to forward/backward are then that backend's memory; the batch and the
    // results (losses, logits, outputs, masks) are host data, copied in and out by the engine.
    backend::Backend* backend = nullptr;
    // Pretraining only: the last layer's dense half (attention output, FFN, LayerNorms) runs on
    // the rows its heads read — each sequence's [CLS] and the masked positions — instead of every
    // row: the same losses and gradients to fp32 rounding, fewer FLOPs (HazyResearch's MLPerf
    // v2.0 BERT submission's `last_layer_subset`; docs/engine.md). The attention still reads
    // every row's keys and values. Off by default (the reference's computation, bit for bit);
    // sequence_output() then holds those rows only.
    bool last_layer_subset = false;
};

struct Losses {
    double total = 0, mlm_loss = 0, nsp_loss = 0;
    double mlm_correct = 0, mlm_weight = 0;  // Σw·[argmax==label], Σw  (ties -> lowest id)
    int nsp_correct = 0, nsp_count = 0;
    int mlm_count = 0;                         // masked positions with w > 0
    double mlm_loss_sum = 0, nsp_loss_sum = 0;  // Σw·CE, ΣCE (the streaming sums of the eval)
};

// T = float for training/inference; T = double for finite-difference checks (same code path,
// OpenBLAS's dgemm instead of oneDNN's sgemm).
template <typename T>
class BasicBertPretrainer {
public:
    BasicBertPretrainer(const ParamTable& table, Plan plan, EngineOptions opts = {});
    ~BasicBertPretrainer();
    BasicBertPretrainer(const BasicBertPretrainer&) = delete;
    BasicBertPretrainer& operator=(const BasicBertPretrainer&) = delete;

    size_t arena_bytes() const;  // activations + saved state + scratch (+ bf16 copies), allocated once
    const Plan& plan() const;
    // bf16 engines: the parameters changed in place (an optimizer update, a load); the next
    // forward makes a new bf16 copy. (A different params buffer is noticed without this call.)
    void weights_changed();

    // params: the flat buffer described by `table`. training=true turns dropout on; dropout masks
    // are a pure function of (seed, step, site, element) via Philox-4x32-10, so they do not depend
    // on the thread count.
    Losses forward(std::span<const T> params, const Batch& batch, bool training, uint64_t seed,
                   uint64_t step);
    // Backward of the last forward. ACCUMULATES (+=) into grads (same layout/size as params);
    // loss_scale multiplies the incoming dLoss (1.0 normally).
    void backward(std::span<T> grads, std::span<const T> params, const Batch& batch,
                  T loss_scale = T(1));
    // Data parallel (src/dist). The hook is called during backward() with the tensors whose
    // gradients have just become final, so their all-reduce can start: the pooler's and cls/*'s
    // (all but the tied word embeddings), then encoder layer l's for l = L-1 .. 0, then the
    // embeddings'. An empty function removes it.
    void set_backward_hook(GradientsReady hook);
    // For the next backward() only: normalise the masked-LM loss by the GLOBAL batch's Σw over
    // `replicas` equal replicas whose gradients are then averaged (coefficient w·replicas/(Σw +
    // 1e-5)), so that N replicas × b sequences give the gradient of one batch of N·b sequences.
    void set_global_mlm_weight(double weight_sum, int replicas);

    std::span<const T> mlm_logits() const;       // (P, V) of the last forward
    std::span<const T> nsp_logits() const;       // (B, 2)
    // (N, H) final encoder output, packed tokens; with last_layer_subset (B + P, H): the [CLS]
    // rows, then the masked positions'
    std::span<const T> sequence_output() const;
    std::span<const T> pooled_output() const;    // (B, H) tanh pooler output
    // The dropout mask the last training forward used at `site`, for parity tests: 1 = kept;
    // empty when dropout was off there. With the fused attention kernel the attention_probs mask
    // is not stored; it is regenerated from the dropout stream on this call (the same bits the
    // kernel used).
    std::span<const uint8_t> dropout_mask(DropoutSite site) const;
    bool fused_attention() const;  // the attention kernel this engine runs (EngineOptions)

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

using BertPretrainer = BasicBertPretrainer<float>;
using BertPretrainerF64 = BasicBertPretrainer<double>;

// SQuAD head on the same encoder (table built with Heads::squad): logits = seq_out · Wᵀ + b with
// W = cls/squad/output_weights [2, H]; start = column 0, end = column 1. Loss: (mean_b CE(start
// over ALL T_b rows of sequence b) + mean_b CE(end)) / 2. Which rows a sequence has decides the
// mode:
//  - reference mode (run_squad.py exactly): padded features, one sequence per feature with all
//    max_seq_length positions and Batch::key_lengths = Σinput_mask (model::padded_batch /
//    append_padded_sequence). Padding rows run through the encoder as queries over the real
//    keys, so their logits, the softmax over max_seq_length positions in the loss, and every
//    gradient are run_squad.py's (compute_loss: one_hot · log_softmax over the sequence).
//  - real-tokens-only mode: only the real tokens, no key_lengths; the softmax then spans the real
//    tokens only (as Hugging Face's unpadded models do) and differs from the reference's loss.
struct SpanLosses {
    double total = 0;
};
template <typename T>
class BasicBertSquad {
public:
    BasicBertSquad(const ParamTable& table, Plan plan, EngineOptions opts = {});
    ~BasicBertSquad();
    BasicBertSquad(const BasicBertSquad&) = delete;
    BasicBertSquad& operator=(const BasicBertSquad&) = delete;

    size_t arena_bytes() const;
    void weights_changed();  // as BasicBertPretrainer::weights_changed
    // start/end positions are within-sequence row indices in [0, T_b), (B) each (a padding row
    // is allowed); pass empty spans for inference (the loss is then 0 and backward must not be
    // called).
    SpanLosses forward(std::span<const T> params, const Batch& batch,
                       std::span<const int32_t> start_positions,
                       std::span<const int32_t> end_positions, bool training, uint64_t seed,
                       uint64_t step);
    void backward(std::span<T> grads, std::span<const T> params, const Batch& batch,
                  T loss_scale = T(1));
    // (N) per packed row, padding rows included in reference mode; sequence b is [o[b], o[b+1]).
    std::span<const T> start_logits() const;
    std::span<const T> end_logits() const;    // (N)
    // As BasicBertPretrainer::dropout_mask.
    std::span<const uint8_t> dropout_mask(DropoutSite site) const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

using BertSquad = BasicBertSquad<float>;
using BertSquadF64 = BasicBertSquad<double>;

// forward_flops(config, batch, heads): model/cost.hpp.

}  // namespace bertbench::model
