// The BERT encoder (embeddings -> L transformer layers) and the buffers it carves, shared by the
// pretraining model (bert.cpp) and the SQuAD span model (squad_head.cpp). Internal to src/model.
// Reference: google-research/bert modeling.py. Legend: B sequences, N packed real tokens, H hidden,
// I intermediate, NH heads, L layers. Its activations (activations.hpp) live in one arena carved at
// construction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "model/activations.hpp"
#include "model/bert.hpp"
#include "model/cost.hpp"
#include "model/engine_ops.hpp"
#include "ops/bf16.hpp"

namespace bertbench::model::detail {

inline ops::Activation activation_for(const BertConfig& c) {
    if (c.hidden_act == "gelu_erf") return ops::Activation::gelu_erf;
    if (c.hidden_act == "relu") return ops::Activation::relu;
    return ops::Activation::gelu_tanh;
}

// encoder.cpp: what the materialized attention kernel holds for this plan; a lower bound of the
// plan's activations in bytes (a float per token and hidden unit for each layer's saved input, two
// such buffers forward-only; in double, as batches may be absurd); the plan against the config and
// memory_bytes (0: unknown; std::bad_alloc above that bound), and the batch against the plan, the
// config and the table's size (total_params), each an Error naming what is wrong.
size_t materialized_probs_bytes(const BertConfig& c, const Plan& p);
double plan_activation_bytes(const Plan& p, const BertConfig& c);
void check_plan(const Plan& plan, const BertConfig& cfg, size_t memory_bytes = 0);
void check_batch(const Batch& b, const BertConfig& cfg, const Plan& plan, size_t params_size,
                 size_t total_params);

// ---------------------------------------------------------------------------------------------
// Encoder: embeddings -> L transformer layers. x[0] = dropout(LN(embeddings)), x[l+1] = layer_l(x[l]).
template <typename T>
class Encoder {
public:
    Encoder(backend::Backend& be, const ParamTable& table, Plan plan, EngineOptions opts, Arena<T>& arena)
        : be_(be), k_(engine_ops<T>(be)), cfg_(table.config()), plan_(plan), act_(activation_for(table.config())),
          fused_(resolve_attention_kernel(opts.attention, materialized_probs_bytes(table.config(), plan),
                                          opts.memory_bytes, be.ops().flash_attention_forward != nullptr,
                                          be.prefers_fused_attention()) ==
                 AttentionKernel::fused) {
        H_ = cfg_.hidden_size;
        I_ = cfg_.intermediate_size;
        NH_ = cfg_.num_attention_heads;
        L_ = cfg_.num_hidden_layers;
        check_plan(plan, cfg_, opts.memory_bytes);
        emb_ = table.embeddings();
        layers_ = table.layers();
        // the tensors each backward stage finishes: layer l's, then the pooler's and heads'
        // (stage L, before the encoder's backward), then the embeddings' (stage L + 1)
        ready_.resize(static_cast<size_t>(L_) + 2);
        for (const ParamInfo& p : table.entries()) {
            const size_t stage = p.embedding ? static_cast<size_t>(L_) + 1
                                 : p.layer >= 0 ? static_cast<size_t>(p.layer)
                                                : static_cast<size_t>(L_);
            ready_[stage].push_back({p.offset, p.offset + p.size});
        }
        total_params_ = table.total_floats();
        if (opts.last_layer_subset)  // the [CLS] rows and the masked positions, fewer than N
            max_rows_ = std::min(static_cast<size_t>(plan.max_batch) * plan.max_seq - 1,
                                 static_cast<size_t>(plan.max_batch) * (1 + plan.max_predictions));
        // int8 engines have no bf16 in them: every product is int8 (the dense layers, the
        // attention's, the MLM head's) but the pooler's and the classifiers', which stay fp32.
        if (opts.precision == ops::Precision::bf16) {
            if constexpr (!std::is_same_v<T, float>)
                fail("engine: {} precision needs the float engine", ops::precision_name(opts.precision));
            bf16_ = true;
            const size_t nmax = static_cast<size_t>(plan.max_batch) * plan.max_seq;
            const size_t pmax = static_cast<size_t>(plan.max_batch) * plan.max_predictions;
            wb_.assign(be_, total_params_);
            // Scratch. Backward: bf16(dy) of one dense layer from the start, the bf16 xᵀ of its
            // input (IN, N) ending at the end (N·OUT + IN·N: N·(H+I) for the FFN's, 2·N·H for the
            // square layers, the larger where I < H), or bf16(dctx); the MLM transform (P rows): its
            // bf16 x, or bf16(dy) and bf16(x)ᵀ. 64 more: xᵀ starts 32-aligned.
            const size_t bwd = plan.forward_only ? 0 : nmax * (H_ + std::max(H_, I_)) + 64;
            sb_.assign(be_, std::max(bwd, 2 * pmax * H_));
        }
        if (opts.precision == ops::Precision::int8) init_int8(plan);
        // Packed weights (ops::PackedWeights; nullptr where the backend keeps no layout of its own)
        // for an inference engine, whose weights do not change (emulated bf16 has no use for them).
        // A training engine would re-pack after every update: 0-2 % faster for 210 MB more
        // (BERT-base bf16 b32, Zen 5), so it does not.
        // (An int8 engine keeps its own packed layout, ops::Int8Weights.)
        if (std::is_same_v<T, float> && plan.forward_only && !int8_ && (!bf16_ || ops::bf16_native()))
            packed_ = be_.packed_weights(gemm_type());
        if (fused_) {  // the kernels this engine runs, or the backend's one-line Error
            (void)BB_OP(be_, flash_attention_forward);
            (void)BB_OP(be_, flash_attention_backward);
        }
        if (packed_) {
            (void)BB_OP(be_, matmul_packed);
            for (const LayerParams& w : layers_) {
                for (const size_t k : {w.wq, w.wk, w.wv, w.wo}) packed_->add(k, H_, H_, false);
                packed_->add(w.wi, H_, I_, false);
                packed_->add(w.wout, I_, H_, false);
            }
        }
        carve(arena, nullptr);
    }

