// Multi-head scaled dot-product self-attention on unpadded tokens, one sequence at a time
// (BERT modeling.py attention_layer; equal to the padded form with the -10000 additive mask,
// because exp(-10000 + x) underflows to 0 in fp32). Legend: B sequences, sequence b has T_b
// rows [o[b], o[b+1]) of the packed (N, H) buffers, NH heads of HS = H/NH channels. Its first
// K_b rows are the keys/values (key_lengths[b]; without key_lengths K_b = T_b): all T_b rows are
// queries, so a padded feature (run_squad.py: input_mask = K_b ones then zeros) runs its padding
// rows as queries over the real keys, exactly as the reference's key-only mask does; rows K_b..T_b
// get zero dk and dv (nothing attends to them).
// probs layout: sequence b, head h, row i, col j at pofs[b] + (h·T_b + i)·K_b + j,
// pofs[b] = NH·Σ_{b'<b} T_b'·K_b'. Work items are (b, h) pairs, scheduled dynamically; each GEMM runs
// single-threaded inside the OpenMP region. With AttentionBf16 (float only) the six per-head
// products take bf16 operands (q, k, v, dctx converted once by the caller; P' and dS per item)
// and accumulate in fp32; softmax, its backward and dropout stay fp32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ops/isa.hpp"
#include "ops/bf16.hpp"
#include "ops/dropout.hpp"
#include "ops/gemm.hpp"
#include "ops/parallel.hpp"
#include "ops/softmax.hpp"

namespace bertbench::ops {

struct AttentionShape {
    const int32_t* offsets = nullptr;  // (B+1)
    const size_t* prob_offsets = nullptr;  // (B+1) pofs
    int B = 0, NH = 0, HS = 0;
    const int32_t* key_lengths = nullptr;  // (B) K_b, 1 <= K_b <= T_b; null: K_b = T_b
    int H() const { return NH * HS; }
    int keys(int b, int t) const { return key_lengths ? key_lengths[b] : t; }
};

// bf16 copies (N,H) of the attention's inputs; dctx only for the backward.
struct AttentionBf16 {
    const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *dctx = nullptr;
};

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

namespace detail {
// Per-thread room for an item's bf16 t×t operand.
inline bf16* item_scratch(size_t n) {
    thread_local std::vector<bf16> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}
}  // namespace detail

// pofs(B+1) for the probs layout above; returns the total (pofs[B]). key_lengths as in
// AttentionShape (null: every row is a key).
inline size_t attention_prob_offsets(size_t* pofs, const int32_t* offsets, int B, int NH,
                                     const int32_t* key_lengths = nullptr) {
    pofs[0] = 0;
    for (int b = 0; b < B; ++b) {
        const size_t t = static_cast<size_t>(offsets[b + 1] - offsets[b]);
        const size_t kn = key_lengths ? static_cast<size_t>(key_lengths[b]) : t;
        pofs[b + 1] = pofs[b] + static_cast<size_t>(NH) * t * kn;
    }
    return pofs[B];
}

// ctx(N,H) <- q, k, v (N,H each). probs: softmax(q kᵀ/√HS) over each sequence's K_b keys (saved). With drop != null (dropout),
// the mask for all probs elements is generated from `drop` (saved) and probs·mask/keep is what
// multiplies v; it is formed in `scratch` (a buffer of the probs size, not needed afterwards: the
// backward forms it again from probs and mask). scratch is unused without dropout.
template <typename T>
void attention_forward(T* ctx, T* probs, T* scratch, uint8_t* mask, const T* q, const T* k,
                       const T* v, const AttentionShape& s, const DropoutStream* drop,
                       const AttentionBf16* lp = nullptr) {
    const int H = s.H(), NH = s.NH, HS = s.HS;
    const T scale = T(1) / std::sqrt(T(HS));
    const T inv_keep = drop ? T(1) / T(drop->keep_prob) : T(1);
    const int items = s.B * NH;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(s.prob_offsets[s.B] * (s.HS + 1)))
    for (int it = 0; it < items; ++it) {
        const int b = it / NH, h = it % NH;
        const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.keys(b, t);
        if (t == 0) continue;
        const size_t base = s.prob_offsets[b] + static_cast<size_t>(h) * t * kn;
        T* p = probs + base;
        const T* qb = q + static_cast<size_t>(o) * H + h * HS;
        const T* kb = k + static_cast<size_t>(o) * H + h * HS;
        const T* vb = v + static_cast<size_t>(o) * H + h * HS;
        T* cb = ctx + static_cast<size_t>(o) * H + h * HS;
        const size_t off = static_cast<size_t>(o) * H + h * HS;
        if constexpr (std::is_same_v<T, float>) {
            if (lp) gemm_bf16(true, t, kn, HS, lp->q + off, H, lp->k + off, H, 0.f, p, kn);
        }
        if (!lp) gemm(false, true, t, kn, HS, T(1), qb, H, kb, H, T(0), p, kn);  // S(t,kn) = q kᵀ
        const T* pv = drop ? scratch + base : p;
        bf16* pb = lp ? detail::item_scratch(static_cast<size_t>(t) * kn) : nullptr;  // bf16(P')
        // softmax, dropout and (bf16) the conversion of P' row by row, while the row is in L1
        for (int i = 0; i < t; ++i) {
            const size_t r = static_cast<size_t>(i) * kn;
            softmax_row(p + r, p + r, kn, scale);
            if (drop) {
                uint8_t* m = mask + base + r;
                T* pd = scratch + base + r;
                dropout_fill_mask(m, *drop, base + r, static_cast<size_t>(kn));
                masked_scale(pd, p + r, m, inv_keep, static_cast<size_t>(kn));
            }
            if (pb) to_bf16_serial(pb + r, pv + r, static_cast<size_t>(kn));
        }
        if constexpr (std::is_same_v<T, float>) {
            if (lp) gemm_bf16(false, t, HS, kn, pb, kn, lp->v + off, H, 0.f, cb, H);
        }
        if (!lp) gemm(false, false, t, HS, kn, T(1), pv, kn, vb, H, T(0), cb, H);  // ctx(t,HS) = P' v
    }
}

