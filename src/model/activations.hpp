// Every activation of the encoder (encoder.hpp) and of its backward, each named once here with its
// shape, and the one planner that carves them: carve() is the only place that says which buffers
// the layers share. The heads' buffers are their own (bert.cpp, squad_head.cpp); plan_memory()
// carves the encoder's and a head's from one arena. Internal to src/model. Legend: B sequences,
// S the plan's longest sequence, N = B·S rows at most, H hidden, I intermediate, NH heads,
// L layers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/engine_ops.hpp"
#include "ops/bf16.hpp"
#include "ops/bias_grad.hpp"

namespace bertbench::model::detail {

// What a layer's forward keeps for its backward.
template <typename T>
struct LayerSaved {
    T *q, *k, *v;            // (N,H) the projections; bf16 engines share one fp32 set
    T* ctx;                  // (N,H) the attention's output (one per layer where the fused
                             // kernel's backward reads it)
    T* probs;                // (B·NH·S·S) materialized attention only
    T* lse;                  // (N,NH) fused attention only (probs and mask_probs are then null)
    T* a;                    // (N,H) attention output + residual, before LayerNorm 1
    T *mean1, *rstd1;        // (N) LayerNorm 1's statistics
    T* x1;                   // (N,H) LayerNorm 1's output
    T* h;                    // (N,I) the intermediate dense layer's output, before GELU
    T* g;                    // (N,I) GELU's output (none in bf16: its backward reads h)
    T* o;                    // (N,H) output + residual, before LayerNorm 2
    T *mean2, *rstd2;        // (N) LayerNorm 2's statistics
    uint8_t* mask_probs;     // (B·NH·S·S) dropout masks, training engines only
    uint8_t *mask_attn, *mask_out;  // (N,H)
    // bf16 engines: the bf16 forms of the layer's GEMM inputs (its input x, q, k, v, ctx, x1, g),
    // written once in the forward (by their producer where it is LayerNorm, GELU or dropout) and
    // kept for the backward's weight gradients; their fp32 forms are needed only inside the
    // layer's forward, so the layers share one set of those (and g has none: null).
    ops::bf16 *xb, *qb, *kb, *vb, *ctxb, *x1b, *gb;
};

// The sizes the planner needs.
struct EncoderShape {
    size_t rows;    // N at most: max_batch · max_seq
    size_t probs;   // max_batch · NH · max_seq², the materialized attention's probabilities
    size_t H, I, NH;
    int L;
    bool forward_only;  // Plan::forward_only: nothing is kept for a backward
    bool bf16;          // the GEMM inputs are kept in bf16 (LayerSaved::xb..gb)
    bool fused;         // fused attention: no probabilities, masks or probs-sized scratch
    size_t subset_rows; // EngineOptions::last_layer_subset: the last layer's gathered rows at most
    // an int8 engine: its Q/K/V product, attention and FFN write int8 buffers of their own
    // (Encoder::init_int8), so no fp32 q, k, v, h, g, no lse and no bf16 GEMM inputs
    bool int8 = false;
};

template <typename T>
struct EncoderActivations {
    // embeddings: sum (N,H) of the three lookups, LayerNorm statistics (N), dropout mask (N,H)
    T *emb_sum = nullptr, *emb_mean = nullptr, *emb_rstd = nullptr;
    uint8_t* emb_mask = nullptr;
    std::vector<T*> x;  // x[0..L] (N,H): the embeddings' output, then each layer's
    std::vector<LayerSaved<T>> layers;
    // the backward's scratch, shared by all layers: (N,H) dx, dx1, dtmp, dctx, dq, dk, dv;
    // (N,I) dI; (B·NH·S·S) dprobs (also the forward's attention-dropout scratch); the bias
    // gradients' partial sums (bias_grad.hpp)
    T *dx = nullptr, *dx1 = nullptr, *dtmp = nullptr, *dctx = nullptr, *dq = nullptr,
      *dk = nullptr, *dv = nullptr, *dI = nullptr, *dprobs = nullptr, *bias_part = nullptr;
    // EngineOptions::last_layer_subset: the last layer's ctx, input and dropout masks on its
    // gathered rows (subset_rows, H)
    T *ctx_rows = nullptr, *xin_rows = nullptr;
    uint8_t *mask_attn_rows = nullptr, *mask_out_rows = nullptr;
    Memory<ops::bf16> bf16_inputs;  // the layers' LayerSaved::xb..gb, in the backend's memory
    size_t mask_bytes = 0;          // the dropout masks' bytes (the masks' buffer, pass 2)