    // Pass 1 (counting: masks null) sizes the arena and the mask bytes; pass 2 points into them
    // (plan_memory).
    void carve(Arena<T>& a, uint8_t* masks) {
        const size_t nmax = static_cast<size_t>(plan_.max_batch) * plan_.max_seq;
        const size_t probs = static_cast<size_t>(plan_.max_batch) * NH_ * plan_.max_seq * plan_.max_seq;
        // (the int8 attention keeps no probabilities either: carved as for the fused kernel)
        buf_.carve(be_, a, masks,
                   {nmax, probs, static_cast<size_t>(H_), static_cast<size_t>(I_), static_cast<size_t>(NH_), L_,
                    plan_.forward_only, bf16_, fused_ || int8_, max_rows_, int8_ != nullptr});
        pofs_.assign(static_cast<size_t>(plan_.max_batch) + 1, 0);
        if (staged_.offsets.empty()) {  // the batch's index arrays in the backend's memory
            const size_t bmax = static_cast<size_t>(plan_.max_batch);
            staged_.offsets.assign(be_, bmax + 1);
            staged_.pofs.assign(be_, bmax + 1);
            staged_.keys.assign(be_, bmax);
            staged_.ids.assign(be_, nmax);
            staged_.segments.assign(be_, nmax);
            staged_.rows.assign(be_, max_rows_);
        }
    }
    void require_backward() const {
        if (plan_.forward_only)
            fail("engine: backward on a forward-only engine (Plan::forward_only)");
    }
    size_t masks_bytes() const { return buf_.mask_bytes; }

    // Validates the batch against the plan and the config; Error otherwise.
    void check_batch(const Batch& b, size_t params_size) const {
        detail::check_batch(b, cfg_, plan_, params_size, total_params_);
    }

    // null for the unpadded layout (every row a key), else Batch::key_lengths (checked).
    static const int32_t* key_lengths(const Batch& b) {
        return b.key_lengths.empty() ? nullptr : b.key_lengths.data();
    }
    // Copies the batch's index arrays into the backend's memory, where the ops read them (the
    // backward reuses them): the token and segment ids, the offsets, key lengths and probability
    // offsets.
    void stage(const Batch& b) {
        const size_t n = static_cast<size_t>(N_), nb = static_cast<size_t>(B_);
        staged_.offsets.upload(be_, b.seq_offsets.data(), nb + 1);
        staged_.pofs.upload(be_, pofs_.data(), nb + 1);
        staged_.ids.upload(be_, b.input_ids.data(), n);
        staged_.segments.upload(be_, b.segment_ids.data(), n);
        if (!b.key_lengths.empty()) staged_.keys.upload(be_, b.key_lengths.data(), nb);
        index_ = ops::EmbeddingIndex{staged_.ids.data(), staged_.segments.data(), staged_.offsets.data(), B_};
        shape_ = ops::AttentionShape{staged_.offsets.data(), staged_.pofs.data(), B_, NH_, H_ / NH_,
                                     b.key_lengths.empty() ? nullptr : staged_.keys.data()};
    }
    // The staged Batch::seq_offsets (B+1) of the last forward, in the backend's memory.
    const int32_t* offsets() const { return staged_.offsets.data(); }

