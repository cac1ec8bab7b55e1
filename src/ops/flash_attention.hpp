// Fused (FlashAttention-2 style) multi-head self-attention on the unpadded layout: the same maths,
// shapes, key_lengths rule and dropout bits as attention.hpp, without the (NH·T_b·K_b) probs.
// Legend as in attention.hpp: B sequences, sequence b = rows [o[b], o[b+1]) of the packed (N, H)
// buffers, T_b rows (all queries), the first K_b of them keys/values, NH heads of HS channels.
// forward:  per (b, h), query tiles of tq rows × key tiles of tk keys with the online softmax
//           (running row max m and sum l; ctx rescaled by exp(m_old − m_new) when m grows);
//           saves only lse(N, NH) = m + log l per query row and head (plus ctx, the output).
// backward: recomputes P = exp(q kᵀ·s − lse) tile by tile, D_i = dctx_i·ctx_i (= Σ_j dP'_ij P'_ij),
//           dS = P ∘ (dP − D), dq = s·dS k, dk = s·dSᵀ q, dv = P'ᵀ dctx; rows K_b..T_b get zero dk, dv.
// Dropout: element (b, h, i, j) is element pofs[b] + (h·T_b + i)·K_b + j of the stream, exactly
// the index the materialized kernel uses, so the same elements are dropped; the mask is never
// stored, the backward regenerates each tile's mask from the stream (Philox is counter-based).
// Work items are (b, h) pairs, scheduled dynamically; each item runs serially in a fixed order,
// so the result does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/attention.hpp"
#include "ops/bf16.hpp"
#include "ops/dropout.hpp"

namespace bertbench::ops {

// Query and key tile sizes (rows of q, rows of k per tile; each >= 1, else an Error). The defaults
// keep a tile's S, its mask and the q/k/v/dctx tiles of one head in L2; tests use small odd tiles
// to cover the edges. Any tiles give the same result up to fp32 summation order.
struct FlashTiles {
    int q = 64, k = 128;
};
// The engine's tiles: bf16 operands go through oneDNN matmul primitives, whose per-call cost asks
// for larger tiles than the fp32 sgemm calls do (chosen by timing both kernels per tile shape).
inline FlashTiles default_flash_tiles(bool bf16_operands) {
    return bf16_operands ? FlashTiles{128, 512} : FlashTiles{64, 128};
}

// bf16 copies (N,H) of the operands (float only), as AttentionBf16: dctx only for the backward.
struct FlashBf16 {
    const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *dctx = nullptr;
};

// ctx(N,H), lse(N,NH) (row o+i, head h at (o+i)·NH + h) <- q, k, v (N,H each). s.prob_offsets
// (pofs) give the dropout element index only (may be null without dropout). drop null: no
// dropout. lp (float only): bf16 q, k, v; the products accumulate in fp32.
template <typename T>
void flash_attention_forward(T* ctx, T* lse, const T* q, const T* k, const T* v,
                             const AttentionShape& s, const DropoutStream* drop,
                             const FlashBf16* lp = nullptr, FlashTiles tiles = {});

// dq, dk, dv (N,H) overwritten <- dctx(N,H), q, k, v, ctx, lse from the forward and the same
// dropout stream (null: no dropout). lp (float only): bf16 q, k, v, dctx (the fp32 q, k, v are
// then not read and may be null). ctx is the forward's fp32 output in both cases: D = dctx·ctx
// must match Σ_j dP'·P' to fp32 accuracy (a bf16 ctx leaves a bias in dS where P is flat).
template <typename T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dctx, const T* q, const T* k,
                              const T* v, const T* ctx, const T* lse, const AttentionShape& s,
                              const DropoutStream* drop, const FlashBf16* lp = nullptr,
                              FlashTiles tiles = {});

}  // namespace bertbench::ops
