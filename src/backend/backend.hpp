// The backend interface: the operations the BERT model needs, on buffers one backend owns (host
// memory for the CPU backend, device memory for the CUDA one). Drawn as ggml draws it
// (ggml-backend-impl.h): a backend is a small table of functions plus memory and copies; a null
// entry means the backend lacks that op, and calling it is a one-line Error, never a silent
// fallback to another device. Every op of every backend is run against the double-precision
// reference at odd sizes by one test (tests/backend/backend_ops_test.cpp).
// Adding an op: its prototype in namespace sig and its name in BB_BACKEND_OPS (here), its entry in
// each backend's table (cpu_backend.cpp, cuda/*.cu), its case in the conformance test.
// Pointer arguments, and the pointers inside the shape structs (EmbeddingIndex, AttentionShape),
// are this backend's memory; sizes and flags are host values. Ops run in order on the backend's
// one stream; download() and synchronize() wait for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "ops/flash_attention.hpp"
#include "ops/int8.hpp"
#include "ops/kernels.hpp"
#include "ops/matmul.hpp"
#include "ops/optimizer.hpp"

namespace bertbench::backend {

using ops::bf16;
using ops::MatmulType;

// The signature of every op (documented where the CPU kernels are: ops/*.hpp).
namespace sig {
// C(M,N) = op(A)(M,K) · op(B)(K,N) + beta·C (+ bias(N) on every row), row-major; op(X) = Xᵀ when
// trans_x (A stored (K,M), B stored (N,K)). A and B are float (type f32) or bf16 (type bf16);
// accumulation is fp32; C is float, or bf16 with c_type bf16 (beta 0; rounded once, as to_bf16).
// beta is 0 or 1; bias only with beta 0. fp32 products are true fp32 (no TF32 on GPUs).
void gemm(MatmulType type, bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda,
          const void* B, int ldb, float beta, void* C, int ldc, const float* bias, MatmulType c_type);
// dst(n) = bf16(src(n)), round to nearest even (ops/bf16.hpp)
void to_bf16(bf16* dst, const float* src, size_t n);
// db(C) += Σ_rows dy(N,C) (ops/gemm.hpp)
void bias_backward(float* db, const float* dy, int N, int C);
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, double eps, bf16* yb);
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C,
                        bool accumulate_dx);
void activation_forward(ops::Activation a, float* y, const float* x, size_t n, bf16* yb);
void activation_backward(ops::Activation a, float* dx, const float* dy, const float* x, size_t n,
                         bf16* dxb, const ops::BiasGrad<float>* bg);
void tanh_forward(float* y, size_t n);
void tanh_backward(float* dx, const float* dy, const float* y, size_t n);
void softmax_forward(float* p, const float* s, int R, int C, float scale);
void softmax_backward(float* ds, const float* dp, const float* p, int R, int C);
// mask(n) for elements [0, n) of the stream: the same bits on every backend (ops/dropout.hpp)
void dropout_mask(uint8_t* mask, const ops::DropoutStream& s, size_t n);
void dropout_add_forward(float* y, const float* x, const uint8_t* mask, float keep_prob,
                         const float* residual, size_t n, bf16* yb);
void dropout_backward(float* dx, const float* dy, const uint8_t* mask, float keep_prob, size_t n,
                      bf16* dxb, const ops::BiasGrad<float>* bg);
void attention_forward(float* ctx, float* probs, float* scratch, uint8_t* mask, const float* q,
                       const float* k, const float* v, const ops::AttentionShape& s,
                       const ops::DropoutStream* drop, const ops::AttentionBf16* lp);
void attention_backward(float* dq, float* dk, float* dv, float* dprobs, const float* dctx, const float* q,
                        const float* k, const float* v, const float* probs, const uint8_t* mask,
                        float keep_prob, const ops::AttentionShape& s, const ops::AttentionBf16* lp);
void embedding_forward(float* e, const float* word, const float* pos, const float* type,
                       const ops::EmbeddingIndex& x, int H);
void embedding_backward(float* dword, float* dpos, float* dtype, const float* de,
                        const ops::EmbeddingIndex& x, int H);
void cross_entropy_forward(double* loss, int32_t* argmax, float* lse, const float* logits,
                           const int32_t* labels, int R, int V);
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* labels,
                            const float* coef, int R, int V);
// cross_entropy_forward on logits + bias(V), which it adds to the logits in place
void cross_entropy_forward_bias(double* loss, int32_t* argmax, float* lse, float* logits, const float* bias,
                                const int32_t* labels, int R, int V);
// dlb(R,V) = bf16(coef·(softmax − onehot)), db(V) += its fp32 column sums via db_part
// (ops::cross_entropy_db_part_size values); the fp32 gradient is never stored (ops/cross_entropy.hpp)
void cross_entropy_backward_bf16(bf16* dlb, float* db, float* db_part, const float* logits, const float* lse,
                                 const int32_t* labels, const float* coef, int R, int V);