    // x(N,H) = encoder output of the batch; with rows (EngineOptions::last_layer_subset, fewer
    // than N), the last layer's dense half runs on those rows only and output() holds R rows: x of
    // rows[0], rows[1], ... (the attention still reads every row's keys and values).
    void forward(const T* params, const Batch& b, bool training, uint64_t seed, uint64_t step,
                 std::span<const int32_t> rows = {}) {
        if (training && plan_.forward_only)
            fail("engine: a training forward on a forward-only engine (Plan::forward_only)");
        B_ = b.batch_size;
        N_ = b.num_tokens();
        BB_CHECK(rows.size() <= max_rows_ && (rows.empty() || rows.size() < static_cast<size_t>(N_)));
        R_ = static_cast<int>(rows.size());
        if (R_ > 0) staged_.rows.upload(be_, rows.data(), rows.size());
        const int N = N_, H = H_;
        const size_t nh = static_cast<size_t>(N) * H;
        ops::attention_prob_offsets(pofs_.data(), b.seq_offsets.data(), B_, NH_, key_lengths(b));
        stage(b);
        const double hkeep = 1.0 - cfg_.hidden_dropout_prob;
        const double pkeep = 1.0 - cfg_.attention_probs_dropout_prob;
        dropout_hidden_ = training && cfg_.hidden_dropout_prob > 0;
        dropout_probs_ = training && cfg_.attention_probs_dropout_prob > 0;
        seed_ = seed;
        step_ = step;
        hkeep_ = static_cast<T>(hkeep);
        pkeep_ = static_cast<T>(pkeep);
        const auto stream = [&](uint32_t site, double keep) {
            return ops::DropoutStream{seed, step, site, keep};
        };
        if ((bf16_ || packed_ || int8_) && (wb_stale_ || wb_src_ != params)) {
            BB_PROFILE_OP(Op::weight_copies, Pass::forward);
            if (bf16_) k_.to_bf16(wb_.data(), params, total_params_);
            if constexpr (std::is_same_v<T, float>)
                if (int8_) int8_->quantize(params);
            if (packed_) packed_->pack(bf16_ ? static_cast<const void*>(wb_.data()) : params);
            wb_src_ = params;
            wb_stale_ = false;
        }
        BB_PROFILE_OP(Op::embeddings, Pass::forward);
        k_.embedding_forward(buf_.emb_sum, params + emb_.word, params + emb_.position,
                             params + emb_.type, index_, H);
        BB_PROFILE_OP(Op::layernorm, Pass::forward);
        // bf16: layer 0's GEMM input xb is written by the last of LN and dropout
        ops::bf16* xb0 = L_ > 0 ? gemm_output(buf_.layers[0].xb) : nullptr;
        k_.layernorm_forward(buf_.x[0], buf_.emb_mean, buf_.emb_rstd, buf_.emb_sum,
                             params + emb_.gamma, params + emb_.beta, N, H, cfg_.layer_norm_eps,
                             dropout_hidden_ ? nullptr : xb0);
        BB_PROFILE_OP(Op::dropout_residual, Pass::forward);
        if (dropout_hidden_) {
            k_.dropout_mask(buf_.emb_mask, stream(0, hkeep), nh);
            k_.dropout_add_forward(buf_.x[0], buf_.x[0], buf_.emb_mask, hkeep_, nullptr, nh, xb0);
        }
        const ops::AttentionShape& shape = shape_;
        for (int l = 0; l < L_; ++l) {
            const LayerParams& w = layers_[l];
            LayerSaved<T>& s = buf_.layers[l];
            const T* xin = buf_.x[l];
            BB_PROFILE_OP(Op::gemm_qkv, Pass::forward);
            const ops::bf16* xb = gemm_output(s.xb);  // written by xin's producer
            if (int8_) {  // Q, K and V as one product, quantized per head for the int8 attention
                // xin quantized here in layer 0, by the FFN-out before in the others (dense_forward_int8)
                if (l == 0) int8_input(xin, N, H);
                const ops::Int8Matrix m = int8_->at(w.wq);
                const ops::Int8Output heads{.groups = q_qkv_.data(), .group = H / NH_, .scale = s_qkv_.data()};
                k_.linear_forward_int8(nullptr, MatmulType::f32, &heads, q_in_.data(), s_in_.data(), m, N, H,
                                       3 * H, ops::Int8Epilogue{.bias = m.bias});
            } else {
                linear_fwd(s.q, xin, xb, params, w.wq, w.bq, N, H, H, attention_output(s.qb));
                linear_fwd(s.k, xin, xb, params, w.wk, w.bk, N, H, H, attention_output(s.kb));
                linear_fwd(s.v, xin, xb, params, w.wv, w.bv, N, H, H, attention_output(s.vb));
            }
            BB_PROFILE_OP(Op::attention, Pass::forward);
            const ops::DropoutStream ps = stream(1 + 3 * l, pkeep);
            const ops::AttentionBf16 ab = attention_inputs(s, nullptr, nh);
            if (int8_) {  // both products in int8 (ops/int8.hpp)
                k_.attention_forward_int8(s.ctx, q_qkv_.data(), s_qkv_.data(), shape);
            } else if (fused_) {
                const ops::FlashBf16 fb{ab.q, ab.k, ab.v, nullptr};
                k_.flash_attention_forward(s.ctx, s.lse, s.q, s.k, s.v, shape, dropout_probs_ ? &ps : nullptr,
                                           bf16_ ? &fb : nullptr);
            } else {
                k_.attention_forward(s.ctx, s.probs, buf_.dprobs, s.mask_probs, s.q, s.k, s.v, shape,
                                     dropout_probs_ ? &ps : nullptr, bf16_ ? &ab : nullptr);
            }
            BB_PROFILE_OP(Op::dropout_residual, Pass::forward);
            if (dropout_hidden_) {
                k_.dropout_mask(s.mask_attn, stream(2 + 3 * l, hkeep), nh);
                k_.dropout_mask(s.mask_out, stream(3 + 3 * l, hkeep), nh);
            }
            dense_forward(l, params, gather_dense_rows(l, xin));
        }
    }
    // The rows a layer's dense half (after the attention) runs on: every row, or in the last layer
    // the ones forward() was given (their ctx, input and masks gathered here; dense_rows() after).
    struct Rows {
        int n;
        const T *ctx, *xin;
        const uint8_t *mask_attn, *mask_out;
    };
    Rows gather_dense_rows(int l, const T* xin) {
        const LayerSaved<T>& s = buf_.layers[static_cast<size_t>(l)];
        if (l + 1 == L_ && R_ > 0) {
            BB_PROFILE_OP(Op::other, Pass::forward);
            const int32_t* rows = staged_.rows.data();
            k_.gather_rows(buf_.ctx_rows, s.ctx, rows, R_, H_);
            k_.gather_rows(buf_.xin_rows, xin, rows, R_, H_);
            if (dropout_hidden_) {
                k_.gather_mask_rows(buf_.mask_attn_rows, s.mask_attn, rows, R_, H_);
                k_.gather_mask_rows(buf_.mask_out_rows, s.mask_out, rows, R_, H_);
            }
        }
        return dense_rows(l, xin);
    }
    // a = drop(ctx·Wo + bo) + xin, x1 = LN1(a), o = drop(act(x1·Wi + bi)·Wout + bout) + x1,
    // x[l+1] = LN2(o), on d.n rows.
    void dense_forward(int l, const T* params, const Rows& d) {
        const LayerParams& w = layers_[static_cast<size_t>(l)];
        LayerSaved<T>& s = buf_.layers[static_cast<size_t>(l)];
        const int n = d.n, H = H_, I = I_;
        const size_t nh = static_cast<size_t>(n) * H;
        const auto P = [&](size_t o) { return params + o; };
        BB_PROFILE_OP(Op::gemm_attn_out, Pass::forward);
        if constexpr (std::is_same_v<T, float>)
            if (int8_) return dense_forward_int8(l, params, d);
        linear_fwd(s.a, d.ctx, gemm_input(d.ctx, nh, s.ctxb), params, w.wo, w.bo, n, H, H);
        BB_PROFILE_OP(Op::dropout_residual, Pass::forward);
        k_.dropout_add_forward(s.a, s.a, d.mask_attn, hkeep_, d.xin, nh, nullptr);
        BB_PROFILE_OP(Op::layernorm, Pass::forward);
        k_.layernorm_forward(s.x1, s.mean1, s.rstd1, s.a, P(w.g1), P(w.b1), n, H, cfg_.layer_norm_eps,
                             gemm_output(s.x1b));
        BB_PROFILE_OP(Op::gemm_ffn_in, Pass::forward);
        linear_fwd(s.h, s.x1, gemm_output(s.x1b), params, w.wi, w.bi, n, H, I);
        BB_PROFILE_OP(Op::gelu, Pass::forward);
        k_.activation_forward(act_, s.g, s.h, static_cast<size_t>(n) * I, gemm_output(s.gb));
        BB_PROFILE_OP(Op::gemm_ffn_out, Pass::forward);
        linear_fwd(s.o, s.g, gemm_output(s.gb), params, w.wout, w.bout, n, I, H);
        BB_PROFILE_OP(Op::dropout_residual, Pass::forward);
        k_.dropout_add_forward(s.o, s.o, d.mask_out, hkeep_, s.x1, nh, nullptr);
        BB_PROFILE_OP(Op::layernorm, Pass::forward);
        k_.layernorm_forward(buf_.x[l + 1], s.mean2, s.rstd2, s.o, P(w.g2), P(w.b2), n, H,
                             cfg_.layer_norm_eps,  // and the next layer's bf16 input
                             l + 1 < L_ ? gemm_output(buf_.layers[l + 1].xb) : nullptr);
    }
    // dense_forward of an int8 engine (forward only: no dropout). Each residual and LayerNorm runs
    // in the epilogue of the product before it, which quantizes the normalized rows for the one
    // after (the FFN; the next layer's Q, K, V), the GELU in FFN-in's. The quantized inputs
    // alternate between q_in_ and q_mid_: no product writes the rows it reads.
    void dense_forward_int8(int l, const T* params, const Rows& d) requires std::is_same_v<T, float> {
        const LayerParams& w = layers_[static_cast<size_t>(l)];
        LayerSaved<T>& s = buf_.layers[static_cast<size_t>(l)];
        const int n = d.n, H = H_, I = I_;
        const auto P = [&](size_t o) { return params + o; };
        const ops::Int8Output in{.rows = q_in_.data(), .scale = s_in_.data()},
            mid{.rows = q_mid_.data(), .scale = s_mid_.data()};
        const ops::Int8Norm ln1{P(w.g1), P(w.b1), s.mean1, s.rstd1, cfg_.layer_norm_eps},
            ln2{P(w.g2), P(w.b2), s.mean2, s.rstd2, cfg_.layer_norm_eps};
        k_.quantize_rows(mid.rows, mid.scale, d.ctx, n, H);
        k_.linear_forward_int8(s.x1, MatmulType::f32, &in, mid.rows, mid.scale, int8_->at(w.wo), n, H, H,
                               ops::Int8Epilogue{.bias = P(w.bo), .residual = d.xin, .norm = &ln1});
        BB_PROFILE_OP(Op::gemm_ffn_in, Pass::forward);
        k_.linear_forward_int8(nullptr, MatmulType::f32, &mid, in.rows, in.scale, int8_->at(w.wi), n, H, I,
                               ops::Int8Epilogue{.bias = P(w.bi), .act = &act_});
        BB_PROFILE_OP(Op::gemm_ffn_out, Pass::forward);
        k_.linear_forward_int8(buf_.x[l + 1], MatmulType::f32, l + 1 < L_ ? &in : nullptr, mid.rows, mid.scale,
                               int8_->at(w.wout), n, I, H,
                               ops::Int8Epilogue{.bias = P(w.bout), .residual = s.x1, .norm = &ln2});
    }

