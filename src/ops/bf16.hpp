// bfloat16 for the engine's GEMMs: storage conversion (round to nearest even, as TensorFlow,
// PyTorch and oneDNN round) and a GEMM that takes bf16 operands and accumulates in fp32.
// Native: oneDNN's matmul on AVX512-BF16 or AMX (one primitive per shape, cached). Elsewhere the
// same operands are widened back to fp32 (exactly: bf16 ⊂ fp32) and multiplied by sgemm, so results
// agree with the native path to fp32 accumulation-order noise on every machine, only slower.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace bertbench::ops {

// The arithmetic of the engine's GEMMs (docs/engine.md "Mixed precision").
enum class Precision { fp32, bf16, int8 };
const char* precision_name(Precision p);
// A --dtype/--precision value: fp32 (float32), bf16 (bfloat16), int8 (inference only, ops/int8.hpp). fp16 (float16, PerfZero's GPU
// flag) is an Error naming what this CPU and oneDNN lack, with the bf16 suggestion; anything else
// is an Error listing the choices. `flag` names the flag in messages.
Precision parse_precision(const std::string& value, const std::string& flag);

struct bf16 {
    uint16_t bits;
};

// Round to nearest even; NaN stays NaN (quiet), ±Inf stays ±Inf.
inline bf16 to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{static_cast<uint16_t>(u >> 16)};
}
inline float to_float(bf16 h) {
    const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
// The fp32 value nearest to f that bf16 can hold (to_float(to_bf16(f))).
inline float round_bf16(float f) { return to_float(to_bf16(f)); }

// dst(n) = bf16(src(n)), parallel for large n.
void to_bf16(bf16* dst, const float* src, size_t n);
// The same on the calling thread only: for an op that writes, in its own pass, the bf16 copy of
// its output that the next GEMM reads (LayerNorm, GELU, dropout; a row or chunk at a time, while
// it is in cache). Same bits as to_bf16. The double form exists for the ops' double
// instantiations (gradient checks), which never ask for a bf16 copy.
void to_bf16_serial(bf16* dst, const float* src, size_t n);
inline void to_bf16_serial(bf16* dst, const double* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = to_bf16(static_cast<float>(src[i]));
}
// dst(cols, rows) = bf16(src(rows, cols))ᵀ, src row-major with leading dimension ld.
void to_bf16_transposed(bf16* dst, const float* src, int rows, int cols, int ld);
// dst(cols, rows) = src(rows, cols)ᵀ for values already in bf16 (a copy, no rounding).
void transpose_bf16(bf16* dst, const bf16* src, int rows, int cols, int ld);
// The conversions run 16 values at a time with AVX-512 where CPUID reports AVX512F+BW (chosen at
// run time; the build itself targets AVX2), else 8 at a time with AVX2; both give the scalar
// to_bf16's bits. Tests: set_bf16_conversion_avx512(false) forces the AVX2 code. Not thread-safe.
void set_bf16_conversion_avx512(bool use);
bool bf16_conversion_avx512();  // true when the AVX-512 code runs

// C(M,N) = A(M,K) · op(B)(K,N) + beta·C, row-major; op(B) = Bᵀ when trans_b (B stored (N,K)).
// beta must be 0 or 1. K = 0 leaves beta·C, as BLAS does. bias (N), only with beta 0: added to
// every row of the product (C = A·op(B) + bias, one rounding as with beta 1 on bias rows).
void gemm_bf16(bool trans_b, int M, int N, int K, const bf16* A, int lda, const bf16* B, int ldb,
               float beta, float* C, int ldc, const float* bias = nullptr);

// The dense layer (gemm.hpp's linear_*) with bf16 GEMM operands; bias, outputs and gradients fp32.
// forward:  y(N,OUT) = xb(N,IN) · wb(IN,OUT) + b, xb already converted (one conversion may feed
//           several layers that read the same input, as Q, K and V do).
// backward: dx = bf16(dy) · wbᵀ (overwritten, or += if accumulate_dx; skipped if dx is null);
//           dw(IN,OUT) += bf16(x)ᵀ · bf16(dy); db += Σ_rows dy (fp32).
//           scratch: room for N·OUT + N·IN bf16 values.
void linear_forward_bf16(float* y, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT);
// The same writing only bf16(y) (N,OUT), rounded once from the fp32 sum as to_bf16 rounds: for a
// layer whose output only GEMMs read (Q, K and V in a bf16 engine).
void linear_forward_bf16(bf16* yb, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT);
void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const float* x,
                          const bf16* wb, int N, int IN, int OUT, bool accumulate_dx,
                          bf16* scratch);
// The same with the operands already in bf16: dyb = bf16(dy) (N,OUT) and xt = bf16(x)ᵀ (IN,N),
// so a caller converts each once (the engine keeps bf16(x) from the forward, and Q, K and V share
// one xᵀ). dy (fp32) feeds only db. xt may be null when dw is.
void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const bf16* dyb,
                          const bf16* xt, const bf16* wb, int N, int IN, int OUT,
                          bool accumulate_dx);

// True when gemm_bf16 runs on the CPU's bf16 units (AVX512-BF16 or AMX through oneDNN), false
// when it widens to fp32 (an AVX2 machine, or BB_BF16_EMULATE=1 in the environment).
bool bf16_native();
// A run at `p` has its bf16 products emulated (bf16 and not bf16_native()): the reports' field
// "bf16_emulated" (results.json, eval's JSON, squad's speed), since speed and subnormals differ.
inline bool bf16_emulated(Precision p) { return p == Precision::bf16 && !bf16_native(); }
// True when bf16 GEMMs outrun fp32 ones here, so that a choice made for speed picks bf16: oneDNN's
// bf16 matmul on AMX, or AVX512-BF16 on AMD (Zen 4 and 5 issue vdpbf16ps as often as an FMA, twice
// its multiplies). False on Intel's AVX512-BF16 without AMX (AMX absent or not enabled, as in
// many VMs), which issues vdpbf16ps at a quarter of the FMA's rate: half the multiplies, and
// oneDNN's bf16 GEMMs run at ~0.56x sgemm (docs/engine.md "Where bf16 pays"). False where
// bf16_native() is. --dtype=bf16 still runs bf16 there, with a warning.
bool bf16_fast();
// What the CPU multiplies natively: "fp32", "fp32,bf16", "fp32,bf16,fp16" (CPUID flags).
std::string native_precisions();
// The oneDNN implementation behind gemm_bf16 ("brg:avx512_core_bf16", ...; "emulated (sgemm)").
std::string bf16_gemm_impl();
// True when BB_BF16_EMULATE (any value but "" and "0") or set_bf16_emulation asks for the
// emulation, whatever the CPU has.
bool bf16_emulation_forced();
// Tests: run both paths on any machine that has the native one. Not thread-safe.
void set_bf16_emulation(bool emulate);

}  // namespace bertbench::ops