// dq, dk, dv (N,H) overwritten  <-  dctx(N,H), q, k, v, probs and mask (null: no dropout) saved
// by the forward. dprobs: scratch of the probs size.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, T* dprobs, const T* dctx, const T* q, const T* k,
                        const T* v, const T* probs, const uint8_t* mask, T keep_prob,
                        const AttentionShape& s, const AttentionBf16* lp = nullptr) {
    const int H = s.H(), NH = s.NH, HS = s.HS;
    const T scale = T(1) / std::sqrt(T(HS));
    const T inv_keep = T(1) / keep_prob;
    const int items = s.B * NH;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(s.prob_offsets[s.B] * (s.HS + 1)))
    for (int it = 0; it < items; ++it) {
        const int b = it / NH, h = it % NH;
        const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.keys(b, t);
        if (t == 0) continue;
        const size_t base = s.prob_offsets[b] + static_cast<size_t>(h) * t * kn;
        const size_t n = static_cast<size_t>(t) * kn;
        const T* p = probs + base;
        T* dp = dprobs + base;
        const uint8_t* m = mask ? mask + base : nullptr;
        const size_t off = static_cast<size_t>(o) * H + h * HS;
        const T* pv = p;
        if (m) {  // P' = P·mask/keep, formed in dp before dp is needed
            masked_scale(dp, p, m, inv_keep, n);
            pv = dp;
        }
        if constexpr (std::is_same_v<T, float>) {
            if (lp) {
                bf16* tb = detail::item_scratch(n);
                to_bf16_transposed(tb, pv, t, kn, kn);
                gemm_bf16(false, kn, HS, t, tb, t, lp->dctx + off, H, 0.f, dv + off, H);
                gemm_bf16(true, t, kn, HS, lp->dctx + off, H, lp->v + off, H, 0.f, dp, kn);
            }
        }
        if (!lp) {
            gemm(true, false, kn, HS, t, T(1), pv, kn, dctx + off, H, T(0), dv + off, H);  // dv = P'ᵀ dctx
            gemm(false, true, t, kn, HS, T(1), dctx + off, H, v + off, H, T(0), dp, kn);   // dP' = dctx vᵀ
        }
        if (m)
            masked_scale(dp, dp, m, inv_keep, n);
        // bf16: the scale goes into dS before it is rounded (s·dS is the bf16 operand), row by row
        // with the conversion, while the row is in L1
        bf16* tb = lp ? detail::item_scratch(n) : nullptr;
        for (int i = 0; i < t; ++i) {
            T* row = dp + static_cast<size_t>(i) * kn;
            softmax_row_backward(row, row, p + static_cast<size_t>(i) * kn, kn);
            if (tb) {
                for (int j = 0; j < kn; ++j) row[j] *= scale;
                to_bf16_serial(tb + static_cast<size_t>(i) * kn, row, static_cast<size_t>(kn));
            }
        }
        if constexpr (std::is_same_v<T, float>) {
            if (lp) {
                gemm_bf16(false, t, HS, kn, tb, kn, lp->k + off, H, 0.f, dq + off, H);
                to_bf16_transposed(tb, dp, t, kn, kn);
                gemm_bf16(false, kn, HS, t, tb, t, lp->q + off, H, 0.f, dk + off, H);
            }
        }
        if (!lp) {
            gemm(false, false, t, HS, kn, scale, dp, kn, k + off, H, T(0), dq + off, H);  // dq = s·dS k
            gemm(true, false, kn, HS, t, scale, dp, kn, q + off, H, T(0), dk + off, H);   // dk = s·dSᵀ q
        }
        for (int i = kn; i < t; ++i) {  // rows that are no key: nothing flows back through k, v
            const size_t r = static_cast<size_t>(o + i) * H + h * HS;
            std::fill_n(dk + r, HS, T(0));
            std::fill_n(dv + r, HS, T(0));
        }
    }
}

BB_OPS_ISA_END
