// The host emulation's runtime (cuda_runtime.h): the block scheduler on fibers, the runtime API on
// host memory, and cuBLAS's GEMMs. x86-64 only (the fibers switch stacks in assembly).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cublasLt.h"
#include "cuda_runtime.h"

// ---- fibers -------------------------------------------------------------------------------------
// bb_emu_switch(save, load): saves the callee-saved registers, MXCSR and the x87 control word on
// the current stack, stores its pointer in *save, and continues on the stack `load` as saved there.
extern "C" void bb_emu_switch(void** save, void* load);
asm(R"(
    .text
    .globl bb_emu_switch
    .type bb_emu_switch, @function
bb_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size bb_emu_switch, .-bb_emu_switch
)");

namespace {

constexpr size_t kStack = size_t(256) << 10;  // per thread of a block

enum class Wait { none, block, warp, done };

struct Scheduler {
    unsigned threads = 0;
    std::vector<std::unique_ptr<unsigned char[]>> stacks;
    std::vector<void*> sp;     // each fiber's saved stack pointer
    std::vector<Wait> wait;    // what each fiber waits for
    std::vector<float> slots;  // the shuffles' exchange, 32 per warp
    void* main_sp = nullptr;
    unsigned current = 0;
    void (*body)(void*) = nullptr;
    void* ctx = nullptr;
    unsigned char* smem = nullptr;
};
thread_local Scheduler g_s;

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "cuda emulation: %s (block %u, thread %u)\n", what, blockIdx.x, threadIdx.x);
    std::abort();
}

// A fiber's first code: the kernel, then back to the scheduler for good.
[[noreturn]] void fiber_main() {
    g_s.body(g_s.ctx);
    g_s.wait[g_s.current] = Wait::done;
    bb_emu_switch(&g_s.sp[g_s.current], g_s.main_sp);
    fail("a finished thread was resumed");
}

#if defined(__SANITIZE_ADDRESS__)
}  // namespace
#include <sanitizer/asan_interface.h>
namespace {
#endif

// A fresh fiber on stack t: bb_emu_switch's frame (MXCSR 0x1f80, x87 control word 0x37f, six
// registers) below fiber_main's address as the return address, the stack 16-byte aligned at entry.
void* fresh_stack(unsigned char* base) {
#if defined(__SANITIZE_ADDRESS__)
    // the last block's frames never returned: their poisoned redzones would trip the new fiber
    __asan_unpoison_memory_region(base, kStack);
#endif
    auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(base + kStack) & ~uintptr_t(15));
    *--top = 0;  // fiber_main's (absent) return address: rsp % 16 == 8 at its entry
    *--top = reinterpret_cast<uint64_t>(&fiber_main);
    for (int r = 0; r < 6; ++r) *--top = 0;
    *--top = 0x1f80ull | (0x37full << 32);
    return top;
}

void block_until(Wait w) {
    g_s.wait[g_s.current] = w;
    bb_emu_switch(&g_s.sp[g_s.current], g_s.main_sp);
}

// Runs one block: every runnable fiber up to its next barrier, in ascending then descending order
// of thread number by turns; a barrier opens when all its threads wait at it.
void run_block() {
    const unsigned n = g_s.threads, warps = (n + 31) / 32;
    for (unsigned t = 0; t < n; ++t) g_s.sp[t] = fresh_stack(g_s.stacks[t].get()), g_s.wait[t] = Wait::none;
    for (bool up = true;; up = !up) {
        for (unsigned i = 0; i < n; ++i) {
            const unsigned t = up ? i : n - 1 - i;
            if (g_s.wait[t] != Wait::none) continue;
            g_s.current = t;
            threadIdx.x = t;
            bb_emu_switch(&g_s.main_sp, g_s.sp[t]);
        }
        unsigned done = 0, at_block = 0;
        for (unsigned t = 0; t < n; ++t) done += g_s.wait[t] == Wait::done, at_block += g_s.wait[t] == Wait::block;
        if (done == n) return;
        bool opened = false;
        if (at_block == n) {
            for (unsigned t = 0; t < n; ++t) g_s.wait[t] = Wait::none;
            opened = true;
        }
        for (unsigned w = 0; w < warps && !opened; ++w) {
            const unsigned first = 32 * w, last = std::min(n, first + 32);
            bool all = true;
            for (unsigned t = first; t < last; ++t) all = all && g_s.wait[t] == Wait::warp;
            if (!all) continue;
            for (unsigned t = first; t < last; ++t) g_s.wait[t] = Wait::none;
            opened = true;
        }
        if (!opened) fail("deadlock: threads wait at barriers that not all of their threads reach");
    }
}

}  // namespace