// The dense layer, W stored (IN, OUT) (ops/gemm.hpp): y(N,OUT) = x·W + b; backward dx = dy·Wᵀ
// (or += with accumulate_dx; none when dx is null), dW += xᵀ·dy, db += Σ_rows dy (db may be null).
void linear_forward(float* y, const float* x, const float* w, const float* b, int N, int IN, int OUT);
void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                     int IN, int OUT, bool accumulate_dx);
// The same with bf16 operands (ops/bf16.hpp): y float, or bf16 with y_type bf16 (rounded once);
// backward from bf16(dy) and bf16(x)ᵀ (IN, N) (dy only for db), or, _convert, from fp32 dy and x
// (scratch: N·(IN + OUT) bf16).
void linear_forward_bf16(void* y, MatmulType y_type, const bf16* xb, const bf16* wb, const float* b, int N,
                         int IN, int OUT);
void linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const bf16* dyb, const bf16* xt,
                          const bf16* wb, int N, int IN, int OUT, bool accumulate_dx);
void linear_backward_bf16_convert(float* dx, float* dw, float* db, const float* dy, const float* x,
                                  const bf16* wb, int N, int IN, int OUT, bool accumulate_dx, bf16* scratch);
// dst(cols, rows) = src(rows, cols)ᵀ, bf16 values copied (ld: src's leading dimension)
void transpose_bf16(bf16* dst, const bf16* src, int rows, int cols, int ld);
// Weights kept in the backend's own GEMM layout (Backend::packed_weights): C = A·B + bias
void matmul_packed(MatmulType type, int M, int N, int K, const void* A, int lda, const void* packed_b,
                   void* C, int ldc, const float* bias, MatmulType c_type);
// int8 inference (ops/int8.hpp): per-row symmetric quantization (stored plus 128, as u8); the int8
// dense layer on kernels from Backend::int8_weights and its epilogue (bias, activation, residual,
// LayerNorm), its result y (float, or bf16 with y_type bf16), or (with out) quantized per row, or
// per group of columns, or after a LayerNorm both.
void quantize_rows(uint8_t* q, float* scale, const float* x, int N, int C);
void linear_forward_int8(void* y, MatmulType y_type, const ops::Int8Output* out, const uint8_t* xq,
                         const float* xscale, const ops::Int8Matrix& w, int N, int IN, int OUT,
                         const ops::Int8Epilogue& e);
// The int8 attention of an inference engine (ops/int8.hpp): ctx from the quantized q | k | v rows
// (N, 3H) and their scales per head (N, 3·NH), both products in int8.
void attention_forward_int8(float* ctx, const int8_t* qkv, const float* scales, const ops::AttentionShape& s);
// The fused attention (ops/flash_attention.hpp): lse (N, NH) instead of the probabilities; the
// backend picks its tiles. lp: bf16 q, k, v (and dctx in the backward).
void flash_attention_forward(float* ctx, float* lse, const float* q, const float* k, const float* v,
                             const ops::AttentionShape& s, const ops::DropoutStream* drop,
                             const ops::FlashBf16* lp);
void flash_attention_backward(float* dq, float* dk, float* dv, const float* dctx, const float* q,
                              const float* k, const float* v, const float* ctx, const float* lse,
                              const ops::AttentionShape& s, const ops::DropoutStream* drop,
                              const ops::FlashBf16* lp);
// Rows: dst(r) = src(rows[r]) (R rows of C); dst(rows[r]) += src(r) in order r = 0..R-1 (a row
// named twice gets both, in that order); y(i) = b for every row i of N.
void gather_rows(float* dst, const float* src, const int32_t* rows, int R, int C);
void scatter_add_rows(float* dst, const float* src, const int32_t* rows, int R, int C);
void bias_rows(float* y, const float* b, int N, int C);
// dst(r) = src(rows[r]) for rows of C bytes (dropout masks)
void gather_mask_rows(uint8_t* dst, const uint8_t* src, const int32_t* rows, int R, int C);
// The span head's loss per sequence, and dst(i) = src(i·stride) (ops/span_loss.hpp)
void segment_cross_entropy(double* loss, float* dz, int dz_stride, const float* z, int z_stride,
                           const int32_t* offsets, const int32_t* labels, int B, float coef);
void strided_copy(float* dst, const float* src, size_t n, int stride);
// The optimizer's (ops/optimizer.hpp): per-chunk Σx², accumulation, scaling with a finiteness
// check, the LAMB, AdamW and Keras Adam updates (ChunkTable, partials, ratios and nonfinite: this backend's
// memory).
void chunk_sum_squares(double* partial, const float* x, const ops::ChunkTable& t);
void chunk_accumulate(float* acc, const float* g, const ops::ChunkTable& t, float scale, float n);
void scale_values(float* x, size_t n, float s, int32_t* nonfinite);
void lamb_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t, float grad_scale,
                 float lr, const ops::LambConstants& k, double* partials, float* ratios);
