// The host emulation's runtime (cuda_runtime.h): the block scheduler on fibers, the runtime API on
// host memory, and cuBLAS's GEMMs. x86-64 only (the fibers switch stacks in assembly).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cblas.h>

#include "cublasLt.h"
#include "cuda_runtime.h"
#include "ops/bf16.hpp"

// ---- fibers -------------------------------------------------------------------------------------
// bb_emu_switch(save, load): saves the callee-saved registers on the current stack, stores its
// pointer in *save, and continues on the stack `load` as saved there. MXCSR and the x87 control
// word are left alone: no kernel changes them.
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
    movq %rsp, (%rdi)
    movq %rsi, %rsp
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
// Each fiber's stack starts at a different offset into its allocation (a different cache line
// modulo 64 KiB): stacks a power of two apart put every fiber's top frames into the same cache
// sets, and each switch then missed the L1 and L2 caches (the emulated kernels ran 2x slower).
constexpr size_t kStagger = size_t(64) << 10;

enum class Wait { none, block, warp, done };

struct Scheduler {
    unsigned threads = 0;
    std::vector<std::unique_ptr<unsigned char[]>> stacks;
    std::vector<void*> sp;            // each fiber's saved stack pointer
    std::vector<Wait> wait;           // what each fiber waits for
    std::vector<unsigned> at_warp;    // per warp: lanes waiting at its barrier or done
    std::vector<unsigned char> phase; // per thread: which half of its warp's slots it shuffles in
    std::vector<float> slots;         // the shuffles' exchange: 2 × 32 per warp
    unsigned at_block = 0, done = 0;  // threads waiting at the block's barrier; threads finished
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

unsigned lanes(unsigned warp) { return std::min(32u, g_s.threads - 32 * warp); }

// Opens the barriers every thread has reached (a finished thread counts as arrived).
void open_barriers(unsigned warp) {
    if (g_s.at_block + g_s.done == g_s.threads && g_s.at_block > 0) {
        for (Wait& w : g_s.wait)
            if (w == Wait::block) w = Wait::none;
        g_s.at_block = 0;
    }
    if (g_s.at_warp[warp] == lanes(warp)) {
        unsigned waiting = 0;
        for (unsigned t = 32 * warp; t < 32 * warp + lanes(warp); ++t)
            if (g_s.wait[t] == Wait::warp) g_s.wait[t] = Wait::none, ++waiting;
        g_s.at_warp[warp] -= waiting;  // the finished lanes stay counted
    }
}

// A fiber's first code: the kernel, then back to the scheduler for good.
[[noreturn]] void fiber_main() {
    g_s.body(g_s.ctx);
    const unsigned t = g_s.current;
    g_s.wait[t] = Wait::done;
    ++g_s.done;
    ++g_s.at_warp[t / 32];
    open_barriers(t / 32);
    bb_emu_switch(&g_s.sp[t], g_s.main_sp);
    fail("a finished thread was resumed");
}

#if defined(__SANITIZE_ADDRESS__)
}  // namespace
#include <sanitizer/asan_interface.h>
namespace {
#endif

// A fresh fiber on stack t: bb_emu_switch's frame (six registers) below fiber_main's address as
// the return address, the stack 16-byte aligned at fiber_main's entry.
void* fresh_stack(unsigned char* base, unsigned t) {
    const size_t stagger = (t * 11u) % (kStagger / 64) * 64;  // 11 is odd: every line once
    unsigned char* start = base + kStack + kStagger - stagger;
#if defined(__SANITIZE_ADDRESS__)
    // The last block's fiber_main frames never returned: their redzones would trip the new fiber.
    // The kernels' own frames below them did return (every fiber of a block finishes), so only the
    // top of the stack needs it (all of it took half of make test-asan's emulated tests' time).
    __asan_unpoison_memory_region(start - 4096, 4096);
#endif
    auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(start) & ~uintptr_t(15));
    *--top = 0;  // fiber_main's (absent) return address: rsp % 16 == 8 at its entry
    *--top = reinterpret_cast<uint64_t>(&fiber_main);
    for (int r = 0; r < 6; ++r) *--top = 0;
    return top;
}

// The running thread waits at a barrier: back to the scheduler, which resumes it once open.
void block_until(Wait w) {
    const unsigned t = g_s.current;
    g_s.wait[t] = w;
    if (w == Wait::block)
        ++g_s.at_block;
    else
        ++g_s.at_warp[t / 32];
    open_barriers(t / 32);
    bb_emu_switch(&g_s.sp[t], g_s.main_sp);
}