    // Pass 1 (masks null) counts the arena's floats and mask_bytes; pass 2 points into the arena
    // and masks once they are allocated. The sharing rules: a forward-only engine keeps one
    // layer's buffers for all layers and ping-pongs x; a bf16 engine shares the fp32 forms of the
    // GEMM inputs (q, k, v, ctx unless fused, x1, g) and x from x[2] on, keeping their bf16 forms
    // per layer.
    void carve(backend::Backend& be, Arena<T>& a, uint8_t* masks, const EncoderShape& c) {
        const size_t nh = c.rows * c.H, ni = c.rows * c.I;
        const size_t probs = c.fused ? 0 : c.probs;
        size_t mused = 0;
        auto mtake = [&](size_t n) -> uint8_t* {
            const size_t at = mused;
            mused += (n + 63) / 64 * 64;
            return masks ? masks + at : nullptr;
        };
        const bool fwd = c.forward_only;
        const bool share = fwd || c.bf16;
        emb_sum = a.take(nh);
        emb_mean = a.take(c.rows);
        emb_rstd = a.take(c.rows);
        emb_mask = fwd ? nullptr : mtake(nh);
        x.clear();
        for (int l = 0; l <= c.L; ++l)
            x.push_back(share && l >= 2 ? x[static_cast<size_t>(l % 2)] : a.take(nh));
        layers.clear();
        for (int l = 0; l < c.L; ++l) {
            if (fwd && l > 0) {
                layers.push_back(layers[0]);
                continue;
            }
            LayerSaved<T> s{};
            const LayerSaved<T>* s0 = share && l > 0 ? &layers[0] : nullptr;
            const bool i8 = c.int8;
            s.q = i8 ? nullptr : s0 ? s0->q : a.take(nh);
            s.k = i8 ? nullptr : s0 ? s0->k : a.take(nh);
            s.v = i8 ? nullptr : s0 ? s0->v : a.take(nh);
            // the fused kernel's backward reads the layer's fp32 ctx (D = dctx·ctx), so a bf16
            // training engine keeps one per layer there
            s.ctx = s0 && (fwd || !c.fused) ? s0->ctx : a.take(nh);
            s.probs = c.fused ? nullptr : a.take(probs);
            s.lse = c.fused && !i8 ? a.take(c.rows * c.NH) : nullptr;
            s.a = a.take(nh);
            s.mean1 = a.take(c.rows);
            s.rstd1 = a.take(c.rows);
            s.x1 = s0 ? s0->x1 : a.take(nh);
            s.h = i8 ? nullptr : a.take(ni);
            s.g = c.bf16 || i8 ? nullptr : s0 ? s0->g : a.take(ni);
            s.o = a.take(nh);
            s.mean2 = a.take(c.rows);
            s.rstd2 = a.take(c.rows);
            if (!fwd) {
                s.mask_probs = c.fused ? nullptr : mtake(probs);
                s.mask_attn = mtake(nh);
                s.mask_out = mtake(nh);
            }
            layers.push_back(s);
        }
        if (c.bf16 && !c.int8) {  // one set of bf16 GEMM inputs per layer (one shared set when forward-only)
            const size_t bnh = (nh + 31) / 32 * 32, bni = (ni + 31) / 32 * 32;
            const size_t per_layer = 6 * bnh + bni;
            if (bf16_inputs.empty()) bf16_inputs.assign(be, per_layer * static_cast<size_t>(fwd ? 1 : c.L));
            for (int l = 0; l < c.L; ++l) {
                ops::bf16* p = bf16_inputs.data() + (fwd ? 0 : static_cast<size_t>(l) * per_layer);
                LayerSaved<T>& s = layers[static_cast<size_t>(l)];
                s.xb = p;
                s.qb = p + bnh;
                s.kb = p + 2 * bnh;
                s.vb = p + 3 * bnh;
                s.ctxb = p + 4 * bnh;
                s.x1b = p + 5 * bnh;
                s.gb = p + 6 * bnh;
            }
        }
        const size_t rh = c.subset_rows * c.H;
        ctx_rows = a.take(rh);
        xin_rows = a.take(rh);
        mask_attn_rows = fwd ? nullptr : mtake(rh);
        mask_out_rows = fwd ? nullptr : mtake(rh);
        mask_bytes = mused;
        if (fwd) return;
        dx = a.take(nh);
        dx1 = a.take(nh);
        dtmp = a.take(nh);
        dctx = a.take(nh);
        dq = a.take(nh);
        dk = a.take(nh);
        dv = a.take(nh);
        dI = a.take(ni);
        dprobs = c.fused ? nullptr : a.take(probs);
        bias_part = a.take(ops::bias_grad_part_size(static_cast<int>(c.rows),
                                                    static_cast<int>(std::max(c.H, c.I))));
    }
};

}  // namespace bertbench::model::detail
