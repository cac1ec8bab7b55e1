// Helpers the CUDA backend's kernel files share (kernels.cu, model_kernels.cu, flash_kernels.cu): the
// launch error record, the launch shape, bf16 rounding and widening, the dropout stream's bits and
// the block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels.cuh"

namespace bertbench::backend::cuda::detail {

inline thread_local cudaError_t g_last = cudaSuccess;

inline void after_launch() {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess && g_last == cudaSuccess) g_last = e;
}

constexpr int kThreads = 256;

// kernel<<<grid, block, smem, st>>>(args...) (the caller then calls after_launch()); with
// BB_CUDA_EMULATION the host emulation's launch (tests/cuda_emu/shim/cuda_runtime.h), which queues
// the kernel on the emulated stream.
template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), unsigned grid, unsigned block, size_t smem, cudaStream_t st,
                   Args... args) {
#ifdef BB_CUDA_EMULATION
    emu_launch(kernel, grid, static_cast<int>(block), smem, st, static_cast<Params>(args)...);
#else
    // clang-format off
    kernel<<<grid, block, smem, st>>>(args...);
    // clang-format on
#endif
}

inline unsigned grid_for(size_t n) {
    const size_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65536 ? (b ? b : 1) : 65536);
}

// Round to nearest even; NaN stays NaN (quiet): ops::to_bf16's bits.
__device__ __forceinline__ uint16_t bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

// An attention input as fp32: itself, or the bf16 bits widened (exact).
__device__ __forceinline__ float val(float x) { return x; }
__device__ __forceinline__ float val(uint16_t x) { return __uint_as_float(static_cast<uint32_t>(x) << 16); }

// Philox-4x32-10, core/philox.hpp's counter and key layout.
__device__ inline uint4 philox_block(uint64_t seed, uint64_t step, uint32_t site, uint64_t blk) {
    uint32_t c0 = static_cast<uint32_t>(blk), c1 = static_cast<uint32_t>(blk >> 32), c2 = site,
             c3 = static_cast<uint32_t>(step);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(step >> 32);
    for (int round = 0; round < 10; ++round) {
        const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}

// Whether element e of the dropout stream s is kept: word e % 4 of Philox block e / 4 (ops/dropout.hpp).
__device__ __forceinline__ bool keep_element(const Philox& s, size_t e) {
    const uint4 w = philox_block(s.seed, s.step, s.site, e / 4);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    return (words[e % 4] >> 8) < s.threshold;
}

// The sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ inline float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();  // sh is free (a previous call's readers are done)
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

__device__ inline float block_max(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

}  // namespace bertbench::backend::cuda::detail