    Rows dense_rows(int l, const T* xin) const {
        const LayerSaved<T>& s = buf_.layers[static_cast<size_t>(l)];
        const bool all = l + 1 < L_ || R_ == 0;
        const uint8_t* ma = !dropout_hidden_ ? nullptr : all ? s.mask_attn : buf_.mask_attn_rows;
        const uint8_t* mo = !dropout_hidden_ ? nullptr : all ? s.mask_out : buf_.mask_out_rows;
        return all ? Rows{N_, s.ctx, xin, ma, mo} : Rows{R_, buf_.ctx_rows, buf_.xin_rows, ma, mo};
    }
    // dense_forward's backward on d.n rows: from dx (the layer output's gradient, overwritten) to
    // da (the gradient of a, hence of the residual input) and dctx.
    void dense_backward(int l, T* grads, const T* params, const Rows& d, T* da, T* dctx) {
        const LayerParams& w = layers_[static_cast<size_t>(l)];
        LayerSaved<T>& s = buf_.layers[static_cast<size_t>(l)];
        const int n = d.n, H = H_, I = I_;
        const size_t nh = static_cast<size_t>(n) * H;
        const auto P = [&](size_t o) { return params + o; };
        const auto G = [&](size_t o) { return grads + o; };
        // x[l+1] = LN2(o), o = drop(g·Wout + bout) + x1
        BB_PROFILE_OP(Op::layernorm, Pass::backward);
        k_.layernorm_backward(buf_.dx1, G(w.g2), G(w.b2), buf_.dx, s.o, P(w.g2), s.mean2, s.rstd2, n, H, false);
        BB_PROFILE_OP(Op::dropout_residual, Pass::backward);
        const ops::BiasGrad<T> dbout{G(w.bout), buf_.bias_part, H};
        k_.dropout_backward(dy_fp32(buf_.dtmp), buf_.dx1, d.mask_out, hkeep_, nh, dy_bf16(), &dbout);
        BB_PROFILE_OP(Op::gemm_ffn_out, Pass::backward);
        linear_bwd(buf_.dI, grads, params, w.wout, kBiasSummed, dy_fp32(buf_.dtmp), s.g,
                   transposed_input(s.gb, n, I), n, I, H, false, dy_bf16());
        BB_PROFILE_OP(Op::gelu, Pass::backward);
        const ops::BiasGrad<T> dbi{G(w.bi), buf_.bias_part, I};
        k_.activation_backward(act_, dy_fp32(buf_.dI), buf_.dI, s.h, static_cast<size_t>(n) * I, dy_bf16(), &dbi);
        BB_PROFILE_OP(Op::gemm_ffn_in, Pass::backward);
        linear_bwd(buf_.dx1, grads, params, w.wi, kBiasSummed, dy_fp32(buf_.dI), s.x1,
                   transposed_input(s.x1b, n, H), n, H, I, true, dy_bf16());
        // x1 = LN1(a), a = drop(ctx·Wo + bo) + xin
        BB_PROFILE_OP(Op::layernorm, Pass::backward);
        k_.layernorm_backward(da, G(w.g1), G(w.b1), buf_.dx1, s.a, P(w.g1), s.mean1, s.rstd1, n, H, false);
        BB_PROFILE_OP(Op::dropout_residual, Pass::backward);
        const ops::BiasGrad<T> dbo{G(w.bo), buf_.bias_part, H};
        k_.dropout_backward(dy_fp32(buf_.dtmp), da, d.mask_attn, hkeep_, nh, dy_bf16(), &dbo);
        BB_PROFILE_OP(Op::gemm_attn_out, Pass::backward);
        linear_bwd(dctx, grads, params, w.wo, kBiasSummed, dy_fp32(buf_.dtmp), d.ctx,
                   transposed_input(s.ctxb, n, H), n, H, H, false, dy_bf16());
    }