// Runs one block in rounds: each round runs every runnable fiber up to its next barrier, in
// ascending then descending order of thread number by turns, but for one warp left out (a
// different one each pair of rounds), so that warps drift apart between block barriers and a read
// that a missing block barrier leaves early meets a value not yet written.
void run_block() {
    const unsigned n = g_s.threads, warps = (n + 31) / 32;
    for (unsigned t = 0; t < n; ++t) g_s.sp[t] = fresh_stack(g_s.stacks[t].get(), t);
    g_s.wait.assign(n, Wait::none);
    g_s.at_warp.assign(warps, 0);
    g_s.phase.assign(n, 0);
    g_s.at_block = g_s.done = 0;
    for (unsigned round = 0; g_s.done < n; ++round) {
        const bool up = round % 2 == 0;
        const unsigned lagging = warps > 1 ? (round / 2) % warps : warps;
        bool runnable = false;
        for (unsigned i = 0; i < n; ++i) {
            const unsigned t = up ? i : n - 1 - i;
            if (g_s.wait[t] != Wait::none) continue;
            runnable = true;
            if (t / 32 == lagging) continue;
            g_s.current = t;
            threadIdx.x = t;
            bb_emu_switch(&g_s.main_sp, g_s.sp[t]);
        }
        if (!runnable) fail("deadlock: threads wait at barriers that not all of their threads reach");
    }
}

}  // namespace

void __syncthreads() { block_until(Wait::block); }
void __syncwarp(unsigned) { block_until(Wait::warp); }
// Two halves of slots per warp, used by turns: a lane writes a half only after every lane has
// passed the barrier after which they read it the last time.
float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    const unsigned t = threadIdx.x, lane = t & 31;
    float* slot = g_s.slots.data() + 2 * (t & ~31u) + 32 * g_s.phase[t];
    g_s.phase[t] ^= 1;
    slot[lane] = v;
    __syncwarp();
    return slot[lane ^ static_cast<unsigned>(lane_mask)];
}
unsigned char* emu_shared_memory() { return g_s.smem; }

void emu_run(unsigned grid, unsigned block, size_t smem, void (*body)(void*), void* ctx) {
    if (block == 0 || block > 1024 || block % 32 != 0) fail("a block of threads that is not 32..1024 warps");
    if (g_s.body) fail("a launch from inside a kernel");
    while (g_s.stacks.size() < block) g_s.stacks.push_back(std::make_unique<unsigned char[]>(kStack + kStagger));
    g_s.threads = block;
    g_s.sp.assign(block, nullptr);
    g_s.slots.assign(2 * block, 0.f);
    const size_t bytes = (smem + 127) / 128 * 128;
    std::unique_ptr<unsigned char, decltype(&std::free)> mem(
        static_cast<unsigned char*>(std::aligned_alloc(128, bytes ? bytes : 128)), &std::free);
    g_s.smem = mem.get();
    g_s.body = body, g_s.ctx = ctx;
    blockDim.x = block, gridDim.x = grid;
    // Blocks have no order on a GPU: every other launch runs them last to first, so that a block
    // reading what another block of the same launch writes gets a different value by turns.
    static thread_local unsigned launches = 0;
    const bool down = launches++ % 2 == 1;
    for (unsigned i = 0; i < grid; ++i) {
        const unsigned b = down ? grid - 1 - i : i;
        blockIdx.x = b;
        std::memset(g_s.smem, 0x7f, smem);
        run_block();
    }
    g_s.body = nullptr;
    g_s.smem = nullptr;
}

// ---- device memory ------------------------------------------------------------------------------
// Host memory, all bits set when allocated (NaN as float, -1 as an integer, where fresh pages would
// read as zeros). Outside AddressSanitizer's builds each allocation is a mapping of its own,
// readable and writable only while device work runs — a stream catching up, a copy to the host —
// so that the host touching device memory at any other time, an illegal access on a GPU, is a
// SIGSEGV whose handler names it. With AddressSanitizer the allocations are heap blocks instead,
// whose redzones check the kernels' bounds.
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGuarded = false;
#else
constexpr bool kGuarded = true;
#endif
int g_device_work = 0;  // nesting depth of device work under way

std::map<uintptr_t, size_t>& regions() {  // guarded allocations: start -> mapped bytes
    static auto* r = new std::map<uintptr_t, size_t>;
    return *r;
}
void protect_all(int prot) {
    for (const auto& [at, n] : regions()) mprotect(reinterpret_cast<void*>(at), n, prot);
}

