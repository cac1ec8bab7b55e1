// Host emulation of the CUDA runtime and language subset that src/backend/cuda uses, for the tests
// in tests/cuda_emu (BB_CUDA_EMULATION; docs/gpu.md "CUDA kernels tested without a GPU"). A launch
// runs the grid's blocks one after another (last to first every other launch); a block's threads
// are fibers on the host thread (emu_runtime.cpp), switched at __syncthreads, __syncwarp and the
// shuffles, which are barriers of the block or of the warp: the scheduler runs every runnable
// thread up to its next barrier, in an order that alternates between ascending and descending
// thread numbers and with one warp held back each round, so that a value read before a missing
// barrier is usually one not yet written. __shared__ arrays are static (blocks never overlap); the
// dynamic shared memory is a heap buffer of exactly the launch's size, filled with garbage (0x7f
// bytes) before each block. Device memory is host memory, all bits set when allocated, and (outside
// AddressSanitizer's builds) open to the host only while device work runs. Streams are
// queues that run as late as CUDA allows: a launch, a GEMM, a copy to the device or a memset runs
// only when the host waits for its stream (cudaStreamSynchronize, cudaEventSynchronize, a copy to
// the host, cudaFree, cudaStreamDestroy) or when a stream that waits for an event recorded after it
// reaches that wait. So work on another stream that does not wait for it reads what was there
// before, and a missing cudaStreamWaitEvent shows as wrong values (one order a GPU may run them in)
// rather than passing as it would if streams ran at the call.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __align__(n) alignas(n)
#define __shared__ static

struct dim3 {
    unsigned x = 0, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
struct uint4 {
    uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return {x, y, z, w}; }

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
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return static_cast<uint32_t>((uint64_t{a} * b) >> 32); }
// The rounded operations (the build's -std=c++20 does not contract them into FMAs).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
// Blocks run one at a time and a fiber is never interrupted: a plain update is atomic.
inline int atomicOr(int* p, int v) {
    const int old = *p;
    *p = old | v;
    return old;
}

// The scheduler (emu_runtime.cpp).
void __syncthreads();
void __syncwarp(unsigned mask = 0xffffffffu);
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
unsigned char* emu_shared_memory();
// Runs body(ctx) as every thread of every block of the grid, now.
void emu_run(unsigned grid, unsigned block, size_t smem, void (*body)(void*), void* ctx);

// The runtime API (C linkage, as CUDA's: libbb_nccl_emu.so finds the executable's copy).
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600
};
using cudaStream_t = struct EmuStream*;
using cudaEvent_t = struct EmuEvent*;

// Queues op on stream st (null: the default stream), to run when the stream is made to catch up.
void emu_enqueue(cudaStream_t st, std::function<void()> op);

// Aborts naming it where a kernel's pointer argument is not device memory (emu_runtime.cpp).
void emu_check_kernel_pointer(const void* p);

template <typename Kernel, typename... Args>
void emu_launch(Kernel kernel, unsigned grid, int block, size_t smem, cudaStream_t st, Args... args) {
    ([&] {
        if constexpr (std::is_pointer_v<Args>) emu_check_kernel_pointer(static_cast<const void*>(args));
    }(), ...);
    using Call = std::tuple<Kernel, Args...>;
    auto call = std::make_shared<Call>(kernel, args...);  // the arguments as at the launch
    emu_enqueue(st, [call, grid, block, smem] {
        emu_run(grid, static_cast<unsigned>(block), smem,
                [](void* c) { std::apply([](Kernel k, Args... a) { k(a...); }, *static_cast<Call*>(c)); }, call.get());
    });
}

enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
constexpr unsigned cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2;
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount;
    size_t totalGlobalMem;
};
constexpr int kEmuMultiprocessors = 1;  // a long sequence's tiles then share a block
constexpr int kEmuMaxSharedMemory = 227 * 1024;  // an H100's per-block limit

extern "C" {
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d);
cudaError_t cudaDriverGetVersion(int* v);
cudaError_t cudaRuntimeGetVersion(int* v);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t st);
cudaError_t cudaFreeAsync(void* p, cudaStream_t st);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemsetAsync(void* dst, int v, size_t bytes, cudaStream_t st);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t from, cudaEvent_t to);
}  // extern "C"
cudaError_t emu_check_shared_memory(int bytes);
template <typename F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int bytes) {
    return emu_check_shared_memory(bytes);
}
