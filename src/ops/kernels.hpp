// Run-time choice of the instruction set for our own float kernels (issue 15 §3).
// The build targets AVX2 (-march=haswell) so that one binary runs everywhere; oneDNN picks its
// AVX-512 GEMMs at run time, and this does the same for the rest. Scheme, in one place:
//  - The kernel headers (vmath, activation, softmax, layernorm, dropout, bias_grad, attention,
//    embedding, cross_entropy, quantize) put their code between BB_OPS_ISA_BEGIN/END (ops/isa.hpp): the inline
//    namespace ops::avx2, or ops::avx512 compiled with GCC's AVX-512 target pragma.
//  - ops/kernels_isa.cpp is compiled twice (src/CMakeLists.txt: once in bb_ops, once as the object
//    library bb_ops_avx512 with BB_OPS_AVX512); each copy fills a Kernels table of plain function
//    pointers to its float instantiations: kernels_table_avx2() / kernels_table_avx512().
//  - kernels() (ops/kernels.cpp) picks one table on first use: AVX-512 when the CPU has
//    AVX512F/BW/DQ/VL (CPUID) unless BB_ISA=avx2 says otherwise; BB_ISA=avx512 on a CPU without
//    it is an error. The CPU backend's op table (backend/cpu_backend.cpp) holds these pointers, and
//    the model calls them through it; the double engine calls the templates (model/engine_ops.hpp).
// Both paths use the same formulas; masks, exp, GELU, max/argmax give the same bits; sums may run
// in a different lane order, so fp32 results can differ in the last bits between the paths.
// A new float kernel: a pointer here, its line in kernels_isa.cpp, its entry in the CPU backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/bf16.hpp"
#include "ops/bias_grad.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/dropout.hpp"
#include "ops/embedding.hpp"
#include "ops/isa.hpp"
#include "ops/layernorm.hpp"
#include "ops/quantize.hpp"
#include "ops/softmax.hpp"

namespace bertbench::ops {

enum class Isa { avx2, avx512 };

struct Kernels {
    Isa isa = Isa::avx2;
    const char* name = "";  // "avx2" / "avx512"
    void (*layernorm_forward)(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                              const float* beta, int N, int C, double eps, bf16* yb);
    void (*layernorm_backward)(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                               const float* gamma, const float* mean, const float* rstd, int N, int C,
                               bool accumulate_dx);
    void (*activation_forward)(Activation a, float* y, const float* x, size_t n, bf16* yb);
    void (*activation_backward)(Activation a, float* dx, const float* dy, const float* x, size_t n,
                                bf16* dxb, const BiasGrad<float>* bg);
    void (*tanh_forward)(float* y, size_t n);
    void (*tanh_backward)(float* dx, const float* dy, const float* y, size_t n);
    void (*softmax_forward)(float* p, const float* s, int R, int C, float scale);
    void (*softmax_backward)(float* ds, const float* dp, const float* p, int R, int C);
    void (*dropout_fill_mask)(uint8_t* mask, const DropoutStream& s, size_t first, size_t n);
    void (*dropout_fill_mask_parallel)(uint8_t* mask, const DropoutStream& s, size_t n);
    void (*dropout_add_forward)(float* y, const float* x, const uint8_t* mask, float keep_prob,
                                const float* residual, size_t n, bf16* yb);
    void (*dropout_backward)(float* dx, const float* dy, const uint8_t* mask, float keep_prob, size_t n,
                             bf16* dxb, const BiasGrad<float>* bg);
    void (*attention_forward)(float* ctx, float* probs, float* scratch, uint8_t* mask, const float* q,
                              const float* k, const float* v, const AttentionShape& s,
                              const DropoutStream* drop, const AttentionBf16* lp);
    void (*attention_backward)(float* dq, float* dk, float* dv, float* dprobs, const float* dctx,
                               const float* q, const float* k, const float* v, const float* probs,
                               const uint8_t* mask, float keep_prob, const AttentionShape& s,
                               const AttentionBf16* lp);
    void (*embedding_forward)(float* e, const float* word, const float* pos, const float* type,
                              const EmbeddingIndex& x, int H);
    void (*embedding_backward)(float* dword, float* dpos, float* dtype, const float* de,
                               const EmbeddingIndex& x, int H);
    void (*cross_entropy_forward)(double* loss, int32_t* argmax, float* lse, const float* logits,
                                  const int32_t* labels, int R, int V);
    void (*cross_entropy_backward)(float* dlogits, const float* logits, const float* lse,
                                   const int32_t* labels, const float* coef, int R, int V);
    void (*cross_entropy_forward_bias)(double* loss, int32_t* argmax, float* lse, float* logits,
                                       const float* bias, const int32_t* labels, int R, int V);
    void (*cross_entropy_backward_bf16)(bf16* dlb, float* db, float* db_part, const float* logits,
                                        const float* lse, const int32_t* labels, const float* coef,
                                        int R, int V);
    bool (*quantize_row_s8)(int8_t* q, float* scale, const float* x, int C, int qmax);
    bool (*quantize_row_u8)(uint8_t* q, float* scale, const float* x, int C);
    bool (*quantize_groups_s8)(int8_t* q, float* scale, const float* x, int groups, int group, int qmax);
    void (*dequantize_rows)(float* y, const int32_t* acc, const int32_t* offset, const float* xscale,
                            const float* wscale, const float* bias, const float* residual, int rows, int cols, int ldy,
                            const Activation* act);
    bool (*softmax_rows_u8)(uint8_t* q, float* scale, const int32_t* s, const int32_t* offset, const float* sa,
                            const float* sb, const float* w, int rows, int cols, float* work);
    size_t (*array_argmax)(const float* x, size_t n);
    float (*exp_affine_sum)(float* y, const float* x, size_t n, float scale, float shift);
};

// The two tables (kernels_isa.cpp). kernels_table_avx512() is null in a build without it (clang).
const Kernels* kernels_table_avx2();
const Kernels* kernels_table_avx512();

// The table this process uses, chosen once (BB_ISA, then CPUID). Throws Error for a bad BB_ISA.
const Kernels& kernels();
// The table for `isa` if it is built and this CPU can run it, else null (tests).
const Kernels* kernels_for(Isa isa);
// What the CPU offers, e.g. "avx2 avx512f avx512bw avx512dq avx512vl avx512bf16" (messages).
const char* cpu_isa_summary();

}  // namespace bertbench::ops