void adamw_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t, float grad_scale,
                  float lr, const ops::AdamConstants& k);
void keras_adam_update(float* w, float* m, float* v, const float* g, const ops::ChunkTable& t,
                       float grad_scale, float lr, const ops::KerasAdamConstants& k);
}  // namespace sig

// Every op, in one list: the table's fields, the names in messages and the test's inventory.
#define BB_BACKEND_OPS(X)                                                                       \
    X(gemm) X(to_bf16) X(bias_backward) X(layernorm_forward) X(layernorm_backward)             \
    X(activation_forward) X(activation_backward) X(tanh_forward) X(tanh_backward)              \
    X(softmax_forward) X(softmax_backward) X(dropout_mask) X(dropout_add_forward)               \
    X(dropout_backward) X(attention_forward) X(attention_backward) X(embedding_forward)        \
    X(embedding_backward) X(cross_entropy_forward) X(cross_entropy_backward)                    \
    X(cross_entropy_forward_bias) X(cross_entropy_backward_bf16) X(linear_forward)              \
    X(linear_backward) X(linear_forward_bf16) X(linear_backward_bf16)                           \
    X(linear_backward_bf16_convert) X(transpose_bf16) X(matmul_packed) X(quantize_rows)          \
    X(linear_forward_int8) X(attention_forward_int8)                                            \
    X(flash_attention_forward) X(flash_attention_backward) X(gather_rows) X(scatter_add_rows)  \
    X(gather_mask_rows) X(bias_rows) X(segment_cross_entropy) X(strided_copy) X(chunk_sum_squares)                \
    X(chunk_accumulate) X(scale_values) X(lamb_update) X(adamw_update) X(keras_adam_update)

struct Ops {
#define BB_BACKEND_FIELD(name) decltype(&sig::name) name = nullptr;
    BB_BACKEND_OPS(BB_BACKEND_FIELD)
#undef BB_BACKEND_FIELD
};

// Sums over the processes of a job on one backend's memory, in the order of that backend's ops
// (NCCL on the CUDA backend, Backend::collectives). Every rank calls in the same order, as with
// dist::Comm's collectives.
class Collectives {
public:
    virtual ~Collectives() = default;
    // In place: n floats at p (the backend's memory) become their sum over the ranks, the same
    // bits on every rank.
    virtual void all_reduce_sum(float* p, size_t n) = 0;
    // The same sum, overlapped with the backend's later work (data parallelism starts a bucket of
    // gradients while the backward goes on): it begins after the work queued so far and does not
    // hold back work queued later, which must leave [p, p + n) alone until wait_started(); that
    // makes the work queued after it wait for every sum started since the last one. NCCL's run on
    // a stream of their own behind an event of the backend's. By default the sum happens at once,
    // in order, and wait_started() has nothing to wait for.
    virtual void start_sum(float* p, size_t n) { all_reduce_sum(p, n); }
    virtual void wait_started() {}
    // What runs them: "NCCL 2.28.3".
    virtual std::string describe() const = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    // "cpu", "cuda"
    virtual const char* name() const = 0;
    // The device and its software, one line: "NVIDIA H100 80GB HBM3 (driver 580.159, CUDA 13.0,
    // cuBLASLt 130000)", "AMD EPYC … (avx512, oneDNN …)".
    virtual std::string describe() const = 0;

