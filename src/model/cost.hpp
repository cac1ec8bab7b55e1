// The engine's op list: every op the BERT engine (and the micro-step around it) runs, the label
// the profiler shows for it, and its cost for a batch: FLOPs and the minimal memory traffic (fp32,
// each operand read or written once). The one source that the profiler's labels, bench's per-op
// table, the model FLOPs behind MFU (forward_flops) read; nothing parses a label back.
// Costs are analytic and approximate for the element-wise ops (documented as such in
// docs/benchmark.md); backward GEMMs are 2x the forward's FLOPs and bytes, element-wise backward
// ops read about twice what their forward reads.
#pragma once

#include <cstdint>
#include <utility>

#include "core/profile.hpp"
#include "model/batch.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "ops/bf16.hpp"

namespace bertbench::model {

enum class Op : uint8_t {
    embeddings, layernorm, dropout_residual, gemm_qkv, attention, gemm_attn_out, gemm_ffn_in, gelu,
    gemm_ffn_out, pooler_nsp, mlm_transform, gemm_mlm_decoder, loss, span_head,
    weight_copies,    // a bf16 engine's copy of the weights (or an inference engine's packing)
    other,            // the model's own bookkeeping between the ops above
    zero_grads, clip_accumulate, optimizer,  // the micro-step's (Pass::step)
};
inline constexpr int kNumOps = static_cast<int>(Op::optimizer) + 1;
enum class Pass : uint8_t { forward, backward, step };

// The profiler's label of (op, pass): "gemm qkv fwd", "zero grads", ... A static string.
const char* op_label(Op op, Pass pass);
// The profiler's tag of (op, pass), and back.
constexpr int op_tag(Op op, Pass pass) { return static_cast<int>(op) * 3 + static_cast<int>(pass); }
std::pair<Op, Pass> op_from_tag(int tag);

struct Cost {
    double flops = 0, bytes = 0;
};
// The cost of (op, pass) over one micro-batch b (the optimizer's: one update; n_params floats);
// last_layer_subset: the engine's EngineOptions::last_layer_subset (last_layer_rows); precision
// the engine's: an int8 engine runs its dense halves' residuals, LayerNorms and GELU in its
// products' epilogues (their time is the products'), and no dropout, so those ops cost it nothing
// but the embeddings' LayerNorm.
Cost op_cost(Op op, Pass pass, const BertConfig& c, const Batch& b, double n_params, bool last_layer_subset = false,
             ops::Precision precision = ops::Precision::fp32);
// The rows the last layer's dense half (attention output, FFN, LayerNorms) runs on: with
// last_layer_subset the B [CLS] rows and P masked positions where they are fewer than N, else N.
double last_layer_rows(const Batch& b, bool last_layer_subset);

// Model FLOPs of one forward with these heads: the matmuls (2 per multiply-add) on every packed
// row (padding rows too when the batch has key_lengths), attention per sequence over its K_b keys,
// the MLM head on the P gathered positions, pooler + NSP on B rows (pretraining), the span head
// on every row (squad), the last layer's dense half on last_layer_rows(); a training step is 3x
// (backward = 2x forward).
double forward_flops(const BertConfig& c, const Batch& b, Heads heads = Heads::pretraining,
                     bool last_layer_subset = false);

}  // namespace bertbench::model

// Marks "from here on, op `op` of pass `pass`" for the profiler (core/profile.hpp), tagged.
#define BB_PROFILE_OP(op, pass) \
    BB_PROFILE_MARK_TAGGED(::bertbench::model::op_label(op, pass), ::bertbench::model::op_tag(op, pass))
// The same until the end of the C++ scope. The label is looked up only while profiling.
#define BB_PROFILE_OP_SCOPE(op, pass)                                                              \
    const ::bertbench::profile::Scope BB_PROFILE_CAT(bb_profile_scope_, __LINE__)(               \
        ::bertbench::profile::g_enabled ? ::bertbench::model::op_label(op, pass) : nullptr,      \
        ::bertbench::model::op_tag(op, pass))