    T* output() const { return buf_.x[static_cast<size_t>(L_)]; }
    int output_rows() const { return R_ > 0 ? R_ : N_; }
    // Gradient w.r.t. the encoder output: the caller fills it (output_rows(), H), then calls
    // backward().
    T* doutput() const { return buf_.dx; }

    // The batch is the last forward's (staged there).
    void backward(T* grads, const T* params) {
        const int N = N_, H = H_;
        const size_t nh = static_cast<size_t>(N) * H;
        const ops::AttentionShape& shape = shape_;
        for (int l = L_ - 1; l >= 0; --l) {
            const LayerParams& w = layers_[l];
            LayerSaved<T>& s = buf_.layers[l];
            const T* xin = buf_.x[l];
            const auto G = [&](size_t o) { return grads + o; };
            const Rows d = dense_rows(l, xin);
            if (d.n == N) {
                dense_backward(l, grads, params, d, buf_.dx, buf_.dctx);
            } else {  // the gathered rows' gradients (in dq, dk until the attention's backward) scattered
                dense_backward(l, grads, params, d, buf_.dk, buf_.dq);
                BB_PROFILE_OP(Op::other, Pass::backward);
                for (T* full : {buf_.dx, buf_.dctx}) be_.zero(full, nh * sizeof(T));
                k_.scatter_add_rows(buf_.dx, buf_.dk, staged_.rows.data(), d.n, H);
                k_.scatter_add_rows(buf_.dctx, buf_.dq, staged_.rows.data(), d.n, H);
            }
            BB_PROFILE_OP(Op::attention, Pass::backward);
            const ops::AttentionBf16 ab = attention_inputs(s, buf_.dctx, nh);
            if (fused_) {
                const ops::FlashBf16 fb{ab.q, ab.k, ab.v, ab.dctx};
                const ops::DropoutStream ps = probs_stream(l);
                k_.flash_attention_backward(buf_.dq, buf_.dk, buf_.dv, buf_.dctx, s.q, s.k, s.v,
                                            s.ctx, s.lse, shape, dropout_probs_ ? &ps : nullptr,
                                            bf16_ ? &fb : nullptr);
            } else {
                k_.attention_backward(buf_.dq, buf_.dk, buf_.dv, buf_.dprobs, buf_.dctx, s.q, s.k,
                                      s.v, s.probs, dropout_probs_ ? s.mask_probs : nullptr, pkeep_,
                                      shape, bf16_ ? &ab : nullptr);
            }
            BB_PROFILE_OP(Op::gemm_qkv, Pass::backward);
            const ops::bf16* xt = transposed_input(s.xb, N, H);  // one bf16 xᵀ for Q, K and V
            using Dense = std::tuple<size_t, size_t, T*>;  // kernel, bias, dy
            for (const auto& [wt, bias, dy] :
                 {Dense{w.wq, w.bq, buf_.dq}, Dense{w.wk, w.bk, buf_.dk}, Dense{w.wv, w.bv, buf_.dv}}) {
                // one pass over dy for its bias gradient and (bf16) its bf16 copy: a dropout
                // backward without a mask passes dy through
                const ops::BiasGrad<T> db{G(bias), buf_.bias_part, H};
                k_.dropout_backward(nullptr, dy, nullptr, T(1), nh, dy_bf16(), &db);
                linear_bwd(buf_.dx, grads, params, wt, kBiasSummed, dy, xin, xt, N, H, H, true, dy_bf16());
            }
            gradients_ready(l);
        }
        // x[0] = drop(LN(e))
        BB_PROFILE_OP(Op::embeddings, Pass::backward);
        k_.dropout_backward(buf_.dx, buf_.dx, dropout_hidden_ ? buf_.emb_mask : nullptr, hkeep_, nh,
                            nullptr, nullptr);
        k_.layernorm_backward(buf_.dtmp, grads + emb_.gamma, grads + emb_.beta, buf_.dx,
                              buf_.emb_sum, params + emb_.gamma, buf_.emb_mean, buf_.emb_rstd, N, H,
                              false);
        k_.embedding_backward(grads + emb_.word, grads + emb_.position, grads + emb_.type,
                              buf_.dtmp, index_, H);
        gradients_ready(L_ + 1);
    }

