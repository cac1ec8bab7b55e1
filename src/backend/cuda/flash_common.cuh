// What the two fused-attention kernel files share (flash_kernels.cu: fp32 on the CUDA cores;
// flash_tc.cu: bf16 on the tensor cores): a block's (sequence, head) item and dropout stream, the
// 4-lane row reductions, the shared memory, and the launch on about 8 blocks per multiprocessor.
// With BB_CUDA_EMULATION the two files compile as C++ against tests/cuda_emu/'s host emulation of
// CUDA (a block's threads as fibers), which runs them in CI without a GPU (docs/gpu.md).
#pragma once

#include <algorithm>
#include <cmath>

#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.cuh"

namespace bertbench::backend::cuda::detail {

// The block's dynamic shared memory (128-byte aligned, as the wmma tiles want it).
__device__ __forceinline__ unsigned char* flash_smem() {
#ifdef BB_CUDA_EMULATION
    return emu_shared_memory();
#else
    extern __shared__ __align__(128) unsigned char bb_flash_smem[];
    return bb_flash_smem;
#endif
}

// Max and sum over the 4 lanes of a quad (lanes 4k..4k+3).
__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// What every block knows: its (sequence, head) — block x of the `per_item` blocks of item (b, h)
// walks the tiles of `tile` rows at first, first + stride, ... — and the dropout stream.
struct FlashItem {
    int b, h, o, t, kn, H, HS, NH, first, stride;
    size_t col, base;  // the head's first column; the dropout element of (row 0, key 0)
    float scale, inv_keep;
    bool has_drop;
    Philox drop;
    __device__ FlashItem(const AttnShape& s, const Philox& ph, bool dropout, float keep_inv,
                         int per_item, int tile)
        : inv_keep(keep_inv), has_drop(dropout), drop(ph) {
        const int item = static_cast<int>(blockIdx.x / per_item);
        b = item / s.NH, h = item % s.NH, NH = s.NH, HS = s.HS, H = NH * HS;
        o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.key_lengths ? s.key_lengths[b] : t;
        first = static_cast<int>(blockIdx.x % per_item) * tile, stride = per_item * tile;
        col = static_cast<size_t>(h) * HS;
        base = dropout ? s.prob_offsets[b] + static_cast<size_t>(h) * t * kn : 0;
        scale = 1.f / sqrtf(static_cast<float>(HS));
    }
    // Element (row i of the sequence, key j) of the dropout stream kept?
    __device__ bool keep(int i, int j) const {
        return keep_element(drop, base + static_cast<size_t>(i) * kn + j);
    }
    // Row i of the sequence, the head's first channel, in an (N, H) buffer.
    __device__ size_t at(int i) const { return static_cast<size_t>(o + i) * H + col; }
};

// One step of a row's online softmax in the forward, the row's keys spread over the 4 lanes of a
// quad: sv holds the lane's scaled scores (keys j0 + c4 + 4c of the tile; -inf beyond its bc keys).
// Updates the row's running max m and sum l (of the probabilities before dropout: 1/keep goes into
// 1/l), hands each p = exp(s − m) to put(j, p) (0 where dropout drops element (i0 + r, j0 + j);
// r < br: a row of the sequence) and returns exp(m_old − m_new), which rescales the row's ctx (0 on
// the first tile, where m is -inf; m_new is finite: key j0 is in the tile).
template <int N, typename Put>
__device__ __forceinline__ float online_softmax_step(const float (&sv)[N], float& m, float& l, const FlashItem& it,
                                                     int r, int br, int i0, int j0, int bc, int c4, Put put) {
    float mx = -INFINITY;
#pragma unroll
    for (int c = 0; c < N; ++c) mx = fmaxf(mx, sv[c]);
    const float mnew = fmaxf(m, quad_max(mx));
    const float alpha = expf(m - mnew);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < N; ++c) {
        const int j = c4 + 4 * c;
        float p = j < bc ? expf(sv[c] - mnew) : 0.f;
        sum += p;
        if (it.has_drop && p != 0.f && r < br && !it.keep(i0 + r, j0 + j)) p = 0.f;
        put(j, p);
    }
    l = l * alpha + quad_sum(sum);
    m = mnew;
    return alpha;
}

inline int multiprocessors() {
    static const int n = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            return 1;
        return v > 0 ? v : 1;
    }();
    return n;
}

// Launches `kernel` on per_item × B·NH blocks of `threads` (about 8 blocks per multiprocessor: the
// host does not know the sequence lengths, so each block walks its item's tiles with a stride) with
// `smem` bytes of shared memory; per_item goes in as the kernel's last argument.
template <typename... Params, typename... Args>
void launch_flash(void (*kernel)(Params...), int threads, size_t smem, cudaStream_t st,
                  const AttnShape& s, Args... args) {
    const long long items = static_cast<long long>(s.B) * s.NH;
    const int per_item = static_cast<int>(
        std::clamp<long long>((8LL * multiprocessors() + items - 1) / items, 1, 64));
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)) != cudaSuccess) {
        after_launch();
        return;
    }
    launch_kernel(kernel, static_cast<unsigned>(items * per_item), static_cast<unsigned>(threads), smem, st, args...,
                  per_item);
    after_launch();
}

}  // namespace bertbench::backend::cuda::detail
