// Host emulation of the part of the CUDA runtime and language that the fused-attention kernels
// use (src/backend/cuda/flash_common.cuh, BB_CUDA_EMULATION): a launch runs the grid's blocks one
// after another, each block's threads as host threads of their own, with __syncthreads a barrier
// of the block, __syncwarp and the shuffles barriers of the warp, and the block's shared memory a
// heap buffer of exactly the launch's size (so that AddressSanitizer sees a kernel overrun it),
// filled with garbage (0x7f bytes: large floats) before each block. What a GPU does faster, or
// in another order within the rules, is not modelled; a missing barrier shows only when the host
// threads happen to race, which the tests make likely by storing wmma tiles from lane 0 alone.
#pragma once

#include <math.h>

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim;
struct uint4 {
    uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
    return {x, y, z, w};
}

using cudaError_t = int;
using cudaStream_t = void*;
constexpr cudaError_t cudaSuccess = 0;
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
inline cudaError_t cudaGetLastError() {
    return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
    *d = 0;
    return cudaSuccess;
}
// One multiprocessor: the launches give each (sequence, head) ceil(8 / items) blocks, so that with
// the tests' 6 items a block walks several tiles of a long sequence (flash_common.cuh's stride).
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) {
    *v = 1;
    return cudaSuccess;
}
constexpr int kEmuMaxSharedMemory = 227 * 1024;  // an H100's per-block limit
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int bytes) {
    if (bytes > kEmuMaxSharedMemory) {
        std::fprintf(stderr, "cuda emulation: %d bytes of shared memory asked, the GPU has %d\n",
                     bytes, kEmuMaxSharedMemory);
        std::abort();
    }
    return cudaSuccess;
}

using std::max;
using std::min;
inline float __uint_as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline uint32_t __umulhi(uint32_t a, uint32_t b) {
    return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
}

// The running block: its barriers, the warps' shuffle slots and its shared memory.
struct EmuBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<float> slots;  // 32 per warp
    unsigned char* smem = nullptr;
};
inline EmuBlock* g_emu_block = nullptr;

inline void __syncthreads() {
    g_emu_block->block->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
    g_emu_block->warps[threadIdx.x >> 5]->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    float* slot = g_emu_block->slots.data() + (threadIdx.x & ~31u);
    const unsigned lane = threadIdx.x & 31;
    slot[lane] = v;
    __syncwarp();
    const float r = slot[lane ^ static_cast<unsigned>(lane_mask)];
    __syncwarp();
    return r;
}
inline unsigned char* emu_shared_memory() {
    return g_emu_block->smem;
}

// kernel<<<grid, threads, smem>>>(args...), synchronously.
template <typename Kernel, typename... Args>
void emu_launch(Kernel kernel, unsigned grid, int threads, size_t smem, Args... args) {
    EmuBlock eb;
    eb.block = std::make_unique<std::barrier<>>(threads);
    for (int w = 0; w < threads / 32; ++w) eb.warps.push_back(std::make_unique<std::barrier<>>(32));
    eb.slots.assign(static_cast<size_t>(threads), 0.f);
    const size_t bytes = (smem + 127) / 128 * 128;
    std::unique_ptr<unsigned char, decltype(&std::free)> mem(
        static_cast<unsigned char*>(std::aligned_alloc(128, bytes ? bytes : 128)), &std::free);
    eb.smem = mem.get();
    g_emu_block = &eb;
    blockDim.x = static_cast<unsigned>(threads);
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t)
        team.emplace_back([&, t] {
            threadIdx.x = static_cast<unsigned>(t);
            for (unsigned b = 0; b < grid; ++b) {
                blockIdx.x = b;
                if (t == 0) std::memset(eb.smem, 0x7f, smem);
                __syncthreads();
                kernel(args...);
                __syncthreads();
            }
        });
    for (std::thread& th : team) th.join();
    g_emu_block = nullptr;
}