    // Memory owned by this backend. alloc throws Error naming the size when the device has no room.
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* p) noexcept = 0;
    // In the order of the backend's work; the host buffer may go once upload returns, and download
    // returns once the bytes are there (after the work queued before it).
    virtual void upload(void* dst, const void* host, size_t bytes) = 0;
    virtual void download(void* host, const void* src, size_t bytes) = 0;
    virtual void zero(void* dst, size_t bytes) = 0;
    virtual void synchronize() = 0;
    // Whether this backend's memory is the host's (the engine's batches and host loops read it).
    virtual bool host_memory() const = 0;
    // Whether the fused attention is this backend's faster kernel at every size (a GPU's: the
    // engine's automatic choice then takes it; model/bert.hpp, resolve_attention_kernel).
    virtual bool prefers_fused_attention() const { return false; }
    // Empty weights in the layout this backend's matmul_packed reads (oneDNN's blocked layout on
    // the CPU), for an inference engine whose weights do not change; nullptr where the backend
    // keeps none, for this type or at all (the engine then runs its plain GEMMs).
    virtual std::unique_ptr<ops::PackedWeights> packed_weights(MatmulType) const { return nullptr; }
    // Empty int8 kernels for linear_forward_int8, or nullptr where the backend has no int8 path.
    virtual std::unique_ptr<ops::Int8Weights> int8_weights() const { return nullptr; }
    // The profiler's clock for this backend's ops where they run behind the host (CUDA events on
    // its stream), or nullptr where the host's clock times them (they run as they are called).
    virtual std::unique_ptr<profile::Timeline> timeline() { return nullptr; }
    // Collectives among `size` processes, each on its own device: rank 0 calls collectives_id()
    // and hands the bytes to every rank (over MPI), then every rank calls collectives(id, rank,
    // size) (collective). An empty id means this backend has none — the CPU's (its memory is the
    // host's: MPI reduces it), or a CUDA build where NCCL cannot be loaded; `why` then says which.
    virtual std::vector<std::byte> collectives_id(std::string& why) {
        why = std::string("the ") + name() + " backend has no collectives of its own";
        return {};
    }
    virtual std::unique_ptr<Collectives> collectives(std::span<const std::byte> id, int rank, int size);

    const Ops& ops() const { return ops_; }
    // The names of the ops this backend lacks (empty for the CPU backend).
    std::vector<const char*> missing() const;
    // The op `field` of the table, or an Error "[backend cuda] lacks the op name" when it is null.
    template <auto Field>
    auto op(const char* name) const {
        const auto f = ops_.*Field;
        if (!f) lacks(name);
        return f;
    }

protected:
    [[noreturn]] void lacks(const char* name) const;
    Ops ops_;
};

// Calls op `name` of backend `be` (an Error when it lacks it): BB_OP(be, layernorm_forward)(...).
#define BB_OP(be, name) (be).op<&::bertbench::backend::Ops::name>(#name)

// The CPU backend: ops/kernels.hpp's table for this CPU, oneDNN's GEMMs.
std::unique_ptr<Backend> make_cpu_backend();
// The process's CPU backend, where a caller names no backend (the optimizer's default).
Backend& cpu();
struct CudaOptions {
    // Time up to 8 of cuBLASLt's candidate kernels for each new GEMM shape and keep the fastest,
    // instead of its heuristic's first choice. The choice then depends on timings, so a product's
    // bits may differ between processes; off by default (bit-reproducible runs).
    bool gemm_autotune = false;
};
// The CUDA backend on GPU `device`, where this binary was built with it (BB_CUDA) and the GPU is
// there; else an Error saying which of the two is missing. One per process.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, const CudaOptions& options = {});
// Whether this binary was built with the CUDA backend.
bool cuda_built();

// A typed buffer of n values in a backend's memory, released with it.
template <typename T>
class Buffer {
public:
    Buffer(Backend& be, size_t n) : be_(&be), n_(n), p_(static_cast<T*>(n ? be.alloc(n * sizeof(T)) : nullptr)) {}
    Buffer(Backend& be, std::span<const T> host) : Buffer(be, host.size()) { upload(host); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { if (p_) be_->release(p_); }
    T* get() const { return p_; }
    size_t size() const { return n_; }
    std::span<T> span() const { return {p_, n_}; }
    void zero() {
        if (n_) be_->zero(p_, n_ * sizeof(T));
    }
    void upload(std::span<const T> host) {
        if (n_) be_->upload(p_, host.data(), n_ * sizeof(T));
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (n_) be_->download(host.data(), p_, n_ * sizeof(T));
        return host;
    }

private:
    Backend* be_;
    size_t n_;
    T* p_;
};

// Host access to n values at p in `be`'s memory. host_view: the values themselves where that
// memory is the host's, else a copy downloaded into `copy`. modify_on_host: `fn` gets a span of
// them to read and change in place (where the memory is not the host's: a downloaded copy,
// uploaded back afterwards).
template <typename T>
std::span<const T> host_view(Backend& be, const T* p, size_t n, std::vector<T>& copy) {
    if (be.host_memory()) return {p, n};
    copy.resize(n);
    if (n) be.download(copy.data(), p, n * sizeof(T));
    return copy;
}
template <typename T, typename Fn>
void modify_on_host(Backend& be, T* p, size_t n, Fn&& fn) {
    if (be.host_memory()) return fn(std::span<T>(p, n));
    std::vector<T> copy;
    host_view(be, p, n, copy);
    fn(std::span<T>(copy));
    if (n) be.upload(p, copy.data(), n * sizeof(T));
}
// The other way: host values where backend `be` (null: the engine's own CPU backend) reads them —
// `host` itself where its memory is the host's, else a copy uploaded into `copy`.
template <typename T>
std::span<const T> device_view(Backend* be, std::span<const T> host, std::unique_ptr<Buffer<T>>& copy) {
    if (!be || be->host_memory()) return host;
    copy = std::make_unique<Buffer<T>>(*be, host);
    return copy->span();
}

}  // namespace bertbench::backend
