// The CUDA backend's fused attention (declared, with its contract, in kernels.cuh; the CPU's is
// ops/flash_attention.cpp): FlashAttention-2's loops on the unpadded layout, written for exactness
// first. A block of 128 threads owns a tile of 32 rows of one (sequence, head) — query rows in the
// forward and in the dq kernel, key rows in the dk/dv kernel — and walks the other side's tiles of
// 32 rows. Thread t works on row t/4 of a tile and on every fourth column (t%4, t%4+4, ...), so a
// row's max and sum are shuffles among 4 lanes. Operands are staged in shared memory as fp32 (bf16
// inputs widened exactly); products and sums are fp32 on the CUDA cores. The backward recomputes
// P from lse and regenerates the dropout mask from the stream in both of its kernels (dk/dv: a
// block per key tile over every query tile; dq: a block per query tile over every key tile), so
// no two blocks write the same row and the result does not depend on the launch shape.
#include "backend/cuda/flash_common.cuh"

namespace bertbench::backend::cuda {
using namespace detail;
namespace {

constexpr int kTile = 32;                  // rows per tile on both sides
constexpr int kFlashThreads = 4 * kTile;  // 4 threads per tile row
constexpr int kCols = kTile / 4;          // tile columns per thread
constexpr int kPitch = kTile + 1;         // row stride of the p and ds tiles

// Row stride of the operand tiles: the head size rounded up to an odd number, so that the 8 rows
// a warp reads at one column fall in 8 different banks.
__host__ __device__ inline int operand_pitch(int HS) { return HS | 1; }

// One block's shared memory: the q, k and v tiles and the p tile; the backward kernels also the o
// (dctx) and ds tiles, after them (the forward's blocks allocate only the first four).
size_t smem_bytes(int HS, bool backward) {
    const size_t operand = static_cast<size_t>(kTile) * operand_pitch(HS), square = kTile * kPitch;
    return sizeof(float) * (backward ? 4 * operand + 2 * square : 3 * operand + square);
}
struct Tiles {
    int ld;
    float *q, *k, *v, *p, *o, *ds;
    __device__ Tiles(float* base, int HS) : ld(operand_pitch(HS)) {
        const int n = kTile * ld;
        q = base, k = q + n, v = k + n, p = v + n, o = p + kTile * kPitch, ds = o + n;
    }
};

// The head's columns of `rows` packed rows from row0 into a tile (fp32; rows beyond: zero).
template <typename In>
__device__ void load_tile(float* dst, int ld, const In* src, int row0, int rows, int H, int col, int HS) {
    for (int e = threadIdx.x; e < kTile * HS; e += blockDim.x) {
        const int r = e / HS, d = e % HS;
        dst[r * ld + d] = r < rows ? val(src[static_cast<size_t>(row0 + r) * H + col + d]) : 0.f;
    }
}

__device__ __forceinline__ float dot(const float* a, const float* b, int n) {
    float s = 0.f;
    for (int d = 0; d < n; ++d) s = fmaf(a[d], b[d], s);
    return s;
}
// The thread's channels d = c4, c4 + 4, ... of Σ_jj w[jj·wstride]·tile[jj][d] over jj < n, added to
// acc: a row (wstride 1) or a column (wstride kPitch) of the p or ds tile times an operand tile.
template <int NC>
__device__ __forceinline__ void accumulate(float (&acc)[NC], const float* w, int wstride, const float* tile, int ld,
                                           int n, int c4, int HS) {
    for (int jj = 0; jj < n; ++jj) {
        const float wj = w[jj * wstride];
        const float* row = tile + jj * ld;
#pragma unroll
        for (int c = 0; c < NC; ++c)
            if (c4 + 4 * c < HS) acc[c] = fmaf(wj, row[c4 + 4 * c], acc[c]);
    }
}
// out[d] = f·acc for the thread's channels.
template <int NC>
__device__ __forceinline__ void store(float* out, const float (&acc)[NC], float f, int c4, int HS) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
        if (c4 + 4 * c < HS) out[c4 + 4 * c] = f * acc[c];
}

// What a thread of every kernel knows: its item (flash_common.cuh; tiles of kTile rows), its row
// r of a tile and its first channel c4.
struct Item : FlashItem {
    int r, c4;
    __device__ Item(const AttnShape& s, const Philox& ph, bool dropout, float keep_inv, int per_item)
        : FlashItem(s, ph, dropout, keep_inv, per_item, kTile), r(threadIdx.x >> 2), c4(threadIdx.x & 3) {}
    // The head's columns of `rows` rows from sequence row `row0` into a tile (beyond: zero).
    template <typename In>
    __device__ void load(float* dst, int ld, const In* src, int row0, int rows) const {
        load_tile(dst, ld, src, o + row0, rows, H, static_cast<int>(col), HS);
    }
};

// The key tile at j0 (bc rows of k and v), once the previous tile's readers are done.
template <typename In>
__device__ void load_keys(const Tiles& sm, const Item& it, const In* k, const In* v, int j0, int bc) {
    __syncthreads();
    it.load(sm.k, sm.ld, k, j0, bc);
    it.load(sm.v, sm.ld, v, j0, bc);
    __syncthreads();
}

// The backward's query tile at i0 (br rows of q and dctx), and for the thread's row r
// D_r = dctx_r · ctx_r and lse_r (zero beyond br).
template <typename In>
__device__ void load_queries(const Tiles& sm, const Item& it, const In* q, const In* dctx, const float* ctx,
                             const float* lse, int i0, int br, float& d_r, float& lse_r) {
    __syncthreads();
    it.load(sm.q, sm.ld, q, i0, br);
    it.load(sm.o, sm.ld, dctx, i0, br);
    __syncthreads();
    const int r = it.r;
    float part = 0.f;
    if (r < br) {
        const float* cr = ctx + static_cast<size_t>(it.o + i0 + r) * it.H + it.col;
        for (int d = it.c4; d < it.HS; d += 4) part = fmaf(sm.o[r * sm.ld + d], cr[d], part);
    }
    d_r = quad_sum(part);
    lse_r = r < br ? lse[static_cast<size_t>(it.o + i0 + r) * it.NH + it.h] : 0.f;
}

// For the query tile at i0 (br rows) against the key tile at j0 (bc rows), thread (r, c4) fills its
// columns of row r: p = P' = P·mask/keep and ds = P∘(dP − D) with P = exp(s·qkᵀ − lse) and
// dP = (dctx·vᵀ)·mask/keep (ops/flash_attention.hpp); zero outside the tiles' rows. Then syncs.
__device__ void grad_tile(const Tiles& sm, const Item& it, int i0, int br, int j0, int bc, float lse_r, float d_r) {
    const int r = it.r;
    for (int c = 0; c < kCols; ++c) {
        const int j = it.c4 + 4 * c;
        float pd = 0.f, ds = 0.f;
        if (r < br && j < bc) {
            const float p = expf(dot(sm.q + r * sm.ld, sm.k + j * sm.ld, it.HS) * it.scale - lse_r);
            float g = dot(sm.o + r * sm.ld, sm.v + j * sm.ld, it.HS);
            pd = p;
            if (it.has_drop) {
                const bool keep = it.keep(i0 + r, j0 + j);
                pd = keep ? p * it.inv_keep : 0.f;
                g = keep ? g * it.inv_keep : 0.f;
            }
            ds = p * (g - d_r);
        }
        sm.p[r * kPitch + j] = pd;
        sm.ds[r * kPitch + j] = ds;
    }
    __syncthreads();
}

// ctx, lse <- q, k, v: a block per query tile, the online softmax over the key tiles.
template <typename In, int NC>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_forward(float* ctx, float* lse, const In* q, const In* k, const In* v, AttnShape s, Philox drop,
                    bool has_drop, float inv_keep, int per_item) {
    float* smem = reinterpret_cast<float*>(flash_smem());
    const Item it(s, drop, has_drop, inv_keep, per_item);
    const Tiles sm(smem, it.HS);
    const int r = it.r, c4 = it.c4;
    for (int i0 = it.first; i0 < it.t; i0 += it.stride) {
        const int br = min(kTile, it.t - i0);
        __syncthreads();  // the previous tile's readers are done
        it.load(sm.q, sm.ld, q, i0, br);
        float m = -INFINITY, l = 0.f, acc[NC] = {};
        for (int j0 = 0; j0 < it.kn; j0 += kTile) {
            const int bc = min(kTile, it.kn - j0);
            load_keys(sm, it, k, v, j0, bc);
            float sv[kCols];
#pragma unroll
            for (int c = 0; c < kCols; ++c) {
                const int j = c4 + 4 * c;
                sv[c] = j < bc ? dot(sm.q + r * sm.ld, sm.k + j * sm.ld, it.HS) * it.scale : -INFINITY;
            }
            const float alpha = online_softmax_step(sv, m, l, it, r, br, i0, j0, bc, c4,
                                                    [&](int j, float p) { sm.p[r * kPitch + j] = p; });
#pragma unroll
            for (int c = 0; c < NC; ++c) acc[c] *= alpha;
            __syncthreads();  // the p tile is complete
            accumulate(acc, sm.p + r * kPitch, 1, sm.v, sm.ld, bc, c4, it.HS);
        }
        if (r < br) {
            store(ctx + static_cast<size_t>(it.o + i0 + r) * it.H + it.col, acc, it.inv_keep / l, c4, it.HS);
            if (c4 == 0) lse[static_cast<size_t>(it.o + i0 + r) * it.NH + it.h] = m + logf(l);
        }
    }
}

// dk, dv: a block per key tile (every row of the sequence, so that rows K_b..T_b get zeros), over
// every query tile; thread (r, c4) owns key row r of the tile.
template <typename In, int NC>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_backward_kv(float* dk, float* dv, const In* dctx, const In* q, const In* k, const In* v, const float* ctx,
                        const float* lse, AttnShape s, Philox drop, bool has_drop, float inv_keep, int per_item) {
    float* smem = reinterpret_cast<float*>(flash_smem());
    const Item it(s, drop, has_drop, inv_keep, per_item);
    const Tiles sm(smem, it.HS);
    for (int j0 = it.first; j0 < it.t; j0 += it.stride) {
        const int bc = max(0, min(kTile, it.kn - j0));  // key rows in this tile
        float gk[NC] = {}, gv[NC] = {};
        if (bc > 0) {
            load_keys(sm, it, k, v, j0, bc);
            for (int i0 = 0; i0 < it.t; i0 += kTile) {
                const int br = min(kTile, it.t - i0);
                float d_r, lse_r;
                load_queries(sm, it, q, dctx, ctx, lse, i0, br, d_r, lse_r);
                grad_tile(sm, it, i0, br, j0, bc, lse_r, d_r);
                accumulate(gv, sm.p + it.r, kPitch, sm.o, sm.ld, br, it.c4, it.HS);
                accumulate(gk, sm.ds + it.r, kPitch, sm.q, sm.ld, br, it.c4, it.HS);
            }
        }
        if (j0 + it.r < it.t) {  // gk, gv stay zero for rows that are no key
            const size_t at = static_cast<size_t>(it.o + j0 + it.r) * it.H + it.col;
            store(dk + at, gk, it.scale, it.c4, it.HS);
            store(dv + at, gv, 1.f, it.c4, it.HS);
        }
    }
}

// dq: a block per query tile, over every key tile.
template <typename In, int NC>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_backward_q(float* dq, const In* dctx, const In* q, const In* k, const In* v, const float* ctx,
                       const float* lse, AttnShape s, Philox drop, bool has_drop, float inv_keep, int per_item) {
    float* smem = reinterpret_cast<float*>(flash_smem());
    const Item it(s, drop, has_drop, inv_keep, per_item);
    const Tiles sm(smem, it.HS);
    for (int i0 = it.first; i0 < it.t; i0 += it.stride) {
        const int br = min(kTile, it.t - i0);
        float d_r, lse_r, gq[NC] = {};
        load_queries(sm, it, q, dctx, ctx, lse, i0, br, d_r, lse_r);
        for (int j0 = 0; j0 < it.kn; j0 += kTile) {
            const int bc = min(kTile, it.kn - j0);
            load_keys(sm, it, k, v, j0, bc);
            grad_tile(sm, it, i0, br, j0, bc, lse_r, d_r);
            accumulate(gq, sm.ds + it.r * kPitch, 1, sm.k, sm.ld, bc, it.c4, it.HS);
        }
        if (it.r < br) store(dq + static_cast<size_t>(it.o + i0 + it.r) * it.H + it.col, gq, it.scale, it.c4, it.HS);
    }
}

// The kernel instance for the head size: NC = channels per thread, a quarter of the head rounded up
// to 8, 16 or 32 (kFlashMaxHeadSize).
template <template <typename, int> class K, typename In, typename... Args>
void dispatch(cudaStream_t st, const AttnShape& s, Args... args) {
    if (s.HS <= 32)
        launch_flash(K<In, 8>::fn, kFlashThreads, smem_bytes(s.HS, K<In, 8>::backward), st, s, args...);
    else if (s.HS <= 64)
        launch_flash(K<In, 16>::fn, kFlashThreads, smem_bytes(s.HS, K<In, 16>::backward), st, s, args...);
    else
        launch_flash(K<In, 32>::fn, kFlashThreads, smem_bytes(s.HS, K<In, 32>::backward), st, s, args...);
}
template <typename In, int NC>
struct Forward {
    static constexpr auto fn = k_flash_forward<In, NC>;
    static constexpr bool backward = false;
};
template <typename In, int NC>
struct BackwardKV {
    static constexpr auto fn = k_flash_backward_kv<In, NC>;
    static constexpr bool backward = true;
};
template <typename In, int NC>
struct BackwardQ {
    static constexpr auto fn = k_flash_backward_q<In, NC>;
    static constexpr bool backward = true;
};

// The kernels for operands of type In (float, or uint16_t: bf16 bits).
template <typename In>
void forward_as(cudaStream_t st, float* ctx, float* lse, const void* q, const void* k, const void* v, AttnShape s,
                Philox ph, bool has_drop, float inv_keep) {
    dispatch<Forward, In>(st, s, ctx, lse, static_cast<const In*>(q), static_cast<const In*>(k),
                          static_cast<const In*>(v), s, ph, has_drop, inv_keep);
}
template <typename In>
void backward_as(cudaStream_t st, float* dq, float* dk, float* dv, const void* dctx, const void* q, const void* k,
                 const void* v, const float* ctx, const float* lse, AttnShape s, Philox ph, bool has_drop,
                 float inv_keep) {
    const In *o = static_cast<const In*>(dctx), *qi = static_cast<const In*>(q), *ki = static_cast<const In*>(k),
             *vi = static_cast<const In*>(v);
    dispatch<BackwardKV, In>(st, s, dk, dv, o, qi, ki, vi, ctx, lse, s, ph, has_drop, inv_keep);
    dispatch<BackwardQ, In>(st, s, dq, o, qi, ki, vi, ctx, lse, s, ph, has_drop, inv_keep);
}

}  // namespace

