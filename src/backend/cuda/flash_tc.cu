// The CUDA backend's fused attention for bf16 operands on the tensor cores (declared in
// kernels.cuh): flash_kernels.cu's loops with tiles of 64 rows, the products by wmma (bf16 16×16×16
// fragments, fp32 accumulation) from shared memory, and the CPU bf16 kernel's roundings
// (ops/flash_attention.cpp): the forward's P and the backward's P' and dS·s are rounded to bf16
// before they multiply, ctx and the gradients accumulate in fp32. A block of 4 warps owns a tile;
// warp w owns its rows 16w..16w+15 — query rows in the forward and in the dq kernel, key rows in
// the dk/dv kernel — for the products and for the softmax between them, so only the tiles all
// warps read (the other side's) need the block's barrier. The wmma calls read and write shared
// memory only (no fragment layout is assumed); the elementwise steps map lane l of a warp to rows
// l/4 and l/4 + 8 of the warp's 16 and to every fourth column from l%4, as flash_kernels.cu does.
// The head is padded with zero channels to 32, 64 or 128 (the fragments' multiple), a tile's
// rows beyond the sequence are zero, and the keys beyond K_b get P = 0.
#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

#include "backend/cuda/flash_common.cuh"

namespace bertbench::backend::cuda {
using namespace detail;
namespace wm = nvcuda::wmma;
namespace {

using bf = __nv_bfloat16;
constexpr int kRows = 64;            // rows per tile on both sides
constexpr int kTcThreads = 128;      // 4 warps of 16 rows
constexpr int kSPitch = kRows + 4;   // fp32 score tiles (a multiple of 4, as wmma asks)
constexpr int kPPitch = kRows + 8;   // bf16 probability tiles (a multiple of 8)
constexpr int kRowCols = kRows / 4;  // score columns per lane and row

using Acc = wm::fragment<wm::accumulator, 16, 16, 16, float>;
using FragA = wm::fragment<wm::matrix_a, 16, 16, 16, bf, wm::row_major>;

// Shared memory of a block, for heads padded to HSP = 16·NF channels: the operand tiles (q, k, v
// and, in the backward, dctx as o; bf16, pitch HSP + 8), two fp32 score tiles s and dp (the
// forward uses s only), two bf16 tiles p and ds (the forward: p), the forward's fp32 ctx tile o32
// (pitch HSP + 4), and the backward's per-row D and lse. Every part is a multiple of 128 bytes.
template <int NF>
struct TcTiles {
    static constexpr int HSP = 16 * NF, OP = HSP + 8, CP = HSP + 4;
    static constexpr size_t kOperand = sizeof(bf) * kRows * OP,
                            kScore = sizeof(float) * kRows * kSPitch,
                            kProb = sizeof(bf) * kRows * kPPitch, kCtx = sizeof(float) * kRows * CP;
    static constexpr size_t bytes(bool backward) {
        return backward ? 4 * kOperand + 2 * kScore + 2 * kProb + 2 * sizeof(float) * kRows
                        : 3 * kOperand + kScore + kProb + kCtx;
    }
    bf *q, *k, *v, *o = nullptr, *p, *ds;
    float *s, *dp = nullptr, *o32 = nullptr, *D = nullptr, *lse = nullptr;
    __device__ TcTiles(unsigned char* base, bool backward) {
        q = reinterpret_cast<bf*>(base);
        k = q + kRows * OP;
        v = k + kRows * OP;
        if (backward) o = v + kRows * OP;
        s = reinterpret_cast<float*>((backward ? o : v) + kRows * OP);
        if (backward) dp = s + kRows * kSPitch;
        p = reinterpret_cast<bf*>(s + (backward ? 2 : 1) * kRows * kSPitch);
        ds = p + kRows * kPPitch;
        if (backward) {
            D = reinterpret_cast<float*>(ds + kRows * kPPitch);
            lse = D + kRows;
        } else {
            o32 = reinterpret_cast<float*>(ds);  // the forward has no ds
        }
    }
};

__device__ __forceinline__ void put(bf* dst, float x) {
    *reinterpret_cast<uint16_t*>(dst) = bf16_bits(x);
}

// The head's channels of `rows` rows from sequence row row0 into a tile (pitch HSP + 8); rows
// beyond and channels beyond HS: zero.
template <int NF>
__device__ void load_rows(bf* dst, const uint16_t* src, const FlashItem& it, int row0, int rows) {
    constexpr int HSP = TcTiles<NF>::HSP, OP = TcTiles<NF>::OP;
    uint16_t* d16 = reinterpret_cast<uint16_t*>(dst);
    for (int e = threadIdx.x; e < kRows * HSP; e += blockDim.x) {
        const int r = e / HSP, d = e % HSP;
        d16[r * OP + d] = r < rows && d < it.HS ? src[it.at(row0 + r) + d] : uint16_t{0};
    }
}

// The warp's C(16 × 16·NB) (fp32, row-major, pitch ldc) = [C +] A(16 × 16·K)·B: A row-major
// (pitch lda); B (16·K × 16·NB) row-major (pitch ldb), or with BT the transpose of a row-major
// X(16·NB × 16·K) at b (B = Xᵀ: the key tile's rows for q·kᵀ).
template <int NB, bool BT>
__device__ void warp_product(float* c, int ldc, const bf* a, int lda, const bf* b, int ldb, int K,
                             bool add) {
    using FragB = wm::fragment<wm::matrix_b, 16, 16, 16, bf,
                               std::conditional_t<BT, wm::col_major, wm::row_major>>;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
        Acc acc;
        if (add)
            wm::load_matrix_sync(acc, c + n * 16, ldc, wm::mem_row_major);
        else
            wm::fill_fragment(acc, 0.f);
        for (int kk = 0; kk < K; ++kk) {
            FragA fa;
            FragB fb;
            wm::load_matrix_sync(fa, a + kk * 16, lda);
            wm::load_matrix_sync(fb, BT ? b + n * 16 * ldb + kk * 16 : b + kk * 16 * ldb + n * 16,
                                 ldb);
            wm::mma_sync(acc, fa, fb, acc);
        }
        wm::store_matrix_sync(c + n * 16, acc, ldc, wm::mem_row_major);
    }
}

// acc(16 × 16·NF) += A(16 × kRows)·B(kRows × 16·NF), both row-major: the backward's gradients,
// held in fragments across the other side's tiles.
template <int NF>
__device__ void warp_accumulate(Acc (&acc)[NF], const bf* a, int lda, const bf* b, int ldb) {
    using FragB = wm::fragment<wm::matrix_b, 16, 16, 16, bf, wm::row_major>;
    for (int kk = 0; kk < kRows / 16; ++kk) {
        FragA fa;
        wm::load_matrix_sync(fa, a + kk * 16, lda);
#pragma unroll
        for (int n = 0; n < NF; ++n) {
            FragB fb;
            wm::load_matrix_sync(fb, b + kk * 16 * ldb + n * 16, ldb);
            wm::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
}

// The warp's 16 rows of a gradient held in fragments, times f, into rows row0 + w0 + r (< t) of
// the (N, H) buffer out, through the fp32 score tiles (pitch HSP + 4 fits their 2·kRows·kSPitch
// floats). Starts with a barrier: other warps may still read those tiles.
template <int NF>
__device__ void store_rows(float* out, Acc (&acc)[NF], float* stage, const FlashItem& it, int row0,
                           int w0) {
    constexpr int CP = TcTiles<NF>::CP;
    __syncthreads();
    float* mine = stage + w0 * CP;
#pragma unroll
    for (int n = 0; n < NF; ++n)
        wm::store_matrix_sync(mine + n * 16, acc[n], CP, wm::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
        const int r = (lane >> 2) + 8 * x, i = row0 + w0 + r;
        if (i < it.t)
            for (int d = lane & 3; d < it.HS; d += 4) out[it.at(i) + d] = mine[r * CP + d];
    }
}

// ctx, lse <- q, k, v: a block per query tile, the online softmax over the key tiles. The ctx
// tile in shared memory is rescaled by exp(m_old − m_new) and then gets P·v added, as on the CPU.
template <int NF>
__global__ void __launch_bounds__(kTcThreads)
    k_tc_forward(float* ctx, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                 AttnShape s, Philox drop, bool has_drop, float inv_keep, int per_item) {
    using L = TcTiles<NF>;
    unsigned char* smem = flash_smem();
    const FlashItem it(s, drop, has_drop, inv_keep, per_item, kRows);
    const L sm(smem, false);
    const int lane = threadIdx.x & 31, w0 = 16 * (threadIdx.x >> 5), c4 = lane & 3;
    for (int i0 = it.first; i0 < it.t; i0 += it.stride) {
        const int br = min(kRows, it.t - i0);
        __syncthreads();  // the previous tile's readers are done
        load_rows<NF>(sm.q, q, it, i0, br);
        for (int e = threadIdx.x; e < kRows * L::CP; e += blockDim.x) sm.o32[e] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        for (int j0 = 0; j0 < it.kn; j0 += kRows) {
            const int bc = min(kRows, it.kn - j0);
            __syncthreads();  // q and ctx are set; the previous key tile's readers are done
            load_rows<NF>(sm.k, k, it, j0, bc);
            load_rows<NF>(sm.v, v, it, j0, bc);
            __syncthreads();
            warp_product<kRows / 16, true>(sm.s + w0 * kSPitch, kSPitch, sm.q + w0 * L::OP, L::OP,
                                           sm.k, L::OP, NF, false);
            __syncwarp();
#pragma unroll
            for (int x = 0; x < 2; ++x) {
                const int r = w0 + (lane >> 2) + 8 * x;  // the lane's row of the tile
                float sv[kRowCols];
#pragma unroll
                for (int c = 0; c < kRowCols; ++c) {
                    const int j = c4 + 4 * c;
                    sv[c] = j < bc ? sm.s[r * kSPitch + j] * it.scale : -INFINITY;
                }
                const float alpha = online_softmax_step(sv, m[x], l[x], it, r, br, i0, j0, bc, c4,
                                                        [&](int j, float p) { put(sm.p + r * kPPitch + j, p); });
                for (int d = c4; d < L::HSP; d += 4) sm.o32[r * L::CP + d] *= alpha;
            }
            __syncwarp();
            warp_product<NF, false>(sm.o32 + w0 * L::CP, L::CP, sm.p + w0 * kPPitch, kPPitch, sm.v,
                                    L::OP, kRows / 16, true);
        }
        __syncwarp();
#pragma unroll
        for (int x = 0; x < 2; ++x) {
            const int r = w0 + (lane >> 2) + 8 * x;
            if (r >= br) continue;
            const float f = it.inv_keep / l[x];
            float* out = ctx + it.at(i0 + r);
            for (int d = c4; d < it.HS; d += 4) out[d] = f * sm.o32[r * L::CP + d];
            if (c4 == 0) lse[static_cast<size_t>(it.o + i0 + r) * it.NH + it.h] = m[x] + logf(l[x]);
        }
    }
}

// The backward's query tile at i0 (br rows of q and dctx) and per row D = dctx·ctx (the bf16
// dctx, the fp32 ctx) and lse (zero beyond br); ends with a barrier.
template <int NF>
__device__ void load_queries(const TcTiles<NF>& sm, const FlashItem& it, const uint16_t* q,
                             const uint16_t* dctx, const float* ctx, const float* lse, int i0,
                             int br) {
    __syncthreads();  // the previous tiles' readers are done
    load_rows<NF>(sm.q, q, it, i0, br);
    load_rows<NF>(sm.o, dctx, it, i0, br);
    __syncthreads();
    const int r = threadIdx.x >> 1, half = threadIdx.x & 1;  // 2 threads per row
    float part = 0.f;
    if (r < br) {
        const float* cr = ctx + it.at(i0 + r);
        for (int d = half; d < it.HS; d += 2)
            part = fmaf(__bfloat162float(sm.o[r * TcTiles<NF>::OP + d]), cr[d], part);
    }
    part += __shfl_xor_sync(0xffffffffu, part, 1);
    if (half == 0) {
        sm.D[r] = part;
        sm.lse[r] = r < br ? lse[static_cast<size_t>(it.o + i0 + r) * it.NH + it.h] : 0.f;
    }
    __syncthreads();
}

// The elementwise step between the backward's products, for the warp's 16 rows of a score tile
// (rows: keys with keys_are_rows, the dk/dv kernel; else query rows) against the other side's
// kRows: P = exp(s·qkᵀ − lse), P' = P·mask/keep, dP = dP'·mask/keep, dS = P∘(dP − D);
// p gets P' (if p is not null) and ds gets dS·s, both as bf16; zero outside the tiles' rows.
template <bool keys_are_rows>
__device__ void grad_rows(const FlashItem& it, const float* s, const float* dp, const float* D,
                          const float* lse, bf* p, bf* ds, int w0, int i0, int br, int j0, int bc) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
        const int r = w0 + (lane >> 2) + 8 * x;
        for (int c = lane & 3; c < kRows; c += 4) {
            const int i = keys_are_rows ? c : r,
                      j = keys_are_rows ? r : c;  // query row, key of the tile
            float pd = 0.f, g = 0.f;
            if (i < br && j < bc) {
                const float pr = expf(s[r * kSPitch + c] * it.scale - lse[i]);
                float dpr = dp[r * kSPitch + c];
                pd = pr;
                if (it.has_drop) {
                    const bool keep = it.keep(i0 + i, j0 + j);
                    pd = keep ? pr * it.inv_keep : 0.f;
                    dpr = keep ? dpr * it.inv_keep : 0.f;
                }
                g = pr * (dpr - D[i]) *
                    it.scale;  // the scale goes in before the rounding, as on the CPU
            }
            if (p) put(p + r * kPPitch + c, pd);
            put(ds + r * kPPitch + c, g);
        }
    }
}

// dk, dv: a block per key tile (every row of the sequence, so that rows K_b..T_b get zeros), over
// every query tile; warp w owns keys 16w..16w+15 of the tile and computes sᵀ = k·qᵀ and
// dP'ᵀ = v·dctxᵀ for them, then dv += P'ᵀ·dctx and dk += (dS·s)ᵀ·q.
template <int NF>
__global__ void __launch_bounds__(kTcThreads)
    k_tc_backward_kv(float* dk, float* dv, const uint16_t* dctx, const uint16_t* q,
                     const uint16_t* k, const uint16_t* v, const float* ctx, const float* lse,
                     AttnShape s, Philox drop, bool has_drop, float inv_keep, int per_item) {
    using L = TcTiles<NF>;
    unsigned char* smem = flash_smem();
    const FlashItem it(s, drop, has_drop, inv_keep, per_item, kRows);
    const L sm(smem, true);
    const int w0 = 16 * (threadIdx.x >> 5);
    for (int j0 = it.first; j0 < it.t; j0 += it.stride) {
        const int bc = max(0, min(kRows, it.kn - j0));  // key rows in this tile
        Acc gk[NF], gv[NF];
#pragma unroll
        for (int n = 0; n < NF; ++n) {
            wm::fill_fragment(gk[n], 0.f);
            wm::fill_fragment(gv[n], 0.f);
        }
        if (bc >
            0) {  // (the previous key tile's reads of k and v ended before store_rows' barrier)
            load_rows<NF>(sm.k, k, it, j0, bc);
            load_rows<NF>(sm.v, v, it, j0, bc);
            for (int i0 = 0; i0 < it.t; i0 += kRows) {
                const int br = min(kRows, it.t - i0);
                load_queries<NF>(sm, it, q, dctx, ctx, lse, i0, br);
                warp_product<kRows / 16, true>(sm.s + w0 * kSPitch, kSPitch, sm.k + w0 * L::OP,
                                               L::OP, sm.q, L::OP, NF, false);
                warp_product<kRows / 16, true>(sm.dp + w0 * kSPitch, kSPitch, sm.v + w0 * L::OP,
                                               L::OP, sm.o, L::OP, NF, false);
                __syncwarp();
                grad_rows<true>(it, sm.s, sm.dp, sm.D, sm.lse, sm.p, sm.ds, w0, i0, br, j0, bc);
                __syncwarp();
                warp_accumulate<NF>(gv, sm.p + w0 * kPPitch, kPPitch, sm.o, L::OP);
                warp_accumulate<NF>(gk, sm.ds + w0 * kPPitch, kPPitch, sm.q, L::OP);
            }
        }
        // keys beyond K_b (in a tile or a whole one) had zero k and v rows and P = 0: zero
        // gradients
        store_rows<NF>(dk, gk, sm.s, it, j0, w0);
        store_rows<NF>(dv, gv, sm.s, it, j0, w0);
    }
}

// dq: a block per query tile, over every key tile; warp w owns query rows 16w..16w+15 and computes
// s = q·kᵀ and dP' = dctx·vᵀ for them, then dq += (dS·s)·k.
template <int NF>
__global__ void __launch_bounds__(kTcThreads)
    k_tc_backward_q(float* dq, const uint16_t* dctx, const uint16_t* q, const uint16_t* k,
                    const uint16_t* v, const float* ctx, const float* lse, AttnShape s, Philox drop,
                    bool has_drop, float inv_keep, int per_item) {
    using L = TcTiles<NF>;
    unsigned char* smem = flash_smem();
    const FlashItem it(s, drop, has_drop, inv_keep, per_item, kRows);
    const L sm(smem, true);
    const int w0 = 16 * (threadIdx.x >> 5);
    for (int i0 = it.first; i0 < it.t; i0 += it.stride) {
        const int br = min(kRows, it.t - i0);
        Acc gq[NF];
#pragma unroll
        for (int n = 0; n < NF; ++n) wm::fill_fragment(gq[n], 0.f);
        load_queries<NF>(sm, it, q, dctx, ctx, lse, i0, br);
        for (int j0 = 0; j0 < it.kn; j0 += kRows) {
            const int bc = min(kRows, it.kn - j0);
            __syncthreads();  // the previous key tile's readers are done
            load_rows<NF>(sm.k, k, it, j0, bc);
            load_rows<NF>(sm.v, v, it, j0, bc);
            __syncthreads();
            warp_product<kRows / 16, true>(sm.s + w0 * kSPitch, kSPitch, sm.q + w0 * L::OP, L::OP,
                                           sm.k, L::OP, NF, false);
            warp_product<kRows / 16, true>(sm.dp + w0 * kSPitch, kSPitch, sm.o + w0 * L::OP, L::OP,
                                           sm.v, L::OP, NF, false);
            __syncwarp();
            grad_rows<false>(it, sm.s, sm.dp, sm.D, sm.lse, nullptr, sm.ds, w0, i0, br, j0, bc);
            __syncwarp();
            warp_accumulate<NF>(gq, sm.ds + w0 * kPPitch, kPPitch, sm.k, L::OP);
        }
        store_rows<NF>(dq, gq, sm.s, it, i0, w0);
    }
}

// The kernel instance for the head size: NF 16-channel fragments, 2, 4 or 8 (kFlashMaxHeadSize).
template <template <int> class K, typename... Args>
void dispatch_tc(cudaStream_t st, const AttnShape& s, Args... args) {
    if (s.HS <= 32)
        launch_flash(K<2>::fn, kTcThreads, TcTiles<2>::bytes(K<2>::backward), st, s, args...);
    else if (s.HS <= 64)
        launch_flash(K<4>::fn, kTcThreads, TcTiles<4>::bytes(K<4>::backward), st, s, args...);
    else
        launch_flash(K<8>::fn, kTcThreads, TcTiles<8>::bytes(K<8>::backward), st, s, args...);
}
template <int NF>
struct TcForward {
    static constexpr auto fn = k_tc_forward<NF>;
    static constexpr bool backward = false;
};
template <int NF>
struct TcBackwardKV {
    static constexpr auto fn = k_tc_backward_kv<NF>;
    static constexpr bool backward = true;
};
template <int NF>
struct TcBackwardQ {
    static constexpr auto fn = k_tc_backward_q<NF>;
    static constexpr bool backward = true;
};

}  // namespace