void __syncthreads() { block_until(Wait::block); }
void __syncwarp(unsigned) { block_until(Wait::warp); }
float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    float* slot = g_s.slots.data() + (threadIdx.x & ~31u);
    const unsigned lane = threadIdx.x & 31;
    slot[lane] = v;
    __syncwarp();
    const float r = slot[lane ^ static_cast<unsigned>(lane_mask)];
    __syncwarp();
    return r;
}
unsigned char* emu_shared_memory() { return g_s.smem; }

void emu_run(unsigned grid, unsigned block, size_t smem, void (*body)(void*), void* ctx) {
    if (block == 0 || block > 1024 || block % 32 != 0) fail("a block of threads that is not 32..1024 warps");
    if (g_s.body) fail("a launch from inside a kernel");
    while (g_s.stacks.size() < block) g_s.stacks.push_back(std::make_unique<unsigned char[]>(kStack));
    g_s.threads = block;
    g_s.sp.assign(block, nullptr);
    g_s.wait.assign(block, Wait::none);
    g_s.slots.assign(block, 0.f);
    const size_t bytes = (smem + 127) / 128 * 128;
    std::unique_ptr<unsigned char, decltype(&std::free)> mem(
        static_cast<unsigned char*>(std::aligned_alloc(128, bytes ? bytes : 128)), &std::free);
    g_s.smem = mem.get();
    g_s.body = body, g_s.ctx = ctx;
    blockDim.x = block, gridDim.x = grid;
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        std::memset(g_s.smem, 0x7f, smem);
        run_block();
    }
    g_s.body = nullptr;
    g_s.smem = nullptr;
}

// ---- the runtime API ----------------------------------------------------------------------------
struct EmuStream {};
struct EmuEvent {
    std::chrono::steady_clock::time_point at;
};

cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaGetDeviceCount(int* n) { return *n = 1, cudaSuccess; }
cudaError_t cudaGetDevice(int* d) { return *d = 0, cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
    std::snprintf(p->name, sizeof p->name, "emulated GPU (tests/cuda_emu)");
    p->major = 9, p->minor = 0, p->multiProcessorCount = kEmuMultiprocessors;
    p->totalGlobalMem = size_t(8) << 30;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { return *v = kEmuMultiprocessors, cudaSuccess; }
cudaError_t cudaDriverGetVersion(int* v) { return *v = 13000, cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* v) { return *v = 13000, cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t bytes) {
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) { return std::free(p), cudaSuccess; }
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    *free_bytes = *total_bytes = size_t(8) << 30;
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t) {
    if (bytes) std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int v, size_t bytes, cudaStream_t) {
    if (bytes) std::memset(dst, v, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned) { return *st = new EmuStream, cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t st) { return delete st, cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) { return *e = new EmuEvent, cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return delete e, cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    e->at = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t from, cudaEvent_t to) {
    *ms = std::chrono::duration<float, std::milli>(to->at - from->at).count();
    return cudaSuccess;
}
cudaError_t emu_check_shared_memory(int bytes) {
    if (bytes > kEmuMaxSharedMemory) {
        std::fprintf(stderr, "cuda emulation: %d bytes of shared memory asked, the GPU has %d\n", bytes,
                     kEmuMaxSharedMemory);
        std::abort();
    }
    return cudaSuccess;
}

// ---- cuBLAS -------------------------------------------------------------------------------------
namespace {

float load(const void* p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
    const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
void store(void* p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F) {
        static_cast<float*>(p)[i] = v;
        return;
    }
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = (u >> 16) | 0x40u;
    else
        u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(u);
}

// Column-major D(m,n) = alpha·op(A)·op(B) + beta·C (+ bias(m) on every column); op(A) is m×k.
struct Operand {
    const void* p;
    cudaDataType_t type;
    int64_t ld;
    bool trans;
    float at(int64_t r, int64_t c) const {  // element (r, c) of op(X)
        return trans ? load(p, type, static_cast<size_t>(r * ld + c)) : load(p, type, static_cast<size_t>(c * ld + r));
    }
};
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b, float beta, const void* C,
          cudaDataType_t tc, int64_t ldc, void* D, cudaDataType_t td, int64_t ldd, const float* bias) {
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
            float s = 0.f;
            for (int64_t p = 0; p < k; ++p) s += a.at(i, p) * b.at(p, j);
            float v = alpha * s;
            if (beta != 0.f) v += beta * load(C, tc, static_cast<size_t>(j * ldc + i));
            if (bias) v += bias[i];
            store(D, td, static_cast<size_t>(j * ldd + i), v);
        }
}

}  // namespace