    // Data-parallel overlap (BasicBertPretrainer::set_backward_hook): handed the tensors whose
    // gradients are final after each stage of the backward.
    GradientsReady backward_hook;
    // Stage l < L: encoder layer l; heads_stage() (= L): the pooler and heads; L + 1: the
    // embeddings.
    void gradients_ready(int stage) const {
        if (backward_hook) backward_hook(ready_[static_cast<size_t>(stage)]);
    }
    int heads_stage() const { return L_; }

    // --- precision: every dense layer goes through these two ---------------------------------
    void weights_changed() { wb_stale_ = true; }
    bool bf16() const { return bf16_; }
    const ops::bf16* weights_bf16() const { return wb_.data(); }
    // The bf16 copies and the packed weights.
    size_t copies_bytes() const {
        return (wb_.size() + sb_.size() + buf_.bf16_inputs.size()) * sizeof(ops::bf16) +
               (packed_ ? packed_->bytes() : 0) + (int8_ ? int8_->bytes() : 0) + q_in_.size() + q_mid_.size() +
               q_qkv_.size() + (s_in_.size() + s_mid_.size() + s_qkv_.size()) * sizeof(float);
    }
    // A head's weight op(B)(K, N) at `offset` joins the int8 kernels in an int8 engine (in slabs
    // of kInt8HeadSlab output channels: the tied decoder's 30522 split over threads by columns),
    // else the packed ones (no-op where nothing is packed); call before the first forward.
    void pack_also(size_t offset, int K, int N, bool trans_b) {
        if (int8_)
            int8_->add(offset, K, N, trans_b, kInt8HeadSlab);
        else if (packed_)
            packed_->add(offset, K, N, trans_b);
        wb_stale_ = true;
    }
    // A head's dense layer y(N,OUT) = x·op(W) + b on its int8 kernel (pack_also), x quantized here;
    // false, and nothing done, where the engine has no int8 kernel at w.
    bool head_linear_int8(T* y, const T* x, const T* params, size_t w, size_t b, int N, int IN, int OUT) {
        const ops::Int8Matrix q = int8_ ? int8_->at(w) : ops::Int8Matrix{};
        if (!q.slabs) return false;
        int8_input(x, N, IN);
        if constexpr (std::is_same_v<T, float>)
            k_.linear_forward_int8(y, MatmulType::f32, nullptr, q_in_.data(), s_in_.data(), q, N, IN, OUT,
                                   ops::Int8Epilogue{.bias = params + b});
        return true;
    }
    // The packed weight at `offset` (of the engine's GEMM type, gemm_type()), or nullptr.
    const void* packed(size_t offset) const { return packed_ ? packed_->at(offset) : nullptr; }
    ops::MatmulType gemm_type() const { return bf16_ ? ops::MatmulType::bf16 : ops::MatmulType::f32; }
    // The bf16 form of a GEMM input (n values): converted into keep (a LayerSaved bf16 buffer),
    // or into the scratch when keep is null; nullptr in fp32.
    const ops::bf16* gemm_input(const T* x, size_t n, ops::bf16* keep = nullptr) {
        if (!bf16_) return nullptr;
        ops::bf16* dst = keep ? keep : sb_.data();
        k_.to_bf16(dst, x, n);
        return dst;
    }
    // bf16 engines: p, a bf16 GEMM input that its producer (LayerNorm, GELU, dropout) writes in
    // the same pass as its fp32 output; nullptr in fp32 and int8 (whose dense layers quantize the
    // fp32 x: int8_input).
    ops::bf16* gemm_output(ops::bf16* p) const { return bf16_ ? p : nullptr; }
    // bf16 engines: p, where the Q, K and V products write bf16 q, k, v for the attention (which
    // then reads no fp32 q, k, v); nullptr in fp32. (An int8 engine's Q, K and V product writes
    // int8 q, k, v for its int8 attention instead.)
    ops::bf16* attention_output(ops::bf16* p) const { return bf16_ ? p : nullptr; }
    // bf16 engines: where a dense layer's backward finds bf16(dy) (the scratch's start), written
    // by dy's producer (dropout or GELU backward) for linear_bwd; nullptr in fp32.
    ops::bf16* dy_bf16() { return bf16_ ? sb_.data() : nullptr; }
    // Where dy's producer writes fp32 dy: p, or nowhere in a bf16 engine, whose GEMMs read only
    // dy_bf16() when the producer also sums the bias gradient (linear_bwd's kBiasSummed).
    T* dy_fp32(T* p) const { return bf16_ ? nullptr : p; }
    // linear_bwd's bias offset when dy's producer has already added the bias gradient.
    static constexpr size_t kBiasSummed = static_cast<size_t>(-1);
    // bf16 q, k, v: the layer's kept buffers, written by the Q, K and V GEMMs (which write no
    // fp32 q, k, v then) and reused by the backward, which converts dctx into the scratch; empty
    // in fp32.
    ops::AttentionBf16 attention_inputs(const LayerSaved<T>& s, const T* dctx, size_t nh) {
        if (!bf16_) return {};
        ops::bf16* db = nullptr;
        if (dctx) {
            db = sb_.data();
            k_.to_bf16(db, dctx, nh);
        }
        return {s.qb, s.kb, s.vb, db};
    }
    // bf16(x)ᵀ (C, N) of a kept bf16 GEMM input xb (N, C), for a weight gradient, at the end of
    // the scratch (bf16(dy) goes at its start); nullptr in fp32.
    const ops::bf16* transposed_input(const ops::bf16* xb, int N, int C) {
        if (!bf16_) return nullptr;
        const size_t n = static_cast<size_t>(N) * C;
        ops::bf16* xt = sb_.data() + ((sb_.size() - n) & ~size_t(31));
        k_.transpose_bf16(xt, xb, N, C, C);
        return xt;
    }
    // y(N,OUT) = x·W + b for the kernel at offset w and bias at offset b; xb = gemm_input(x).
    // bf16 engines: with yb (= gemm_output(..)) only bf16(y) is written, into yb. (An int8
    // engine's dense layers call linear_forward_int8 themselves, head_linear_int8 for the heads.)
    void linear_fwd(T* y, const T* x, const ops::bf16* xb, const T* params, size_t w, size_t b,
                    int N, int IN, int OUT, ops::bf16* yb = nullptr) const {
        const MatmulType y_type = yb ? MatmulType::bf16 : MatmulType::f32;
        void* out = yb ? static_cast<void*>(yb) : static_cast<void*>(y);
        if (const void* pw = packed(w))
            return k_.matmul_packed(gemm_type(), N, OUT, IN, bf16_ ? static_cast<const void*>(xb) : x, IN, pw,
                                    out, OUT, params + b, y_type);
        if (bf16_) return k_.linear_forward_bf16(out, y_type, xb, wb_.data() + w, params + b, N, IN, OUT);
        k_.linear_forward(y, x, params + w, params + b, N, IN, OUT);
    }
    // int8 engines: the dense layers' kernels quantized per output channel (ops/int8.hpp), their
    // quantized inputs in two buffers (N·H; N·max(H, I) for the attention's context, then the FFN's
    // GELU output: a model may have I < H) and the Q, K and V
    // product's output per head (N·3H, one product: Int8Weights::add_side_by_side).
    void init_int8(const Plan& plan);  // encoder.cpp
    void int8_input(const T* x, int N, int C) {
        if constexpr (std::is_same_v<T, float>) k_.quantize_rows(q_in_.data(), s_in_.data(), x, N, C);
    }
    // Gradients of that layer from dy. bf16: xt = transposed_input(bf16(x)) (x itself unused) and
    // dyb = dy_bf16(), which dy's producer wrote; or xt null to convert x and dy here (the MLM
    // transform); fp32: x. b = kBiasSummed: dy's producer added the bias gradient (then a bf16
    // engine with xt reads no fp32 dy, and dy may be null).
    void linear_bwd(T* dx, T* grads, const T* params, size_t w, size_t b, const T* dy, const T* x,
                    const ops::bf16* xt, int N, int IN, int OUT, bool accumulate_dx = false,
                    const ops::bf16* dyb = nullptr) {
        T* db = b == kBiasSummed ? nullptr : grads + b;
        if (bf16_ && !xt)
            return k_.linear_backward_bf16_convert(dx, grads + w, db, dy, x, wb_.data() + w, N, IN, OUT,
                                                   accumulate_dx, sb_.data());
        if (bf16_)
            return k_.linear_backward_bf16(dx, grads + w, db, dy, dyb, xt, wb_.data() + w, N, IN, OUT,
                                           accumulate_dx);
        k_.linear_backward(dx, grads + w, db, dy, x, params + w, N, IN, OUT, accumulate_dx);
    }

