// The engine's op list and cost model (cost.hpp).
#include "model/cost.hpp"

#include "core/error.hpp"

namespace bertbench::model {
namespace {

// labels[op][pass]; null where the op has no such pass
constexpr const char* kLabels[kNumOps][3] = {
    {"embeddings fwd", "embeddings bwd", nullptr},
    {"layernorm fwd", "layernorm bwd", nullptr},
    {"dropout+residual fwd", "dropout+residual bwd", nullptr},
    {"gemm qkv fwd", "gemm qkv bwd", nullptr},
    {"attention fwd", "attention bwd", nullptr},
    {"gemm attn-out fwd", "gemm attn-out bwd", nullptr},
    {"gemm ffn-in fwd", "gemm ffn-in bwd", nullptr},
    {"gelu fwd", "gelu bwd", nullptr},
    {"gemm ffn-out fwd", "gemm ffn-out bwd", nullptr},
    {"pooler+nsp fwd", "pooler+nsp bwd", nullptr},
    {"mlm transform fwd", "mlm transform bwd", nullptr},
    {"gemm mlm-decoder fwd", "gemm mlm-decoder bwd", nullptr},
    {"loss fwd", "loss bwd", nullptr},
    {"span head fwd", "span head bwd", nullptr},
    {"weight copies", nullptr, nullptr},
    {"other fwd", "other bwd", nullptr},
    {nullptr, nullptr, "zero grads"},
    {nullptr, nullptr, "clip+accumulate"},
    {nullptr, nullptr, "optimizer (LAMB/AdamW step)"},
};

}  // namespace

const char* op_label(Op op, Pass pass) {
    const char* l = kLabels[static_cast<int>(op)][static_cast<int>(pass)];
    BB_CHECK(l != nullptr);
    return l;
}

std::pair<Op, Pass> op_from_tag(int tag) {
    BB_CHECK(tag >= 0 && tag < kNumOps * 3);
    return {static_cast<Op>(tag / 3), static_cast<Pass>(tag % 3)};
}

double last_layer_rows(const Batch& b, bool last_layer_subset) {
    const int rows = b.batch_size + b.num_predictions();
    return last_layer_subset && rows < b.num_tokens() ? rows : b.num_tokens();
}

Cost op_cost(Op op, Pass pass, const BertConfig& c, const Batch& b, double n_params, bool last_layer_subset,
             ops::Precision precision) {
    const double N = b.num_tokens(), H = c.hidden_size, I = c.intermediate_size, L = c.num_hidden_layers,
                 V = c.vocab_size, B = b.batch_size, P = b.num_predictions(), A = c.num_attention_heads;
    // the rows of every layer's dense half: N in each but the last, which may run on fewer
    const double R = last_layer_rows(b, last_layer_subset), NL = L > 0 ? (L - 1) * N + R : 0;
    double t2 = 0;  // Σ_b T_b·K_b (K_b = T_b without key_lengths)
    for (int s = 0; s < b.batch_size; ++s) {
        const double t = b.seq_offsets[s + 1] - b.seq_offsets[s];
        t2 += t * (b.key_lengths.empty() ? t : b.key_lengths[static_cast<size_t>(s)]);
    }
    const double k = pass == Pass::backward ? 2.0 : 1.0;
    // 1 where the dense halves' element-wise ops run on their own, 0 in an int8 engine's epilogues
    const double separate = precision == ops::Precision::int8 ? 0 : 1;
    const auto gemm = [&](double m, double n, double kk, double times) {
        return Cost{k * 2 * m * n * kk * times, k * 4 * (m * kk + kk * n + m * n) * times};
    };
    const auto dense = [&](double n, double kk) {  // a dense layer of every layer's dense half
        const Cost most = gemm(N, n, kk, std::max(L - 1, 0.0)), last = gemm(R, n, kk, L > 0 ? 1 : 0);
        return Cost{most.flops + last.flops, most.bytes + last.bytes};
    };
    switch (op) {
        case Op::gemm_qkv: return gemm(N, H, H, 3 * L);
        case Op::gemm_attn_out: return dense(H, H);
        case Op::gemm_ffn_in: return dense(I, H);
        case Op::gemm_ffn_out: return dense(H, I);
        case Op::gemm_mlm_decoder: return gemm(P, V, H, 1);
        case Op::attention: return {k * 4 * t2 * H * L, k * 4 * L * (4 * N * H + 2 * A * t2)};
        case Op::layernorm: return {k * 8 * (separate * 2 * NL + N) * H, k * 8 * (separate * 2 * NL + N) * H};
        case Op::gelu: return {separate * k * 10 * NL * I, separate * k * 8 * NL * I};
        case Op::dropout_residual: return {separate * k * 2 * 2 * NL * H, separate * k * 13 * 2 * NL * H};
        case Op::embeddings: return {k * 10 * N * H, k * 4 * 8 * N * H};
        case Op::pooler_nsp: {  // the pooler's dense layer and the NSP classifier on B rows
            const Cost pooler = gemm(B, H, H, 1), nsp = gemm(B, 2, H, 1);
            return {pooler.flops + nsp.flops, pooler.bytes + nsp.bytes};
        }
        case Op::span_head: return gemm(N, 2, H, 1);  // its loss is not counted
        case Op::mlm_transform: return gemm(P, H, H, 1);
        case Op::loss: return {k * 4 * P * V, k * 4 * P * V};
        case Op::optimizer: return {20 * n_params, 4 * 10 * n_params};
        case Op::clip_accumulate: return {2 * n_params, 4 * n_params};
        case Op::zero_grads: return {0, 4 * n_params};
        case Op::weight_copies:
        case Op::other: return {};
    }
    return {};
}

double forward_flops(const BertConfig& c, const Batch& b, Heads heads, bool last_layer_subset) {
    double f = 0;
    for (const Op op : {Op::gemm_qkv, Op::attention, Op::gemm_attn_out, Op::gemm_ffn_in, Op::gemm_ffn_out})
        f += op_cost(op, Pass::forward, c, b, 0, last_layer_subset).flops;
    if (heads == Heads::pretraining)
        for (const Op op : {Op::pooler_nsp, Op::mlm_transform, Op::gemm_mlm_decoder})
            f += op_cost(op, Pass::forward, c, b, 0).flops;
    if (heads == Heads::squad) f += op_cost(Op::span_head, Pass::forward, c, b, 0).flops;
    return f;
}

}  // namespace bertbench::model
