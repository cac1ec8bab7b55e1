// The CUDA backend: device memory (cudaMalloc, never managed memory), one stream, GEMMs through
// cuBLASLt (fp32 with CUBLAS_COMPUTE_32F, i.e. no TF32; bf16 operands with fp32 accumulation;
// the bias in cuBLASLt's epilogue), our kernels (kernels.cu) for the rest. Built with -DBB_CUDA=ON
// only. cuBLASLt is told the operands' real alignment; for a shape it has no kernel for (on the
// H100, an fp32 1x1x1 product with odd leading dimensions had none) the GEMM runs on classic
// cuBLAS's cublasGemmEx, same arithmetic, with the bias and bf16 rounding in our own epilogue.
// What it lacks (matmul_packed; the fused attention for heads over kFlashMaxHeadSize channels) is
// an Error, never a CPU fallback.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/kernels.cuh"
#include "backend/cuda/nccl.hpp"
#include "core/error.hpp"

namespace bertbench::backend {
namespace {

namespace ck = bertbench::backend::cuda;

cudaStream_t g_stream = nullptr;         // the backend's stream (one backend per process)
cublasLtHandle_t g_lt = nullptr;
cublasHandle_t g_blas = nullptr;         // classic cuBLAS: shapes cuBLASLt has no kernel for
void* g_workspace = nullptr;
constexpr size_t kWorkspace = size_t(64) << 20;  // cuBLASLt's scratch (its docs suggest 32 MiB on Hopper)

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail("[backend cuda] {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) fail("[backend cuda] {}: cuBLASLt status {}", what, static_cast<int>(s));
}
// Launch errors of our kernels surface at the next op (as cudaGetLastError would).
void check_launches() {
    const char* e = ck::last_launch_error();
    if (*e) fail("[backend cuda] kernel launch failed: {}", e);
}

// cuBLASLt is column-major: the row-major C(M,N) = op(A)·op(B) is the column-major
// Cᵀ(N,M) = op(B)ᵀ·op(A)ᵀ, so B goes first. A row-major matrix stored (r, c) with leading
// dimension ld is the column-major (c, r) matrix with the same ld.
struct GemmKey {
    int type, ta, tb, M, N, K, lda, ldb, ldc, bias, ctype, beta, align_a, align_b, align_c;
    auto tie() const {
        return std::tie(type, ta, tb, M, N, K, lda, ldb, ldc, bias, ctype, beta, align_a, align_b, align_c);
    }
    bool operator<(const GemmKey& o) const { return tie() < o.tie(); }
};
struct GemmPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool lt = true;  // false: cuBLASLt has no kernel; classic cuBLAS runs it
};

// The alignment (bytes, a power of two up to 256) of every column start of a matrix at p.
int alignment(const void* p, int ld, size_t elem) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p) | (static_cast<uintptr_t>(ld) * elem);
    int al = 256;
    while (al > 1 && (a & static_cast<uintptr_t>(al - 1))) al >>= 1;
    return al;
}

std::mutex g_plans_mutex;
std::map<GemmKey, GemmPlan> g_plans;

bool g_autotune = false;  // CudaOptions::gemm_autotune
// The fused attention's kernel for bf16 operands: the tensor cores' (flash_tc.cu), or with
// BB_CUDA_FLASH=cores the fp32 CUDA-core kernel on the widened operands (flash_kernels.cu), to
// compare the two; fp32 operands always take the CUDA-core kernel (TF32 off: exact products).
bool g_flash_tensor_cores = true;
bool flash_tensor_cores_from_env() {
    const char* e = std::getenv("BB_CUDA_FLASH");
    if (!e || std::string_view(e) == "tensor") return true;
    if (std::string_view(e) == "cores") return false;
    fail("BB_CUDA_FLASH (environment): expected tensor or cores, got '{}'", e);
}