void flash_attention_forward_tc(cudaStream_t st, float* ctx, float* lse, const uint16_t* q,
                                const uint16_t* k, const uint16_t* v, AttnShape s,
                                const Philox* drop, float keep_prob) {
    if (s.B <= 0 || s.NH <= 0 || s.HS <= 0 || s.HS > kFlashMaxHeadSize) return;
    const Philox ph = drop ? *drop : Philox{0, 0, 0, 0};
    dispatch_tc<TcForward>(st, s, ctx, lse, q, k, v, s, ph, drop != nullptr,
                           drop ? 1.f / keep_prob : 1.f);
}

void flash_attention_backward_tc(cudaStream_t st, float* dq, float* dk, float* dv,
                                 const uint16_t* dctx, const uint16_t* q, const uint16_t* k,
                                 const uint16_t* v, const float* ctx, const float* lse, AttnShape s,
                                 const Philox* drop, float keep_prob) {
    if (s.B <= 0 || s.NH <= 0 || s.HS <= 0 || s.HS > kFlashMaxHeadSize) return;
    const Philox ph = drop ? *drop : Philox{0, 0, 0, 0};
    const float inv_keep = drop ? 1.f / keep_prob : 1.f;
    dispatch_tc<TcBackwardKV>(st, s, dk, dv, dctx, q, k, v, ctx, lse, s, ph, drop != nullptr,
                              inv_keep);
    dispatch_tc<TcBackwardQ>(st, s, dq, dctx, q, k, v, ctx, lse, s, ph, drop != nullptr, inv_keep);
}

}  // namespace bertbench::backend::cuda
