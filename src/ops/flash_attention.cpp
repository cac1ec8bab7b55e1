// Fused attention (flash_attention.hpp): tile loops around per-tile GEMMs (oneDNN sgemm, or
// gemm_bf16 with bf16 operands, single-threaded inside the OpenMP region as in attention.hpp).
// Invariant: the forward and the backward compute a tile's S = q kᵀ with the same call on the same
// operands, so the backward's P = exp(S·s − lse) is the forward's softmax up to the order of l's sum.
#include "ops/flash_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "ops/gemm.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {
namespace {

// Per-thread tile buffers: grown on first use (or a larger shape), then reused by every call.
template <typename T>
struct FlashScratch {
    std::vector<T> s, pd, dp, rows;  // (tq·tk) ×3, per-row values (m, l / D)
    std::vector<T> l;
    std::vector<uint8_t> mask;       // (tq·tk)
    std::vector<bf16> b;             // (tq·tk)
    void reserve(size_t tile, size_t nrows) {
        if (s.size() < tile) {
            s.resize(tile);
            pd.resize(tile);
            dp.resize(tile);
            mask.resize(tile);
            b.resize(tile);
        }
        if (rows.size() < nrows) {
            rows.resize(nrows);
            l.resize(nrows);
        }
    }
};

template <typename T>
FlashScratch<T>& scratch() {
    thread_local FlashScratch<T> sc;
    return sc;
}

void check_tiles(FlashTiles t) {
    if (t.q < 1 || t.k < 1) fail("[flash_attention] tile sizes must be >= 1, got q={} k={}", t.q, t.k);
}

// S(br, bc) = q_i k_jᵀ (unscaled) for the tile at query row i0, key row j0 of the item at `off`.
template <typename T>
void tile_scores(T* S, const T* q, const T* k, const FlashBf16* lp, size_t off, int i0, int j0,
                 int br, int bc, int H, int HS) {
    const size_t qi = off + static_cast<size_t>(i0) * H, kj = off + static_cast<size_t>(j0) * H;
    (void)lp;  // bf16 operands: float only
    if constexpr (std::is_same_v<T, float>) {
        if (lp) return gemm_bf16(true, br, bc, HS, lp->q + qi, H, lp->k + kj, H, 0.f, S, bc);
    }
    gemm(false, true, br, bc, HS, T(1), q + qi, H, k + kj, H, T(0), S, bc);
}

}  // namespace

template <typename T>
void flash_attention_forward(T* ctx, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& s, const DropoutStream* drop,
                             const FlashBf16* lp, FlashTiles tiles) {
    check_tiles(tiles);
    const int H = s.H(), NH = s.NH, HS = s.HS, tq = tiles.q, tk = tiles.k;
    const T scale = T(1) / std::sqrt(T(HS));
    const T inv_keep = drop ? T(1) / T(drop->keep_prob) : T(1);
    const int items = s.B * NH;
    const size_t work = static_cast<size_t>(s.offsets[s.B]) * static_cast<size_t>(H) * 64;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(work))
    for (int it = 0; it < items; ++it) {
        const int b = it / NH, h = it % NH;
        const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.keys(b, t);
        if (t == 0) continue;
        FlashScratch<T>& sc = scratch<T>();
        sc.reserve(static_cast<size_t>(tq) * tk, static_cast<size_t>(tq));
        const size_t off = static_cast<size_t>(o) * H + static_cast<size_t>(h) * HS;
        const size_t base = drop ? s.prob_offsets[b] + static_cast<size_t>(h) * t * kn : 0;
        T* S = sc.s.data();
        T* m = sc.rows.data();
        T* l = sc.l.data();
        for (int i0 = 0; i0 < t; i0 += tq) {
            const int br = std::min(tq, t - i0);
            T* cb = ctx + off + static_cast<size_t>(i0) * H;
            for (int j0 = 0; j0 < kn; j0 += tk) {
                const int bc = std::min(tk, kn - j0);
                const size_t n = static_cast<size_t>(bc);
                tile_scores(S, q, k, lp, off, i0, j0, br, bc, H, HS);
                for (int r = 0; r < br; ++r) {  // online softmax row by row, then dropout
                    T* sr = S + static_cast<size_t>(r) * bc;
                    const T mx = array_max(sr, n) * scale;  // = max(s·scale), scale > 0
                    const T mnew = j0 == 0 ? mx : std::max(m[r], mx);
                    const T sum = exp_affine_sum(sr, sr, n, scale, mnew);
                    if (j0 == 0) {
                        l[r] = sum;
                    } else {
                        const T c = std::exp(m[r] - mnew);  // rescale what the old max built
                        l[r] = l[r] * c + sum;
                        if (c != T(1)) {
                            T* cr = cb + static_cast<size_t>(r) * H;
                            for (int d = 0; d < HS; ++d) cr[d] *= c;
                        }
                    }
                    m[r] = mnew;
                    if (drop) {
                        uint8_t* mk = sc.mask.data();
                        dropout_fill_mask(mk, *drop, base + static_cast<size_t>(i0 + r) * kn + j0, n);
                        masked_scale(sr, sr, mk, T(1), n);  // 1/keep goes into the final 1/l
                    }
                }
                const size_t vj = off + static_cast<size_t>(j0) * H;
                if constexpr (std::is_same_v<T, float>) {
                    if (lp) {
                        to_bf16(sc.b.data(), S, static_cast<size_t>(br) * bc);
                        gemm_bf16(false, br, HS, bc, sc.b.data(), bc, lp->v + vj, H,
                                  j0 == 0 ? 0.f : 1.f, cb, H);
                    }
                }
                if (!lp)
                    gemm(false, false, br, HS, bc, T(1), S, bc, v + vj, H, j0 == 0 ? T(0) : T(1), cb, H);
            }
            for (int r = 0; r < br; ++r) {
                T* cr = cb + static_cast<size_t>(r) * H;
                const T inv = inv_keep / l[r];
                for (int d = 0; d < HS; ++d) cr[d] *= inv;
                lse[static_cast<size_t>(o + i0 + r) * NH + h] = m[r] + std::log(l[r]);
            }
        }
    }
}