    std::span<const uint8_t> mask(DropoutSite site) const {
        const size_t nh = static_cast<size_t>(N_) * H_;
        const auto hidden = [&](const uint8_t* m) {
            return dropout_hidden_ ? std::span<const uint8_t>(m, nh) : std::span<const uint8_t>();
        };
        if (site.kind == DropoutSite::embeddings) return hidden(buf_.emb_mask);
        if (site.layer < 0 || site.layer >= L_)
            fail("engine: dropout site of layer {}, expected a layer in 0..{}", site.layer, L_ - 1);
        const LayerSaved<T>& s = buf_.layers[static_cast<size_t>(site.layer)];
        switch (site.kind) {
            case DropoutSite::embeddings: break;
            case DropoutSite::attention_output: return hidden(s.mask_attn);
            case DropoutSite::output: return hidden(s.mask_out);
            case DropoutSite::attention_probs: break;
        }
        if (!dropout_probs_) return {};
        const size_t np = pofs_[static_cast<size_t>(B_)];
        if (!fused_) return {s.mask_probs, np};
        // not stored: regenerated (the same bits), in the backend's memory as every mask is
        if (probs_mask_.size() < np) probs_mask_.assign(be_, np);
        k_.dropout_mask(probs_mask_.data(), probs_stream(site.layer), np);
        return {probs_mask_.data(), np};
    }