// The fastest of cuBLASLt's candidates for this product, timed on the call's own operands with C
// written to scratch (the real C may be an input, beta 1); the heuristic's first choice wins ties.
cublasLtMatmulAlgo_t fastest(GemmPlan& p, const cublasLtMatmulHeuristicResult_t* r, int found, const void* A,
                             const void* B, size_t c_bytes, float beta) {
    void* scratch = nullptr;
    check(cudaMallocAsync(&scratch, c_bytes, g_stream), "autotune scratch");
    check(cudaMemsetAsync(scratch, 0, c_bytes, g_stream), "autotune scratch");
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "event");
    check(cudaEventCreate(&t1), "event");
    const float alpha = 1.f;
    int best = 0;
    float best_ms = 0;
    for (int i = 0; i < found; ++i) {
        const auto run = [&] {
            return cublasLtMatmul(g_lt, p.desc, &alpha, B, p.a, A, p.b, &beta, scratch, p.c, scratch, p.c, &r[i].algo,
                                  g_workspace, kWorkspace, g_stream);
        };
        if (run() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; a candidate that fails is skipped
        check(cudaEventRecord(t0, g_stream), "event");
        for (int rep = 0; rep < 5; ++rep) run();
        check(cudaEventRecord(t1, g_stream), "event");
        check(cudaEventSynchronize(t1), "event");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, t0, t1), "event");
        if (i == 0 || ms < best_ms) best = i, best_ms = ms;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    check(cudaFreeAsync(scratch, g_stream), "autotune scratch");
    return r[best].algo;
}

GemmPlan& plan_for(const GemmKey& k, const void* A, const void* B, const float* bias, float beta) {
    std::lock_guard<std::mutex> lock(g_plans_mutex);
    auto it = g_plans.find(k);
    if (it != g_plans.end()) return it->second;
    GemmPlan p;
    const bool bf = k.type == static_cast<int>(MatmulType::bf16);
    const cudaDataType_t in = bf ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t out = k.ctype == static_cast<int>(MatmulType::bf16) ? CUDA_R_16BF : CUDA_R_32F;
    check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
    const cublasOperation_t opa = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "transa");
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "transb");
    if (k.bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        const cudaDataType_t bias_type = CUDA_R_32F;
        check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
        check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
              "bias type");
    }
    // first operand: B, stored (K,N) [col-major (N,K)] or with tb (N,K) [col-major (K,N)]
    check(cublasLtMatrixLayoutCreate(&p.a, in, k.tb ? k.K : k.N, k.tb ? k.N : k.K, k.ldb), "layout B");
    // second operand: A, stored (M,K) [col-major (K,M)] or with ta (K,M) [col-major (M,K)]
    check(cublasLtMatrixLayoutCreate(&p.b, in, k.ta ? k.M : k.K, k.ta ? k.K : k.M, k.lda), "layout A");
    check(cublasLtMatrixLayoutCreate(&p.c, out, k.N, k.M, k.ldc), "layout C");
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    const size_t ws = kWorkspace;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
          "workspace");
    // cuBLASLt's A is our B, its B our A; C and D are the same matrix
    const uint32_t al_a = k.align_b, al_b = k.align_a, al_c = k.align_c;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a),
          "alignment");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b),
          "alignment");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c),
          "alignment");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c),
          "alignment");
    std::array<cublasLtMatmulHeuristicResult_t, 8> r{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g_lt, p.desc, p.a, p.b, p.c, p.c, pref,
                                                            g_autotune ? static_cast<int>(r.size()) : 1, r.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found > 0 && g_autotune) {
        if (bias)
            check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                  "bias pointer");
        const size_t c_elem = k.ctype == static_cast<int>(MatmulType::bf16) ? 2 : 4;
        p.algo = fastest(p, r.data(), found, A, B, static_cast<size_t>(k.M) * k.ldc * c_elem, beta);
    } else if (s == CUBLAS_STATUS_SUCCESS && found > 0)
        p.algo = r[0].algo;
    else if (s == CUBLAS_STATUS_NOT_SUPPORTED || found == 0)
        p.lt = false;
    else
        check(s, "cuBLASLt heuristic");
    return g_plans.emplace(k, p).first->second;
}

