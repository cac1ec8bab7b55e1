// How often one core issues the 512-bit multiply instructions the GEMMs are built from: the fp32
// FMA (vfmadd231ps, 16 multiplies), the bf16 dot product (vdpbf16ps, 32) and the int8 one
// (vpdpbusd, 64), each on 24 independent accumulators so that latency does not limit it. The
// multiplies per nanosecond say which precision a CPU multiplies fastest without AMX; ops::bf16_fast
// and docs/engine.md "Where bf16 pays" rest on them. Measures; never asserts.
// Usage: dot_throughput [iterations=50000000]
#include <cpuid.h>
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

#define BB_REP24(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) \
    X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

// Instructions per nanosecond of `op` on 24 accumulators made by `init`, the operand being x.
#define BB_RATE(name, init, x_init, op, sum)                                                       \
    __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni"))) double name(long iters) {    \
        BB_REP24(init) auto x = x_init;                                                             \
        const auto t0 = std::chrono::steady_clock::now();                                           \
        for (long i = 0; i < iters; ++i) {                                                          \
            BB_REP24(op)                                                                            \
            __asm__ volatile("" : "+v"(x)); /* x unknown to the compiler: no folding */             \
        }                                                                                           \
        const auto t1 = std::chrono::steady_clock::now();                                           \
        auto t = a0;                                                                                \
        BB_REP24(sum)                                                                               \
        alignas(64) int keep[16];                                                                   \
        _mm512_store_si512(keep, (__m512i)t); /* the results, so that the loop is not dropped */    \
        __asm__ volatile("" : : "r"(keep) : "memory");                                              \
        return 24.0 * iters / std::chrono::duration<double, std::nano>(t1 - t0).count();            \
    }

#define F_INIT(i) __m512 a##i = _mm512_set1_ps(i);
#define F_SUM(i) t = _mm512_add_ps(t, a##i);
#define I_INIT(i) __m512i a##i = _mm512_set1_epi32(i);
#define I_SUM(i) t = _mm512_add_epi32(t, a##i);
#define FMA_OP(i) a##i = _mm512_fmadd_ps(a##i, x, x);
#define BF16_OP(i) a##i = _mm512_dpbf16_ps(a##i, x, x);
#define VNNI_OP(i) a##i = _mm512_dpbusd_epi32(a##i, x, x);

BB_RATE(fma_rate, F_INIT, _mm512_set1_ps(0.5f), FMA_OP, F_SUM)
BB_RATE(bf16_rate, F_INIT, (__m512bh)_mm512_set1_epi16(0x3f00), BF16_OP, F_SUM)
BB_RATE(vnni_rate, I_INIT, _mm512_set1_epi8(1), VNNI_OP, I_SUM)

bool has(unsigned leaf, unsigned sub, int reg, int bit) {
    unsigned r[4] = {};
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
    return (r[reg] >> bit) & 1;
}

}  // namespace

int main(int argc, char** argv) {
    const long iters = argc > 1 ? std::atol(argv[1]) : 50000000;
    // CPUID 7.0: EBX bit 16 AVX512F, ECX bit 11 AVX512-VNNI; 7.1: EAX bit 5 AVX512-BF16
    if (!has(7, 0, 1, 16) || !has(7, 0, 2, 11) || !has(7, 1, 0, 5)) {
        std::printf("dot_throughput: this CPU lacks AVX512F, AVX512-VNNI or AVX512-BF16; nothing to measure\n");
        return 0;
    }
    for (int round = 0; round < 3; ++round) {
        const double f = fma_rate(iters), b = bf16_rate(iters), v = vnni_rate(iters);
        std::printf("round %d, one core, 512-bit instructions/ns: vfmadd231ps %.2f, vdpbf16ps %.2f, "
                    "vpdpbusd %.2f; multiplies/ns: fp32 %.0f, bf16 %.0f (%.2fx fp32), int8 %.0f (%.2fx fp32)\n",
                    round, f, b, v, 16 * f, 32 * b, 32 * b / (16 * f), 64 * v, 64 * v / (16 * f));
    }
    return 0;
}
