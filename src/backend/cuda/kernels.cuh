// The CUDA backend's own kernels (kernels.cu), with plain types only so that this header and the
// .cu file need none of the CPU ops' headers. cuda_backend.cpp adapts them to the interface's
// signatures (backend.hpp); each is the CPU op of the same name on device buffers, launched on
// `st`. Formulas as the CPU ops (ops/*.hpp); the sums run in another order, so results agree
// with the CPU to fp32 rounding, except where stated: dropout masks and bf16 conversions are the
// same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace bertbench::backend::cuda {

// 0 gelu_tanh, 1 gelu_erf, 2 relu (ops::Activation's order)
using Act = int;

struct Philox {  // ops::DropoutStream: keep iff (word >> 8) < threshold
    uint64_t seed, step;
    uint32_t site, threshold;
};

struct BiasSum {  // db(C) += Σ_rows of the op's output viewed as rows of C; null db: none
    float* db;
    int C;
};

void to_bf16(cudaStream_t st, uint16_t* dst, const float* src, size_t n);
void bias_backward(cudaStream_t st, float* db, const float* dy, int N, int C);
void layernorm_forward(cudaStream_t st, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, float eps, uint16_t* yb);
void layernorm_backward(cudaStream_t st, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C, bool accumulate_dx);
void activation_forward(cudaStream_t st, Act a, float* y, const float* x, size_t n, uint16_t* yb);
void activation_backward(cudaStream_t st, Act a, float* dx, const float* dy, const float* x, size_t n,
                         uint16_t* dxb, BiasSum bg);
void tanh_forward(cudaStream_t st, float* y, size_t n);
void tanh_backward(cudaStream_t st, float* dx, const float* dy, const float* y, size_t n);
void softmax_forward(cudaStream_t st, float* p, const float* s, int R, int C, float scale);
void softmax_backward(cudaStream_t st, float* ds, const float* dp, const float* p, int R, int C);
void dropout_mask(cudaStream_t st, uint8_t* mask, Philox s, size_t n);
void dropout_add_forward(cudaStream_t st, float* y, const float* x, const uint8_t* mask, float keep_prob,
                         const float* residual, size_t n, uint16_t* yb);
void dropout_backward(cudaStream_t st, float* dx, const float* dy, const uint8_t* mask, float keep_prob,
                      size_t n, uint16_t* dxb, BiasSum bg);
// ids, segments (N), offsets (B+1): device memory
void embedding_forward(cudaStream_t st, float* e, const float* word, const float* pos, const float* type,
                       const int32_t* ids, const int32_t* segments, const int32_t* offsets, int B, int H);
void embedding_backward(cudaStream_t st, float* dword, float* dpos, float* dtype, const float* de,
                        const int32_t* ids, const int32_t* segments, const int32_t* offsets, int B, int H);
void cross_entropy_forward(cudaStream_t st, double* loss, int32_t* argmax, float* lse, const float* logits,
                           const int32_t* labels, int R, int V);
void cross_entropy_backward(cudaStream_t st, float* dlogits, const float* logits, const float* lse,
                            const int32_t* labels, const float* coef, int R, int V);

// Attention on the unpadded layout (ops/attention.hpp's contract and probs layout); offsets,
// prob_offsets and key_lengths (null: every row a key) are device memory. A naive first kernel:
// a block per (sequence, head), rows in turn. The dropout mask of probs element e is the stream's
// element e, as on the CPU (drop null: no dropout).
struct AttnShape {
    const int32_t* offsets;
    const size_t* prob_offsets;
    const int32_t* key_lengths;
    int B, NH, HS;
};
// q, k, v (and dctx) are float, or bf16 (uint16_t bits) with bf16_in; products and sums in fp32.
void attention_forward(cudaStream_t st, float* ctx, float* probs, uint8_t* mask, const void* q, const void* k,
                       const void* v, bool bf16_in, AttnShape s, const Philox* drop, float keep_prob);
void attention_backward(cudaStream_t st, float* dq, float* dk, float* dv, float* dprobs, const void* dctx,
                        const void* q, const void* k, const void* v, bool bf16_in, const float* probs,
                        const uint8_t* mask, float keep_prob, AttnShape s);
// The fused attention (flash_kernels.cu), ops/flash_attention.hpp's contract: ctx and lse(N, NH)
// instead of the probabilities; the backward recomputes them from lse and regenerates the dropout
// mask from the stream (element indices as attention_forward's, so the same elements are dropped).
// Tiles of 32 query rows × 32 keys in shared memory, fp32 products on the CUDA cores (bf16
// operands widened exactly; the probabilities stay fp32). Heads of at most kFlashMaxHeadSize
// channels (cuda_backend.cpp refuses larger ones).
constexpr int kFlashMaxHeadSize = 128;
void flash_attention_forward(cudaStream_t st, float* ctx, float* lse, const void* q, const void* k, const void* v,
                             bool bf16_in, AttnShape s, const Philox* drop, float keep_prob);