void cuda_gemm(MatmulType type, bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda,
               const void* B, int ldb, float beta, void* C, int ldc, const float* bias, MatmulType c_type) {
    check_launches();
    if (M == 0 || N == 0) return;
    if (beta != 0.f && beta != 1.f) fail("[backend cuda] gemm: beta must be 0 or 1, got {}", beta);
    if (bias && beta != 0.f) fail("[backend cuda] gemm: a bias is taken only with beta 0");
    if (c_type == MatmulType::bf16 && beta != 0.f) fail("[backend cuda] gemm: a bf16 C takes beta 0");
    if (K == 0) {  // BLAS: C = beta·C (+ bias): not a case the model has
        fail("[backend cuda] gemm: K = 0 is not supported");
    }
    const size_t es = type == MatmulType::bf16 ? 2 : 4;
    const GemmKey key{static_cast<int>(type), trans_a, trans_b, M, N, K, lda, ldb, ldc, bias != nullptr,
                      static_cast<int>(c_type), beta != 0.f, alignment(A, lda, es), alignment(B, ldb, es),
                      alignment(C, ldc, c_type == MatmulType::bf16 ? 2 : 4)};
    GemmPlan& p = plan_for(key, A, B, bias, beta);
    const float alpha = 1.f;
    if (p.lt) {
        if (bias)
            check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                  "bias pointer");
        check(cublasLtMatmul(g_lt, p.desc, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, g_workspace,
                             kWorkspace, g_stream),
              "gemm");
        return;
    }
    // classic cuBLAS, the same column-major view; a bias or a bf16 C through an fp32 product
    const cudaDataType_t in = type == MatmulType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasOperation_t opa = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const bool direct = !bias && c_type == MatmulType::f32;
    float* acc = static_cast<float*>(C);
    if (!direct) check(cudaMallocAsync(reinterpret_cast<void**>(&acc), static_cast<size_t>(M) * N * 4, g_stream),
                       "gemm scratch");
    check(cublasGemmEx(g_blas, opa, opb, N, M, K, &alpha, B, in, ldb, A, in, lda, &beta, acc, CUDA_R_32F,
                       direct ? ldc : N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    if (!direct) {
        ck::bias_store(g_stream, C, ldc, c_type == MatmulType::bf16, acc, M, N, bias);
        check(cudaFreeAsync(acc, g_stream), "gemm scratch");
    }
}

uint16_t* u16(bf16* p) { return reinterpret_cast<uint16_t*>(p); }
const uint16_t* u16(const bf16* p) { return reinterpret_cast<const uint16_t*>(p); }

void to_bf16(bf16* dst, const float* src, size_t n) { ck::to_bf16(g_stream, u16(dst), src, n); }
void bias_backward(float* db, const float* dy, int N, int C) { ck::bias_backward(g_stream, db, dy, N, C); }
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma, const float* beta,
                       int N, int C, double eps, bf16* yb) {
    ck::layernorm_forward(g_stream, y, mean, rstd, x, gamma, beta, N, C, static_cast<float>(eps), u16(yb));
}
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                        const float* mean, const float* rstd, int N, int C, bool accumulate_dx) {
    ck::layernorm_backward(g_stream, dx, dgamma, dbeta, dy, x, gamma, mean, rstd, N, C, accumulate_dx);
}
ck::BiasSum bias_sum(const ops::BiasGrad<float>* bg) { return bg ? ck::BiasSum{bg->db, bg->C} : ck::BiasSum{nullptr, 0}; }
void activation_forward(ops::Activation a, float* y, const float* x, size_t n, bf16* yb) {
    ck::activation_forward(g_stream, static_cast<int>(a), y, x, n, u16(yb));
}
void activation_backward(ops::Activation a, float* dx, const float* dy, const float* x, size_t n, bf16* dxb,
                         const ops::BiasGrad<float>* bg) {
    ck::activation_backward(g_stream, static_cast<int>(a), dx, dy, x, n, u16(dxb), bias_sum(bg));
}
void tanh_forward(float* y, size_t n) { ck::tanh_forward(g_stream, y, n); }
void tanh_backward(float* dx, const float* dy, const float* y, size_t n) { ck::tanh_backward(g_stream, dx, dy, y, n); }
void softmax_forward(float* p, const float* s, int R, int C, float scale) {
    ck::softmax_forward(g_stream, p, s, R, C, scale);
}
void softmax_backward(float* ds, const float* dp, const float* p, int R, int C) {
    ck::softmax_backward(g_stream, ds, dp, p, R, C);
}
static_assert(sizeof(ck::OptimChunk) == sizeof(ops::ParamChunk) &&
              offsetof(ck::OptimChunk, begin) == offsetof(ops::ParamChunk, begin) &&
              offsetof(ck::OptimChunk, end) == offsetof(ops::ParamChunk, end));