// The allocation of m (start -> bytes) that holds [a, a + bytes), or null.
const std::pair<const uintptr_t, size_t>* allocation_of(const std::map<uintptr_t, size_t>& m, uintptr_t a,
                                                         size_t bytes) {
    const auto it = m.upper_bound(a);
    if (it == m.begin()) return nullptr;
    const auto& e = *std::prev(it);
    return a + bytes <= e.first + e.second ? &e : nullptr;
}

void on_segv(int, siginfo_t* info, void*) {
    const auto a = reinterpret_cast<uintptr_t>(info->si_addr);
    if (const auto* e = allocation_of(regions(), a, 1)) {
        char msg[256];
        const int n = std::snprintf(msg, sizeof msg,
                                    "cuda emulation: the host touched device memory (byte %zu of an allocation of %zu) "
                                    "outside device work: an illegal access on a GPU (copy it with cudaMemcpyAsync)\n",
                                    static_cast<size_t>(a - e->first), e->second);
        [[maybe_unused]] const ssize_t w = write(2, msg, static_cast<size_t>(std::clamp(n, 0, int{sizeof msg - 1})));
        std::abort();
    }
    signal(SIGSEGV, SIG_DFL);  // not device memory: the fault repeats, as without this handler
}
// (again at each allocation: MPI_Init installs a handler of its own)
void install_segv_handler() {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
}

// ASan's allocations, start -> bytes (guarded ones are in regions())
std::map<uintptr_t, size_t>& heap_blocks() {
    static auto* r = new std::map<uintptr_t, size_t>;
    return *r;
}

void* device_alloc(size_t bytes) {
    if (!kGuarded) {
        const size_t n = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
        void* p = std::aligned_alloc(256, n);
        if (p) std::memset(p, 0xff, bytes), heap_blocks()[reinterpret_cast<uintptr_t>(p)] = n;
        return p;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t n = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    std::memset(p, 0xff, bytes);
    if (g_device_work == 0) mprotect(p, n, PROT_NONE);
    regions()[reinterpret_cast<uintptr_t>(p)] = n;
    install_segv_handler();
    return p;
}
void device_free(void* p) {
    if (!p) return;
    if (!kGuarded) return heap_blocks().erase(reinterpret_cast<uintptr_t>(p)), std::free(p);
    const auto it = regions().find(reinterpret_cast<uintptr_t>(p));
    if (it == regions().end()) {
        std::fprintf(stderr, "cuda emulation: cudaFree of a pointer cudaMalloc did not return\n");
        std::abort();
    }
    munmap(p, it->second);
    regions().erase(it);
}

// Device work under way: the guarded allocations open for its length.
struct DeviceWork {
    DeviceWork() {
        if (kGuarded && g_device_work++ == 0) protect_all(PROT_READ | PROT_WRITE);
    }
    ~DeviceWork() {
        if (kGuarded && --g_device_work == 0) protect_all(PROT_NONE);
    }
    DeviceWork(const DeviceWork&) = delete;
    DeviceWork& operator=(const DeviceWork&) = delete;
};

// [p, p + bytes) inside one device allocation
bool in_device_memory(const void* p, size_t bytes) {
    return allocation_of(kGuarded ? regions() : heap_blocks(), reinterpret_cast<uintptr_t>(p), bytes) != nullptr;
}

}  // namespace

// A GPU's kernels cannot reach pageable host memory (an illegal address), so a kernel's pointer
// argument must point into device memory (or be null): the emulation, whose device memory is host
// memory, would run such a kernel.
void emu_check_kernel_pointer(const void* p) {
    if (p && !in_device_memory(p, 0)) {
        std::fprintf(stderr, "cuda emulation: a kernel's pointer argument is not device memory (host memory: an "
                             "illegal address on a GPU)\n");
        std::abort();
    }
}

// ---- streams and events ------------------------------------------------------------------------
// A stream is a queue of operations not yet run; it catches up (runs them in order) only when
// something must see their effect. An event records a position in a stream's queue.
struct EmuStream {
    std::deque<std::function<void()>> queue;
    uint64_t queued = 0, done = 0;  // operations ever queued; operations run
    bool running = false;
};
struct EmuEvent {
    EmuStream* stream = nullptr;  // where last recorded; null: never recorded
    uint64_t at = 0;              // complete once stream->done reaches it
    std::shared_ptr<std::chrono::steady_clock::time_point> time;  // set when it completes
};