// dq, dk, dv overwritten (rows K_b..T_b get zero dk, dv); with bf16_in, D = dctx·ctx reads the
// bf16 dctx and the fp32 ctx, as on the CPU. Deterministic: no atomics (dk, dv and dq come from
// two kernels, each owning its rows).
void flash_attention_backward(cudaStream_t st, float* dq, float* dk, float* dv, const void* dctx, const void* q,
                              const void* k, const void* v, bool bf16_in, const float* ctx, const float* lse,
                              AttnShape s, const Philox* drop, float keep_prob);
// The same contract for bf16 operands on the tensor cores (flash_tc.cu): tiles of 64 rows, wmma
// products with fp32 accumulation, and the CPU bf16 kernel's roundings (P, P' and dS·s to bf16
// before they multiply).
void flash_attention_forward_tc(cudaStream_t st, float* ctx, float* lse, const uint16_t* q, const uint16_t* k,
                                const uint16_t* v, AttnShape s, const Philox* drop, float keep_prob);
void flash_attention_backward_tc(cudaStream_t st, float* dq, float* dk, float* dv, const uint16_t* dctx,
                                 const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* ctx,
                                 const float* lse, AttnShape s, const Philox* drop, float keep_prob);
// C(M,N) (ldc; fp32, or bf16 when c_bf16) = acc(M,N) + bias(N) (bias may be null): the epilogue of
// the classic-cuBLAS GEMM path (cuda_backend.cpp)
void bias_store(cudaStream_t st, void* C, int ldc, bool c_bf16, const float* acc, int M, int N, const float* bias);

// The model's ops beyond the kernels above (model_kernels.cu), each the CPU op of the same name:
// dst(cols, rows) = src(rows, cols)ᵀ (bf16 bits, ld: src's row stride)
void transpose_bf16(cudaStream_t st, uint16_t* dst, const uint16_t* src, int rows, int cols, int ld);
// dst(r) = src(rows[r]); dst(rows[r]) += src(r) in order r (a thread per column); y(i) = b
void gather_rows(cudaStream_t st, float* dst, const float* src, const int32_t* rows, int R, int C);
void scatter_add_rows(cudaStream_t st, float* dst, const float* src, const int32_t* rows, int R, int C);
void gather_mask_rows(cudaStream_t st, uint8_t* dst, const uint8_t* src, const int32_t* rows, int R, int C);
void bias_rows(cudaStream_t st, float* y, const float* b, int N, int C);
// y(N,C) += b(C) on every row
void bias_add(cudaStream_t st, float* y, const float* b, int N, int C);
// dlb = bf16(coef·(softmax − onehot)) per row; db(V) += its fp32 column sums (rows in order)
void cross_entropy_backward_bf16(cudaStream_t st, uint16_t* dlb, float* db, const float* logits, const float* lse,
                                 const int32_t* labels, const float* coef, int R, int V);
// ops/span_loss.hpp: a block per sequence
void segment_cross_entropy(cudaStream_t st, double* loss, float* dz, int dz_stride, const float* z, int z_stride,
                           const int32_t* offsets, const int32_t* labels, int B, float coef);
void strided_copy(cudaStream_t st, float* dst, const float* src, size_t n, int stride);

// The optimizer's ops (optim_kernels.cu), each the CPU op of the same name (ops/optimizer.hpp), on
// the same layouts: OptimChunk is ops::ParamChunk, OptimTable ops::ChunkTable (asserted in
// cuda_backend.cpp); OptimConstants holds LAMB's constants (AdamW: bc1 = bc2 = 1), KerasConstants
// ops::KerasAdamConstants.
struct OptimChunk {
    size_t tensor, begin, end;
};
struct OptimTable {
    const OptimChunk* chunks;
    size_t num_chunks;
    const size_t* first_chunk;
    const uint8_t* decay;
    size_t num_tensors;
    const uint8_t* adapt;  // null: decay
};
struct OptimConstants {
    float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, eps, wd;
};
void chunk_sum_squares(cudaStream_t st, double* partial, const float* x, const OptimTable& t);
void chunk_accumulate(cudaStream_t st, float* acc, const float* g, const OptimTable& t, float scale, float n);
void scale_values(cudaStream_t st, float* x, size_t n, float s, int32_t* nonfinite);
void lamb_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t, float grad_scale,
                 float lr, const OptimConstants& k, double* partials, float* ratios);
void adamw_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t,
                  float grad_scale, float lr, const OptimConstants& k);
struct KerasConstants {
    float one_minus_b1, one_minus_b2, eps, wd, alpha;
};
void keras_adam_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t,
                       float grad_scale, float lr, const KerasConstants& k);

// The last launch's error, as a message ("" when none).
const char* last_launch_error();

}  // namespace bertbench::backend::cuda
