// Helpers the CUDA backend's kernel files share (kernels.cu, model_kernels.cu): the launch error
// record, the launch shape, bf16 rounding and the block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace bertbench::backend::cuda::detail {

inline thread_local cudaError_t g_last = cudaSuccess;

inline void after_launch() {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess && g_last == cudaSuccess) g_last = e;
}

constexpr int kThreads = 256;

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