ck::OptimTable optim_table(const ops::ChunkTable& t) {
    return {reinterpret_cast<const ck::OptimChunk*>(t.chunks), t.num_chunks, t.first_chunk, t.decay,
            t.num_tensors, t.adapt};
}
void chunk_sum_squares(double* partial, const float* x, const ops::ChunkTable& t) {
    ck::chunk_sum_squares(g_stream, partial, x, optim_table(t));
}
void chunk_accumulate(float* acc, const float* g, const ops::ChunkTable& t, float scale, float n) {
    ck::chunk_accumulate(g_stream, acc, g, optim_table(t), scale, n);
}
void scale_values(float* x, size_t n, float s, int32_t* nonfinite) {
    ck::scale_values(g_stream, x, n, s, nonfinite);
}
void lamb_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t,
                 float grad_scale, float lr, const ops::LambConstants& k, double* partials,
                 float* ratios) {
    ck::lamb_update(g_stream, w, m, v, g, optim_table(t), grad_scale, lr,
                    {k.b1, k.b2, k.one_minus_b1, k.one_minus_b2, k.bc1, k.bc2, k.eps, k.wd},
                    partials, ratios);
}
void adamw_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t,
                  float grad_scale, float lr, const ops::AdamConstants& k) {
    ck::adamw_update(g_stream, w, m, v, g, optim_table(t), grad_scale, lr,
                     {k.b1, k.b2, k.one_minus_b1, k.one_minus_b2, 1.f, 1.f, k.eps, k.wd});
}
void keras_adam_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t,
                       float grad_scale, float lr, const ops::KerasAdamConstants& k) {
    ck::keras_adam_update(g_stream, w, m, v, g, optim_table(t), grad_scale, lr,
                          {k.one_minus_b1, k.one_minus_b2, k.eps, k.wd, k.alpha});
}
ck::Philox philox(const ops::DropoutStream& s) { return {s.seed, s.step, s.site, s.threshold()}; }
// A dropout stream as the attention kernels take it: its Philox (null without dropout) and keep
// probability (1 without).
struct KernelDropout {
    explicit KernelDropout(const ops::DropoutStream* d)
        : ph(d ? philox(*d) : ck::Philox{}), p(d ? &ph : nullptr), keep(d ? static_cast<float>(d->keep_prob) : 1.f) {}
    KernelDropout(const KernelDropout&) = delete;
    KernelDropout& operator=(const KernelDropout&) = delete;
    const ck::Philox ph;
    const ck::Philox* const p;
    const float keep;
};
void dropout_mask(uint8_t* mask, const ops::DropoutStream& s, size_t n) {
    ck::dropout_mask(g_stream, mask, philox(s), n);
}
void dropout_add_forward(float* y, const float* x, const uint8_t* mask, float keep_prob, const float* residual,
                         size_t n, bf16* yb) {
    ck::dropout_add_forward(g_stream, y, x, mask, keep_prob, residual, n, u16(yb));
}
void dropout_backward(float* dx, const float* dy, const uint8_t* mask, float keep_prob, size_t n, bf16* dxb,
                      const ops::BiasGrad<float>* bg) {
    ck::dropout_backward(g_stream, dx, dy, mask, keep_prob, n, u16(dxb), bias_sum(bg));
}
void embedding_forward(float* e, const float* word, const float* pos, const float* type, const ops::EmbeddingIndex& x,
                       int H) {
    ck::embedding_forward(g_stream, e, word, pos, type, x.ids, x.segments, x.offsets, x.B, H);
}
void embedding_backward(float* dword, float* dpos, float* dtype, const float* de, const ops::EmbeddingIndex& x,
                        int H) {
    ck::embedding_backward(g_stream, dword, dpos, dtype, de, x.ids, x.segments, x.offsets, x.B, H);
}
void cross_entropy_forward(double* loss, int32_t* argmax, float* lse, const float* logits, const int32_t* labels,
                           int R, int V) {
    ck::cross_entropy_forward(g_stream, loss, argmax, lse, logits, labels, R, V);
}
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* labels,
                            const float* coef, int R, int V) {
    ck::cross_entropy_backward(g_stream, dlogits, logits, lse, labels, coef, R, V);
}