namespace {

// Every stream ever created, and the default stream: an event may outlive its stream, cudaFree
// waits for all of them.
std::vector<std::unique_ptr<EmuStream>>& all_streams() {
    static auto* s = new std::vector<std::unique_ptr<EmuStream>>(1);
    if (!(*s)[0]) (*s)[0] = std::make_unique<EmuStream>();
    return *s;
}
EmuStream* stream(cudaStream_t st) { return st ? st : all_streams()[0].get(); }

// Runs s's operations until `upto` of them have run.
void catch_up(EmuStream* s, uint64_t upto) {
    if (s->done >= upto) return;
    const DeviceWork work;
    while (s->done < upto) {
        if (s->running) {
            std::fprintf(stderr, "cuda emulation: a stream waits for its own later work (a GPU deadlocks)\n");
            std::abort();
        }
        std::function<void()> op = std::move(s->queue.front());
        s->queue.pop_front();
        s->running = true;
        op();
        s->running = false;
        ++s->done;
    }
}
void catch_up(EmuStream* s) { catch_up(s, s->queued); }

// The host waiting for stream s (cudaStreamSynchronize, cudaEventSynchronize, a copy to the host).
// With BB_CUDA_EMU_STATS=1 the process says at exit how often, and how often that found work still
// queued: each such wait drains a GPU's queue (docs/gpu.md counts a training step's).
struct HostWaits {
    long waits = 0, drains = 0;
    ~HostWaits() {
        if (const char* e = std::getenv("BB_CUDA_EMU_STATS"); e && std::string_view(e) == "1")
            std::fprintf(stderr, "cuda emulation: the host waited for a stream %ld times, %ld of them with work queued\n",
                         waits, drains);
    }
} g_host_waits;
void host_wait(EmuStream* s, uint64_t upto) {
    ++g_host_waits.waits;
    g_host_waits.drains += s->done < upto;
    catch_up(s, upto);
}
void catch_up_all() {
    for (auto& s : all_streams()) catch_up(s.get());
}

}  // namespace

void emu_enqueue(cudaStream_t st, std::function<void()> op) {
    EmuStream* s = stream(st);
    s->queue.push_back(std::move(op));
    ++s->queued;
}

// ---- the runtime API ----------------------------------------------------------------------------
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        default: return "emulated error";
    }
}
const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        default: return "cudaErrorEmulated";
    }
}
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
// Device memory as above: garbage when new, as a GPU's may be; guarded from the host.
cudaError_t cudaMalloc(void** p, size_t bytes) {
    *p = device_alloc(bytes);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
// cudaFree waits for the whole device, as CUDA's does.
cudaError_t cudaFree(void* p) { return catch_up_all(), device_free(p), cudaSuccess; }
cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t st) { return emu_enqueue(st, [p] { device_free(p); }), cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    *free_bytes = *total_bytes = size_t(8) << 30;
    return cudaSuccess;
}
// Pageable host memory, as CUDA treats it: a copy from the host takes the source at the call and
// writes the device when the stream gets there; a copy to the host returns once it is done.
// The device side of a copy must be device memory, else CUDA's cudaErrorInvalidValue.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind k, cudaStream_t st) {
    if (!bytes) return cudaSuccess;
    if (((k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice) && !in_device_memory(src, bytes)) ||
        ((k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice) && !in_device_memory(dst, bytes)))
        return cudaErrorInvalidValue;
    if (k == cudaMemcpyDeviceToHost || k == cudaMemcpyHostToHost) {
        const DeviceWork work;
        host_wait(stream(st), stream(st)->queued);
        std::memmove(dst, src, bytes);
    } else if (k == cudaMemcpyHostToDevice) {
        const auto* from = static_cast<const unsigned char*>(src);
        auto staged = std::make_shared<std::vector<unsigned char>>(from, from + bytes);
        emu_enqueue(st, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    } else {
        emu_enqueue(st, [dst, src, bytes] { std::memmove(dst, src, bytes); });
    }
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int v, size_t bytes, cudaStream_t st) {
    if (bytes && !in_device_memory(dst, bytes)) return cudaErrorInvalidValue;
    if (bytes) emu_enqueue(st, [dst, v, bytes] { std::memset(dst, v, bytes); });
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* st, unsigned) {
    return *st = all_streams().emplace_back(std::make_unique<EmuStream>()).get(), cudaSuccess;
}
// The stream's work is done, as a GPU would finish it; the stream stays for its events.
cudaError_t cudaStreamDestroy(cudaStream_t st) { return catch_up(stream(st)), cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t st) { return host_wait(stream(st), stream(st)->queued), cudaSuccess; }
// st's later work waits for the event as last recorded before this call.
cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned) {
    if (!e->stream) return cudaSuccess;
    EmuStream* const from = e->stream;
    const uint64_t at = e->at;
    emu_enqueue(st, [from, at] { catch_up(from, at); });
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return *e = new EmuEvent, cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return delete e, cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st) {
    auto time = std::make_shared<std::chrono::steady_clock::time_point>();
    emu_enqueue(st, [time] { *time = std::chrono::steady_clock::now(); });
    e->stream = stream(st);
    e->at = e->stream->queued;
    e->time = std::move(time);
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (e->stream) host_wait(e->stream, e->at);
    return cudaSuccess;
}
// As CUDA's: both events recorded, and reached.
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t from, cudaEvent_t to) {
    if (!from->stream || !to->stream) return cudaErrorInvalidResourceHandle;
    if (from->stream->done < from->at || to->stream->done < to->at) return cudaErrorNotReady;
    *ms = std::chrono::duration<float, std::milli>(*to->time - *from->time).count();
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

// Element i of a matrix of type t, widened; stored with ops/bf16.hpp's rounding (the GPU's).
float load(const void* p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
    return bertbench::ops::to_float(static_cast<const bertbench::ops::bf16*>(p)[i]);
}
void store(void* p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F)
        static_cast<float*>(p)[i] = v;
    else
        static_cast<bertbench::ops::bf16*>(p)[i] = bertbench::ops::to_bf16(v);
}