    // The attention-probs dropout stream of layer l in the last forward (site 1 + 3l).
    ops::DropoutStream probs_stream(int l) const {
        return ops::DropoutStream{seed_, step_, static_cast<uint32_t>(1 + 3 * l),
                                  1.0 - cfg_.attention_probs_dropout_prob};
    }
    bool fused_attention() const { return fused_; }

    const EngineOps<T>& ops() const { return k_; }
    int N() const { return N_; }
    int B() const { return B_; }
    int H() const { return H_; }
    const BertConfig& config() const { return cfg_; }
    ops::Activation activation() const { return act_; }

private:
    // Output channels per slab of a head's int8 kernel: 1024 x H int8 weights per slab (768 KB at
    // BERT-base, within a core's L2), 30 slabs for the 30,522-piece decoder.
    static constexpr int kInt8HeadSlab = 1024;

    backend::Backend& be_;
    const EngineOps<T>& k_;
    BertConfig cfg_;
    Plan plan_;
    ops::Activation act_;
    bool fused_ = false;  // fused attention kernel (no probs, mask_probs, buf_.dprobs; lse per layer)
    uint64_t seed_ = 0, step_ = 0;  // of the last forward (dropout streams)
    mutable Memory<uint8_t> probs_mask_;  // mask("…/attention_probs") regenerated, fused only
    int H_ = 0, I_ = 0, NH_ = 0, L_ = 0;
    size_t total_params_ = 0;
    EmbeddingParams emb_{};
    std::vector<LayerParams> layers_;
    std::vector<std::vector<ParamRange>> ready_;  // gradients_ready(stage)
    EncoderActivations<T> buf_;  // every activation (activations.hpp)
    std::vector<size_t> pofs_;
    struct {
        Memory<int32_t> offsets, ids, segments, keys, rows;
        Memory<size_t> pofs;
    } staged_;                      // stage(): the batch in the backend's memory
    ops::EmbeddingIndex index_{};   // over staged_
    ops::AttentionShape shape_{};
    bool bf16_ = false, wb_stale_ = true;
    const T* wb_src_ = nullptr;  // the parameters the bf16 copy and the packed weights come from
    std::unique_ptr<ops::PackedWeights> packed_;  // inference engines only (null otherwise)
    std::unique_ptr<ops::Int8Weights> int8_;      // int8 engines only (init_int8)
    Memory<uint8_t> q_in_, q_mid_;  // dense layers' inputs, stored plus 128 (ops/int8.hpp)
    Memory<int8_t> q_qkv_;
    Memory<float> s_in_, s_mid_, s_qkv_;
    Memory<ops::bf16> wb_, sb_;  // bf16 copy of the parameters (same offsets); scratch
    int B_ = 0, N_ = 0;
    size_t max_rows_ = 0;  // EngineOptions::last_layer_subset: the most rows the last layer may get
    int R_ = 0;            // the last forward's: its last layer's dense half on R_ rows (0: all N_)
    bool dropout_hidden_ = false, dropout_probs_ = false;
    T hkeep_ = 1, pkeep_ = 1;
};

// The backend and the memory of an engine (the models' Impl derive from it): declared first, so
// that the buffers are released before the backend that owns them.
template <typename T>
struct EngineMemory {
    std::unique_ptr<backend::Backend> own_backend;  // where EngineOptions names none: the CPU's
    backend::Backend* be = nullptr;
    Arena<T> arena;
    Memory<uint8_t> masks;  // the dropout masks
    std::unique_ptr<Encoder<T>> enc;

    // n values at p (the engine's memory) as the host can read them: p itself on a host-memory
    // backend, else a copy made now (valid until the next call for the same p).
    template <typename V>
    std::span<const V> host_view(const V* p, size_t n) const {
        if (be->host_memory()) return {p, n};
        std::vector<unsigned char>& m = mirrors[p];
        m.resize(n * sizeof(V));
        if (n) be->download(m.data(), p, n * sizeof(V));
        return {reinterpret_cast<const V*>(m.data()), n};
    }
    mutable std::unordered_map<const void*, std::vector<unsigned char>> mirrors;
};

// Two passes over the encoder's and a model's head buffers (Impl::carve): pass 1 counts, then the
// arena and the dropout-mask bytes are allocated once, pass 2 points every buffer into them.
template <typename Impl>
void plan_memory(Impl& m, const ParamTable& table, const Plan& plan, const EngineOptions& opts) {
    using T = typename decltype(m.arena)::value_type;
    if (!opts.backend) m.own_backend = backend::make_cpu_backend();
    m.be = opts.backend ? opts.backend : m.own_backend.get();
    m.enc = std::make_unique<Encoder<T>>(*m.be, table, plan, opts, m.arena);
    m.carve();
    m.arena.allocate(*m.be);
    m.masks.assign(*m.be, m.enc->masks_bytes());
    m.enc->carve(m.arena, m.masks.data());
    m.carve();
}

}  // namespace bertbench::model::detail