ck::AttnShape attn_shape(const ops::AttentionShape& s) {
    return ck::AttnShape{s.offsets, s.prob_offsets, s.key_lengths, s.B, s.NH, s.HS};
}
// With lp (a bf16 engine) the kernels read the bf16 q, k, v (and dctx), whose fp32 forms the
// engine does not write then.
void attention_forward(float* ctx, float* probs, float* /*scratch: P' is formed on the fly*/, uint8_t* mask,
                       const float* q, const float* k, const float* v, const ops::AttentionShape& s,
                       const ops::DropoutStream* drop, const ops::AttentionBf16* lp) {
    const void* in[3] = {q, k, v};
    if (lp) in[0] = lp->q, in[1] = lp->k, in[2] = lp->v;
    const KernelDropout d(drop);
    ck::attention_forward(g_stream, ctx, probs, mask, in[0], in[1], in[2], lp != nullptr, attn_shape(s), d.p, d.keep);
}
void attention_backward(float* dq, float* dk, float* dv, float* dprobs, const float* dctx, const float* q,
                        const float* k, const float* v, const float* probs, const uint8_t* mask, float keep_prob,
                        const ops::AttentionShape& s, const ops::AttentionBf16* lp) {
    if (lp)
        return ck::attention_backward(g_stream, dq, dk, dv, dprobs, lp->dctx, lp->q, lp->k, lp->v, true, probs, mask,
                                      keep_prob, attn_shape(s));
    ck::attention_backward(g_stream, dq, dk, dv, dprobs, dctx, q, k, v, false, probs, mask, keep_prob, attn_shape(s));
}

// The fused attention (flash_kernels.cu, flash_tc.cu); with lp it reads only the bf16 q, k, v and dctx.
void require_flash_head(const ops::AttentionShape& s) {
    if (s.HS > ck::kFlashMaxHeadSize)
        fail("[backend cuda] flash attention: head size {} exceeds the kernel's {} (hint: BB_ATTENTION=materialized)",
             s.HS, ck::kFlashMaxHeadSize);
}
void flash_attention_forward(float* ctx, float* lse, const float* q, const float* k, const float* v,
                             const ops::AttentionShape& s, const ops::DropoutStream* drop, const ops::FlashBf16* lp) {
    require_flash_head(s);
    const KernelDropout d(drop);
    if (lp && g_flash_tensor_cores)
        return ck::flash_attention_forward_tc(g_stream, ctx, lse, u16(lp->q), u16(lp->k), u16(lp->v), attn_shape(s),
                                              d.p, d.keep);
    const void* in[3] = {q, k, v};
    if (lp) in[0] = lp->q, in[1] = lp->k, in[2] = lp->v;
    ck::flash_attention_forward(g_stream, ctx, lse, in[0], in[1], in[2], lp != nullptr, attn_shape(s), d.p, d.keep);
}
void flash_attention_backward(float* dq, float* dk, float* dv, const float* dctx, const float* q, const float* k,
                              const float* v, const float* ctx, const float* lse, const ops::AttentionShape& s,
                              const ops::DropoutStream* drop, const ops::FlashBf16* lp) {
    require_flash_head(s);
    const KernelDropout d(drop);
    if (lp && g_flash_tensor_cores)
        return ck::flash_attention_backward_tc(g_stream, dq, dk, dv, u16(lp->dctx), u16(lp->q), u16(lp->k),
                                               u16(lp->v), ctx, lse, attn_shape(s), d.p, d.keep);
    const void* in[4] = {dctx, q, k, v};
    if (lp) in[0] = lp->dctx, in[1] = lp->q, in[2] = lp->k, in[3] = lp->v;
    ck::flash_attention_backward(g_stream, dq, dk, dv, in[0], in[1], in[2], in[3], lp != nullptr, ctx, lse,
                                 attn_shape(s), d.p, d.keep);
}