// Column-major D(m,n) = alpha·op(A)·op(B) + beta·C (+ bias(m) on every column); op(A) is m×k.
// The operands widened to fp32 and multiplied by OpenBLAS's sgemm (fp32 accumulation, as the
// GPU's; another summation order).
struct Operand {
    const void* p;
    cudaDataType_t type;
    int64_t ld;
    bool trans;
    int64_t cols(int64_t rows_of_op, int64_t cols_of_op) const { return trans ? rows_of_op : cols_of_op; }
};
std::vector<float> widened(const Operand& x, int64_t stored_cols) {
    std::vector<float> f(static_cast<size_t>(x.ld * stored_cols));
    for (size_t i = 0; i < f.size(); ++i) f[i] = load(x.p, x.type, i);
    return f;
}
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const Operand& a, const Operand& b, float beta, const void* C,
          cudaDataType_t tc, int64_t ldc, void* D, cudaDataType_t td, int64_t ldd, const float* bias) {
    const std::vector<float> fa = widened(a, a.cols(m, k)), fb = widened(b, b.cols(k, n));
    std::vector<float> acc(static_cast<size_t>(m * n), 0.f);
    if (k > 0)
        cblas_sgemm(CblasColMajor, a.trans ? CblasTrans : CblasNoTrans, b.trans ? CblasTrans : CblasNoTrans,
                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, fa.data(),
                    static_cast<int>(a.ld), fb.data(), static_cast<int>(b.ld), 0.f, acc.data(), static_cast<int>(m));
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < m; ++i) {
            float v = acc[static_cast<size_t>(j * m + i)];
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

struct EmuBlas {
    cudaStream_t stream = nullptr;
};
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
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st) { return h->stream = st, CUBLAS_STATUS_SUCCESS; }
// The GEMMs are queued on their stream; alpha and beta are host values, read at the call.
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t opa, cublasOperation_t opb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType_t ta, int lda, const void* B,
                            cudaDataType_t tb, int ldb, const void* beta, void* C, cudaDataType_t tc, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t) {
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    const Operand a{A, ta, lda, opa == CUBLAS_OP_T}, b{B, tb, ldb, opb == CUBLAS_OP_T};
    emu_enqueue(h->stream, [=] { gemm(m, n, k, al, a, b, be, C, tc, ldc, C, tc, ldc, nullptr); });
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
                              const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t st) {
    const bool ta = d->ta == CUBLAS_OP_T, tb = d->tb == CUBLAS_OP_T;
    const int64_t m = ta ? la->cols : la->rows, k = ta ? la->rows : la->cols, n = tb ? lb->rows : lb->cols;
    if ((tb ? lb->cols : lb->rows) != k || ld->rows != m || ld->cols != n || lc->rows != m || lc->cols != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    const bool bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS;
    if (bias && !d->bias) return CUBLAS_STATUS_INVALID_VALUE;
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
    const Operand a{A, la->type, la->ld, ta}, b{B, lb->type, lb->ld, tb};
    const cudaDataType_t tc = lc->type, td = ld->type;
    const int64_t ldc = lc->ld, ldd = ld->ld;
    const float* const bias_p = bias ? d->bias : nullptr;  // the descriptor's as at the call
    emu_enqueue(st, [=] { gemm(m, n, k, al, a, b, be, C, tc, ldc, D, td, ldd, bias_p); });
    return CUBLAS_STATUS_SUCCESS;
}