void flash_attention_forward(cudaStream_t st, float* ctx, float* lse, const void* q, const void* k, const void* v,
                             bool bf16_in, AttnShape s, const Philox* drop, float keep_prob) {
    if (s.B <= 0 || s.NH <= 0 || s.HS <= 0 || s.HS > kFlashMaxHeadSize) return;
    const Philox ph = drop ? *drop : Philox{0, 0, 0, 0};
    const float inv_keep = drop ? 1.f / keep_prob : 1.f;
    (bf16_in ? forward_as<uint16_t> : forward_as<float>)(st, ctx, lse, q, k, v, s, ph, drop != nullptr, inv_keep);
}

void flash_attention_backward(cudaStream_t st, float* dq, float* dk, float* dv, const void* dctx, const void* q,
                              const void* k, const void* v, bool bf16_in, const float* ctx, const float* lse,
                              AttnShape s, const Philox* drop, float keep_prob) {
    if (s.B <= 0 || s.NH <= 0 || s.HS <= 0 || s.HS > kFlashMaxHeadSize) return;
    const Philox ph = drop ? *drop : Philox{0, 0, 0, 0};
    const float inv_keep = drop ? 1.f / keep_prob : 1.f;
    (bf16_in ? backward_as<uint16_t> : backward_as<float>)(st, dq, dk, dv, dctx, q, k, v, ctx, lse, s, ph,
                                                           drop != nullptr, inv_keep);
}

}  // namespace bertbench::backend::cuda