// The dense layer from the GEMM (cuBLASLt) and the kernels: the CPU ops' contracts (backend.hpp).
constexpr MatmulType kF32 = MatmulType::f32, kBf16 = MatmulType::bf16;
void linear_forward(float* y, const float* x, const float* w, const float* b, int N, int IN, int OUT) {
    cuda_gemm(kF32, false, false, N, OUT, IN, x, IN, w, OUT, 0.f, y, OUT, b, kF32);
}
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N, int IN,
                     int OUT, bool accumulate_dx) {
    if (N == 0) return;
    if (dx) cuda_gemm(kF32, false, true, N, IN, OUT, dy, OUT, w, OUT, accumulate_dx ? 1.f : 0.f, dx, IN, nullptr, kF32);
    if (dw) cuda_gemm(kF32, true, false, IN, OUT, N, x, IN, dy, OUT, 1.f, dw, OUT, nullptr, kF32);
    if (db) ck::bias_backward(g_stream, db, dy, N, OUT);
}
void linear_forward_bf16(void* y, MatmulType y_type, const bf16* xb, const bf16* wb, const float* b, int N, int IN,
                         int OUT) {
    cuda_gemm(kBf16, false, false, N, OUT, IN, xb, IN, wb, OUT, 0.f, y, OUT, b, y_type);
}
void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const bf16* dyb, const bf16* xt,
                          const bf16* wb, int N, int IN, int OUT, bool accumulate_dx) {
    if (N == 0) return;
    if (dx) cuda_gemm(kBf16, false, true, N, IN, OUT, dyb, OUT, wb, OUT, accumulate_dx ? 1.f : 0.f, dx, IN, nullptr, kF32);
    if (dw) cuda_gemm(kBf16, false, false, IN, OUT, N, xt, N, dyb, OUT, 1.f, dw, OUT, nullptr, kF32);
    if (db) ck::bias_backward(g_stream, db, dy, N, OUT);
}
void linear_backward_bf16_convert(float* dx, float* dw, float* db, const float* dy, const float* x, const bf16* wb,
                                  int N, int IN, int OUT, bool accumulate_dx, bf16* scratch) {
    if (N == 0) return;
    bf16* dyb = scratch;
    bf16* xb = scratch + static_cast<size_t>(N) * OUT;
    ck::to_bf16(g_stream, u16(dyb), dy, static_cast<size_t>(N) * OUT);
    if (dx) cuda_gemm(kBf16, false, true, N, IN, OUT, dyb, OUT, wb, OUT, accumulate_dx ? 1.f : 0.f, dx, IN, nullptr, kF32);
    if (dw) {
        ck::to_bf16(g_stream, u16(xb), x, static_cast<size_t>(N) * IN);
        cuda_gemm(kBf16, true, false, IN, OUT, N, xb, IN, dyb, OUT, 1.f, dw, OUT, nullptr, kF32);
    }
    if (db) ck::bias_backward(g_stream, db, dy, N, OUT);
}
void transpose_bf16(bf16* dst, const bf16* src, int rows, int cols, int ld) {
    ck::transpose_bf16(g_stream, u16(dst), u16(src), rows, cols, ld);
}
void cross_entropy_forward_bias(double* loss, int32_t* argmax, float* lse, float* logits, const float* bias,
                                const int32_t* labels, int R, int V) {
    ck::bias_add(g_stream, logits, bias, R, V);
    ck::cross_entropy_forward(g_stream, loss, argmax, lse, logits, labels, R, V);
}
void cross_entropy_backward_bf16(bf16* dlb, float* db, float* /*db_part: the column sums need none here*/,
                                 const float* logits, const float* lse, const int32_t* labels, const float* coef,
                                 int R, int V) {
    ck::cross_entropy_backward_bf16(g_stream, u16(dlb), db, logits, lse, labels, coef, R, V);
}
void gather_rows(float* dst, const float* src, const int32_t* rows, int R, int C) {
    ck::gather_rows(g_stream, dst, src, rows, R, C);
}
void scatter_add_rows(float* dst, const float* src, const int32_t* rows, int R, int C) {
    ck::scatter_add_rows(g_stream, dst, src, rows, R, C);
}
void gather_mask_rows(uint8_t* dst, const uint8_t* src, const int32_t* rows, int R, int C) {
    ck::gather_mask_rows(g_stream, dst, src, rows, R, C);
}
void bias_rows(float* y, const float* b, int N, int C) { ck::bias_rows(g_stream, y, b, N, C); }
void segment_cross_entropy(double* loss, float* dz, int dz_stride, const float* z, int z_stride,
                           const int32_t* offsets, const int32_t* labels, int B, float coef) {
    ck::segment_cross_entropy(g_stream, loss, dz, dz_stride, z, z_stride, offsets, labels, B, coef);
}
void strided_copy(float* dst, const float* src, size_t n, int stride) {
    ck::strided_copy(g_stream, dst, src, n, stride);
}