// cuBLAS's handles and descriptors live as long as the process (the backend caches its plans and
// never destroys them, as on the GPU): kept where the leak checker sees them reachable.
template <typename T, typename... A>
T* keep(A... a) {
    static auto* all = new std::vector<std::unique_ptr<T>>;
    return all->emplace_back(std::make_unique<T>(T{a...})).get();
}

struct EmuBlas {};
struct EmuLt {};
struct EmuMatmulDesc {
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const float* bias = nullptr;
};
struct EmuLayout {
    cudaDataType_t type;
    int64_t rows, cols, ld;
};
struct EmuPreference {};

cublasStatus_t cublasCreate(cublasHandle_t* h) { return *h = keep<EmuBlas>(), CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t ta, int lda, const void* B,
                            cudaDataType_t tb, int ldb, const void* beta, void* C, cudaDataType_t tc, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t) {
    gemm(m, n, k, *static_cast<const float*>(alpha), Operand{A, ta, lda, opa == CUBLAS_OP_T},
         Operand{B, tb, ldb, opb == CUBLAS_OP_T}, *static_cast<const float*>(beta), C, tc, ldc, C, tc, ldc, nullptr);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { return *h = keep<EmuLt>(), CUBLAS_STATUS_SUCCESS; }
size_t cublasLtGetVersion() { return 130000; }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t, cudaDataType_t) {
    return *d = keep<EmuMatmulDesc>(), CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* v,
                                              size_t bytes) {
    switch (a) {
        case CUBLASLT_MATMUL_DESC_TRANSA: std::memcpy(&d->ta, v, sizeof d->ta); break;
        case CUBLASLT_MATMUL_DESC_TRANSB: std::memcpy(&d->tb, v, sizeof d->tb); break;
        case CUBLASLT_MATMUL_DESC_EPILOGUE: std::memcpy(&d->epilogue, v, sizeof d->epilogue); break;
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: std::memcpy(&d->bias, v, sizeof d->bias); break;
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: {
            cudaDataType_t t;
            std::memcpy(&t, v, sizeof t);
            if (t != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
            break;
        }
        default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    (void)bytes;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType_t type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (ld < static_cast<int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;
    *l = keep<EmuLayout>(type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), ld);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    return *p = new EmuPreference, CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                                    const void*, size_t) {
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    return delete p, CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                              cublasLtMatmulPreference_t, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* returned) {
    if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    results[0] = cublasLtMatmulHeuristicResult_t{};
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb, const void* beta,
                              const void* C, cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) {
    const bool ta = d->ta == CUBLAS_OP_T, tb = d->tb == CUBLAS_OP_T;
    const int64_t m = ta ? la->cols : la->rows, k = ta ? la->rows : la->cols, n = tb ? lb->rows : lb->cols;
    if ((tb ? lb->cols : lb->rows) != k || ld->rows != m || ld->cols != n || lc->rows != m || lc->cols != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    const bool bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS;
    if (bias && !d->bias) return CUBLAS_STATUS_INVALID_VALUE;
    gemm(m, n, k, *static_cast<const float*>(alpha), Operand{A, la->type, la->ld, ta},
         Operand{B, lb->type, lb->ld, tb}, *static_cast<const float*>(beta), C, lc->type, lc->ld, D, ld->type, ld->ld,
         bias ? d->bias : nullptr);
    return CUBLAS_STATUS_SUCCESS;
}