template <typename T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dctx, const T* q, const T* k,
                              const T* v, const T* ctx, const T* lse, const AttentionShape& s,
                              const DropoutStream* drop, const FlashBf16* lp, FlashTiles tiles) {
    check_tiles(tiles);
    const int H = s.H(), NH = s.NH, HS = s.HS, tq = tiles.q, tk = tiles.k;
    const T scale = T(1) / std::sqrt(T(HS));
    const T inv_keep = drop ? T(1) / T(drop->keep_prob) : T(1);
    const int items = s.B * NH;
    const size_t work = static_cast<size_t>(s.offsets[s.B]) * static_cast<size_t>(H) * 64;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(work))
    for (int it = 0; it < items; ++it) {
        const int b = it / NH, h = it % NH;
        const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.keys(b, t);
        if (t == 0) continue;
        FlashScratch<T>& sc = scratch<T>();
        sc.reserve(static_cast<size_t>(tq) * tk, static_cast<size_t>(t));
        const size_t off = static_cast<size_t>(o) * H + static_cast<size_t>(h) * HS;
        const size_t base = drop ? s.prob_offsets[b] + static_cast<size_t>(h) * t * kn : 0;
        T* D = sc.rows.data();
        T* S = sc.s.data();
        T* dP = sc.dp.data();
        for (int i = 0; i < t; ++i) {  // D_i = dctx_i · ctx_i
            const T* dr = dctx + off + static_cast<size_t>(i) * H;
            const T* cr = ctx + off + static_cast<size_t>(i) * H;
            T acc = 0;
            if constexpr (std::is_same_v<T, float>) {
                if (lp) {  // the bf16 dctx that dP' = dctx vᵀ multiplies, so that dS = 0 where the
                           // softmax is flat (K_b = 1), as in the materialized kernel
                    const bf16* db = lp->dctx + off + static_cast<size_t>(i) * H;
                    for (int d = 0; d < HS; ++d) acc += to_float(db[d]) * cr[d];
                }
            }
            if (!lp)
                for (int d = 0; d < HS; ++d) acc += dr[d] * cr[d];
            D[i] = acc;
        }
        for (int j0 = 0; j0 < kn; j0 += tk) {
            const int bc = std::min(tk, kn - j0);
            const size_t kj = off + static_cast<size_t>(j0) * H;
            for (int i0 = 0; i0 < t; i0 += tq) {
                const int br = std::min(tq, t - i0);
                const size_t n = static_cast<size_t>(br) * bc;
                const size_t qi = off + static_cast<size_t>(i0) * H;
                tile_scores(S, q, k, lp, off, i0, j0, br, bc, H, HS);
                for (int r = 0; r < br; ++r)  // P = exp(S·s − lse), the forward's softmax
                    exp_affine(S + static_cast<size_t>(r) * bc, S + static_cast<size_t>(r) * bc,
                               static_cast<size_t>(bc), scale,
                               lse[static_cast<size_t>(o + i0 + r) * NH + h]);
                const T* Pd = S;  // P' = P·mask/keep
                if (drop) {
                    uint8_t* mk = sc.mask.data();
                    for (int r = 0; r < br; ++r)
                        dropout_fill_mask(mk + static_cast<size_t>(r) * bc, *drop,
                                          base + static_cast<size_t>(i0 + r) * kn + j0,
                                          static_cast<size_t>(bc));
                    masked_scale(sc.pd.data(), S, mk, inv_keep, n);
                    Pd = sc.pd.data();
                }
                const T beta_i = i0 == 0 ? T(0) : T(1), beta_j = j0 == 0 ? T(0) : T(1);
                if constexpr (std::is_same_v<T, float>) {
                    if (lp) {  // dv_j += P'ᵀ dctx_i ; dP' = dctx_i v_jᵀ
                        to_bf16_transposed(sc.b.data(), Pd, br, bc, bc);
                        gemm_bf16(false, bc, HS, br, sc.b.data(), br, lp->dctx + qi, H, beta_i, dv + kj, H);
                        gemm_bf16(true, br, bc, HS, lp->dctx + qi, H, lp->v + kj, H, 0.f, dP, bc);
                    }
                }
                if (!lp) {
                    gemm(true, false, bc, HS, br, T(1), Pd, bc, dctx + qi, H, beta_i, dv + kj, H);
                    gemm(false, true, br, bc, HS, T(1), dctx + qi, H, v + kj, H, T(0), dP, bc);
                }
                if (drop) masked_scale(dP, dP, sc.mask.data(), inv_keep, n);  // dP = dP'·mask/keep
                for (int r = 0; r < br; ++r) {  // dS = P ∘ (dP − D_i)
                    const T di = D[i0 + r];
                    T* dr = dP + static_cast<size_t>(r) * bc;
                    const T* pr = S + static_cast<size_t>(r) * bc;
                    for (int c = 0; c < bc; ++c) dr[c] = pr[c] * (dr[c] - di);
                }
                if constexpr (std::is_same_v<T, float>) {
                    if (lp) {  // the scale goes into dS before it is rounded, as in attention.hpp
                        for (size_t e = 0; e < n; ++e) dP[e] *= scale;
                        to_bf16(sc.b.data(), dP, n);
                        gemm_bf16(false, br, HS, bc, sc.b.data(), bc, lp->k + kj, H, beta_j, dq + qi, H);
                        to_bf16_transposed(sc.b.data(), dP, br, bc, bc);
                        gemm_bf16(false, bc, HS, br, sc.b.data(), br, lp->q + qi, H, beta_i, dk + kj, H);
                    }
                }
                if (!lp) {
                    gemm(false, false, br, HS, bc, scale, dP, bc, k + kj, H, beta_j, dq + qi, H);
                    gemm(true, false, bc, HS, br, scale, dP, bc, q + qi, H, beta_i, dk + kj, H);
                }
            }
        }
        for (int i = kn; i < t; ++i) {  // rows that are no key: nothing flows back through k, v
            const size_t r = static_cast<size_t>(o + i) * H + static_cast<size_t>(h) * HS;
            std::fill_n(dk + r, HS, T(0));
            std::fill_n(dv + r, HS, T(0));
        }
    }
}

template void flash_attention_forward<float>(float*, float*, const float*, const float*,
                                             const float*, const AttentionShape&,
                                             const DropoutStream*, const FlashBf16*, FlashTiles);
template void flash_attention_forward<double>(double*, double*, const double*, const double*,
                                              const double*, const AttentionShape&,
                                              const DropoutStream*, const FlashBf16*, FlashTiles);
template void flash_attention_backward<float>(float*, float*, float*, const float*, const float*,
                                              const float*, const float*, const float*,
                                              const float*, const AttentionShape&,
                                              const DropoutStream*, const FlashBf16*, FlashTiles);
template void flash_attention_backward<double>(double*, double*, double*, const double*,
                                               const double*, const double*, const double*,
                                               const double*, const double*,
                                               const AttentionShape&, const DropoutStream*,
                                               const FlashBf16*, FlashTiles);

}  // namespace bertbench::ops