// The profiler's clock on the GPU: CUDA events recorded on the backend's stream, kept for reuse.
class CudaTimeline final : public profile::Timeline {
public:
    ~CudaTimeline() override {
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }
    size_t record() override {
        if (used_ == events_.size()) {
            cudaEvent_t e = nullptr;
            check(cudaEventCreate(&e), "profile event");
            events_.push_back(e);
        }
        check(cudaEventRecord(events_[used_], g_stream), "profile event");
        return used_++;
    }
    double seconds(size_t from, size_t to) override {
        check(cudaEventSynchronize(events_[to]), "profile event");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, events_[from], events_[to]), "profile event");
        return ms / 1e3;
    }
    void clear() override { used_ = 0; }

private:
    std::vector<cudaEvent_t> events_;
    size_t used_ = 0;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, const CudaOptions& options) {
        g_autotune = options.gemm_autotune;
        g_flash_tensor_cores = flash_tensor_cores_from_env();
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess || count == 0)
            fail("--device=cuda: no CUDA GPU here ({})",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices");
        if (device < 0 || device >= count) fail("--device=cuda:{}: this machine has {} GPU(s)", device, count);
        check(cudaSetDevice(device), "cudaSetDevice");
        cudaDeviceProp prop{};
        check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
        int driver = 0, runtime = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        if (!g_stream) check(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "stream");
        if (!g_lt) check(cublasLtCreate(&g_lt), "cublasLtCreate");
        if (!g_blas) {
            check(cublasCreate(&g_blas), "cublasCreate");
            check(cublasSetStream(g_blas, g_stream), "cublasSetStream");
        }
        if (!g_workspace) check(cudaMalloc(&g_workspace, kWorkspace), "cuBLASLt workspace");
        describe_ = fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB; driver CUDA {}.{}, runtime {}.{}, cuBLASLt {})",
                                prop.name, prop.major, prop.minor, prop.multiProcessorCount,
                                static_cast<double>(prop.totalGlobalMem) / (1 << 30), driver / 1000,
                                driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, cublasLtGetVersion());
        ops_.gemm = cuda_gemm;
        ops_.to_bf16 = to_bf16;
        ops_.bias_backward = bias_backward;
        ops_.layernorm_forward = layernorm_forward;
        ops_.layernorm_backward = layernorm_backward;
        ops_.activation_forward = activation_forward;
        ops_.activation_backward = activation_backward;
        ops_.tanh_forward = tanh_forward;
        ops_.tanh_backward = tanh_backward;
        ops_.softmax_forward = softmax_forward;
        ops_.softmax_backward = softmax_backward;
        ops_.dropout_mask = dropout_mask;
        ops_.dropout_add_forward = dropout_add_forward;
        ops_.dropout_backward = dropout_backward;
        ops_.embedding_forward = embedding_forward;
        ops_.embedding_backward = embedding_backward;
        ops_.cross_entropy_forward = cross_entropy_forward;
        ops_.cross_entropy_backward = cross_entropy_backward;
        ops_.attention_forward = attention_forward;
        ops_.attention_backward = attention_backward;
        ops_.flash_attention_forward = flash_attention_forward;
        ops_.flash_attention_backward = flash_attention_backward;
        ops_.linear_forward = linear_forward;
        ops_.linear_backward = linear_backward;
        ops_.linear_forward_bf16 = linear_forward_bf16;
        ops_.linear_backward_bf16 = linear_backward_bf16;
        ops_.linear_backward_bf16_convert = linear_backward_bf16_convert;
        ops_.transpose_bf16 = transpose_bf16;
        ops_.cross_entropy_forward_bias = cross_entropy_forward_bias;
        ops_.cross_entropy_backward_bf16 = cross_entropy_backward_bf16;
        ops_.gather_rows = gather_rows;
        ops_.scatter_add_rows = scatter_add_rows;
        ops_.gather_mask_rows = gather_mask_rows;
        ops_.bias_rows = bias_rows;
        ops_.segment_cross_entropy = segment_cross_entropy;
        ops_.strided_copy = strided_copy;
        ops_.chunk_sum_squares = chunk_sum_squares;
        ops_.chunk_accumulate = chunk_accumulate;
        ops_.scale_values = scale_values;
        ops_.lamb_update = lamb_update;
        ops_.adamw_update = adamw_update;
        ops_.keras_adam_update = keras_adam_update;
        // not: matmul_packed (no packed weights kept)
    }
    const char* name() const override { return "cuda"; }
    std::string describe() const override { return describe_; }
    void* alloc(size_t bytes) override {
        void* p = nullptr;
        if (bytes == 0) return nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            size_t free_b = 0, total_b = 0;
            cudaMemGetInfo(&free_b, &total_b);
            fail("[backend cuda] cannot allocate {:.1f} MiB on the GPU ({:.1f} of {:.1f} MiB free): {}",
                 bytes / 1048576.0, free_b / 1048576.0, total_b / 1048576.0, cudaGetErrorString(e));
        }
        return p;
    }
    void release(void* p) noexcept override { cudaFree(p); }
    std::unique_ptr<profile::Timeline> timeline() override { return std::make_unique<CudaTimeline>(); }
    std::vector<std::byte> collectives_id(std::string& why) override { return ck::nccl_unique_id(why); }
    std::unique_ptr<Collectives> collectives(std::span<const std::byte> id, int rank, int size) override {
        return ck::make_nccl_collectives(g_stream, id, rank, size);
    }
    // Queued on the stream, without waiting for it: from pageable memory (the engine's host buffers)
    // cudaMemcpyAsync has taken the bytes (staged, or copied) when it returns, so the host buffer
    // may go right after. A training step uploads its batch in about ten pieces; waiting after each
    // would drain the GPU's queue ten times a step.
    void upload(void* dst, const void* host, size_t bytes) override {
        check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, g_stream), "upload");
    }
    void download(void* host, const void* src, size_t bytes) override {
        check_launches();
        check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, g_stream), "download");
        check(cudaStreamSynchronize(g_stream), "download");
    }
    void zero(void* dst, size_t bytes) override {
        if (bytes) check(cudaMemsetAsync(dst, 0, bytes, g_stream), "zero");  // an empty Buffer's pointer is null
    }
    bool host_memory() const override { return false; }
    bool prefers_fused_attention() const override { return true; }
    void synchronize() override {
        check_launches();
        check(cudaStreamSynchronize(g_stream), "synchronize");
    }

private:
    std::string describe_;
};

}  // namespace

bool cuda_built() { return true; }
std::unique_ptr<Backend> make_cuda_backend(int device, const CudaOptions& options) {
    return std::make_unique<CudaBackend>(device, options);
}

}  // namespace bertbench::backend
