// What the engine (encoder.hpp, bert.cpp, squad_head.cpp) runs on: the ops and the memory of a
// backend (backend/backend.hpp). The float engine calls its backend's op table and carves its
// buffers out of the backend's memory; the double engine (finite-difference tests) calls the same
// ops' double instantiations through DoubleOps, whose names and arguments are the table's, on host
// memory. The model's code is therefore written once for both, with no branch on the type.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>
#include <type_traits>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/dropout.hpp"
#include "ops/embedding.hpp"
#include "ops/flash_attention.hpp"
#include "ops/gemm.hpp"
#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"
#include "ops/span_loss.hpp"

namespace bertbench::model::detail {

using backend::MatmulType;
using ops::bf16;

// The op table's entries for T = double: the ops' templates (ops/*.hpp), the reference the float
// kernels are tested against. bf16 ops have no double form: calling one is an Error (an engine
// with bf16 precision is float only, which the engine checks first).
struct DoubleOps {
    using D = double;
    // type f32 is the engine's own precision here: double operands, C and accumulation
    static void gemm(MatmulType type, bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B,
                     int ldb, float beta, void* C, int ldc, const D* bias, MatmulType c_type) {
        if (type != MatmulType::f32 || c_type != MatmulType::f32) no_bf16();
        BB_CHECK(!bias);
        ops::gemm(ta, tb, M, N, K, 1.0, static_cast<const D*>(A), lda, static_cast<const D*>(B), ldb, beta,
                  static_cast<D*>(C), ldc);
    }
    static void bias_backward(D* db, const D* dy, int N, int C) { ops::bias_backward(db, dy, N, C); }
    static void bias_rows(D* y, const D* b, int N, int C) { ops::bias_rows(y, b, N, C); }
    static void layernorm_forward(D* y, D* mean, D* rstd, const D* x, const D* g, const D* b, int N, int C,
                                  double eps, bf16* yb) {
        ops::layernorm_forward(y, mean, rstd, x, g, b, N, C, eps, yb);
    }
    static void layernorm_backward(D* dx, D* dg, D* db, const D* dy, const D* x, const D* g, const D* mean,
                                   const D* rstd, int N, int C, bool acc) {
        ops::layernorm_backward(dx, dg, db, dy, x, g, mean, rstd, N, C, acc);
    }
    static void activation_forward(ops::Activation a, D* y, const D* x, size_t n, bf16* yb) {
        ops::activation_forward(a, y, x, n, yb);
    }
    static void activation_backward(ops::Activation a, D* dx, const D* dy, const D* x, size_t n, bf16* dxb,
                                    const ops::BiasGrad<D>* bg) {
        ops::activation_backward(a, dx, dy, x, n, dxb, bg);
    }
    static void tanh_forward(D* y, size_t n) { ops::tanh_forward(y, n); }
    static void tanh_backward(D* dx, const D* dy, const D* y, size_t n) { ops::tanh_backward(dx, dy, y, n); }
    static void dropout_mask(uint8_t* mask, const ops::DropoutStream& s, size_t n) {
        ops::kernels().dropout_fill_mask_parallel(mask, s, n);  // bits independent of T
    }
    static void dropout_add_forward(D* y, const D* x, const uint8_t* mask, D keep, const D* residual, size_t n,
                                    bf16* yb) {
        ops::dropout_add_forward(y, x, mask, keep, residual, n, yb);
    }
    static void dropout_backward(D* dx, const D* dy, const uint8_t* mask, D keep, size_t n, bf16* dxb,
                                 const ops::BiasGrad<D>* bg) {
        ops::dropout_backward(dx, dy, mask, keep, n, dxb, bg);
    }
    static void attention_forward(D* ctx, D* probs, D* scratch, uint8_t* mask, const D* q, const D* k, const D* v,
                                  const ops::AttentionShape& s, const ops::DropoutStream* drop,
                                  const ops::AttentionBf16* lp) {
        ops::attention_forward(ctx, probs, scratch, mask, q, k, v, s, drop, lp);
    }
    static void attention_backward(D* dq, D* dk, D* dv, D* dprobs, const D* dctx, const D* q, const D* k,
                                   const D* v, const D* probs, const uint8_t* mask, D keep,
                                   const ops::AttentionShape& s, const ops::AttentionBf16* lp) {
        ops::attention_backward(dq, dk, dv, dprobs, dctx, q, k, v, probs, mask, keep, s, lp);
    }
    static void flash_attention_forward(D* ctx, D* lse, const D* q, const D* k, const D* v,
                                        const ops::AttentionShape& s, const ops::DropoutStream* drop,
                                        const ops::FlashBf16* lp) {
        ops::flash_attention_forward(ctx, lse, q, k, v, s, drop, lp, ops::default_flash_tiles(false));
    }
    static void flash_attention_backward(D* dq, D* dk, D* dv, const D* dctx, const D* q, const D* k, const D* v,
                                         const D* ctx, const D* lse, const ops::AttentionShape& s,
                                         const ops::DropoutStream* drop, const ops::FlashBf16* lp) {
        ops::flash_attention_backward(dq, dk, dv, dctx, q, k, v, ctx, lse, s, drop, lp,
                                      ops::default_flash_tiles(false));
    }
    static void embedding_forward(D* e, const D* word, const D* pos, const D* type, const ops::EmbeddingIndex& x,
                                  int H) {
        ops::embedding_forward(e, word, pos, type, x, H);
    }
    static void embedding_backward(D* dword, D* dpos, D* dtype, const D* de, const ops::EmbeddingIndex& x, int H) {
        ops::embedding_backward(dword, dpos, dtype, de, x, H);
    }
    static void cross_entropy_forward(double* loss, int32_t* argmax, D* lse, const D* z, const int32_t* labels,
                                      int R, int V) {
        ops::cross_entropy_forward(loss, argmax, lse, z, labels, R, V);
    }
    static void cross_entropy_forward_bias(double* loss, int32_t* argmax, D* lse, D* z, const D* bias,
                                           const int32_t* labels, int R, int V) {
        ops::cross_entropy_forward_bias(loss, argmax, lse, z, bias, labels, R, V);
    }
    static void cross_entropy_backward(D* dz, const D* z, const D* lse, const int32_t* labels, const D* coef,
                                       int R, int V) {
        ops::cross_entropy_backward(dz, z, lse, labels, coef, R, V);
    }
    static void linear_forward(D* y, const D* x, const D* w, const D* b, int N, int IN, int OUT) {
        ops::linear_forward(y, x, w, b, N, IN, OUT);
    }
    static void linear_backward(D* dx, D* dw, D* db, const D* dy, const D* x, const D* w, int N, int IN, int OUT,
                                bool acc) {
        ops::linear_backward(dx, dw, db, dy, x, w, N, IN, OUT, acc);
    }
    template <typename V>  // D rows, or uint8_t dropout masks (gather_mask_rows)
    static void gather_rows(V* dst, const V* src, const int32_t* rows, int R, int C) {
        for (int r = 0; r < R; ++r)
            std::copy_n(src + static_cast<size_t>(rows[r]) * C, C, dst + static_cast<size_t>(r) * C);
    }
    static void gather_mask_rows(uint8_t* dst, const uint8_t* src, const int32_t* rows, int R, int C) {
        gather_rows(dst, src, rows, R, C);
    }
    static void scatter_add_rows(D* dst, const D* src, const int32_t* rows, int R, int C) {
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) dst[static_cast<size_t>(rows[r]) * C + c] += src[static_cast<size_t>(r) * C + c];
    }
    static void segment_cross_entropy(double* loss, D* dz, int dz_stride, const D* z, int z_stride,
                                      const int32_t* offsets, const int32_t* labels, int B, D coef) {
        ops::segment_cross_entropy(loss, dz, dz_stride, z, z_stride, offsets, labels, B, coef);
    }
    static void strided_copy(D* dst, const D* src, size_t n, int stride) { ops::strided_copy(dst, src, n, stride); }
    // bf16 only
    template <typename... A>
    static void to_bf16(A...) { no_bf16(); }
    template <typename... A>
    static void transpose_bf16(A...) { no_bf16(); }
    template <typename... A>
    static void linear_forward_bf16(A...) { no_bf16(); }
    template <typename... A>
    static void linear_backward_bf16(A...) { no_bf16(); }
    template <typename... A>
    static void linear_backward_bf16_convert(A...) { no_bf16(); }
    template <typename... A>
    static void cross_entropy_backward_bf16(A...) { no_bf16(); }
    template <typename... A>
    static void matmul_packed(A...) { no_bf16(); }
    template <typename... A>
    static void quantize_rows(A...) { no_bf16(); }
    template <typename... A>
    static void linear_forward_int8(A...) { no_bf16(); }
    template <typename... A>
    static void attention_forward_int8(A...) { no_bf16(); }
    [[noreturn]] static void no_bf16() { fail("engine: bf16 and int8 GEMMs and packed weights need the float engine"); }
};

// The op table the engine of type T calls: its backend's (float) or DoubleOps.
template <typename T>
using EngineOps = std::conditional_t<std::is_same_v<T, float>, backend::Ops, DoubleOps>;

// The table for backend `be`, after checking that the engine can run on it: every op it needs
// (float), or host memory (double: DoubleOps run on the host).
template <typename T>
const EngineOps<T>& engine_ops(const backend::Backend& be) {
    if (!std::is_same_v<T, float> && !be.host_memory())
        fail("engine: the double engine runs on host memory only, and the {} backend keeps its buffers "
             "on the device",
             be.name());
    if constexpr (std::is_same_v<T, float>) {
        // every op but those of the fused attention, the packed GEMM and int8, which the Encoder
        // asks for where it runs them (a backend without int8, such as CUDA's, runs fp32 and bf16)
        std::vector<const char*> missing = be.missing();
        std::erase_if(missing, [](const char* op) {
            const std::string_view name(op);
            return name == "flash_attention_forward" || name == "flash_attention_backward" || name == "matmul_packed" ||
                   name == "quantize_rows" || name == "linear_forward_int8" || name == "attention_forward_int8";
        });
        if (!missing.empty())
            fail("engine: [backend {}] lacks the op {} (and {} more) that the engine needs", be.name(),
                 missing.front(), missing.size() - 1);
        return be.ops();
    } else {
        static const DoubleOps table;
        return table;
    }
}

// n values of T in a backend's memory, zeroed when allocated; empty until assign().
template <typename T>
class Memory {
public:
    void assign(backend::Backend& be, size_t n) {
        buf_ = n ? std::make_unique<backend::Buffer<T>>(be, n) : nullptr;
        if (n) buf_->zero();
    }
    T* data() const { return buf_ ? buf_->get() : nullptr; }
    // The first n values from / to host memory.
    void upload(backend::Backend& be, const T* host, size_t n) {
        BB_CHECK(n <= size());
        if (n) be.upload(data(), host, n * sizeof(T));
    }
    void download(backend::Backend& be, T* host, size_t n) const {
        BB_CHECK(n <= size());
        if (n) be.download(host, data(), n * sizeof(T));
    }
    size_t size() const { return buf_ ? buf_->size() : 0; }
    bool empty() const { return size() == 0; }

private:
    std::unique_ptr<backend::Buffer<T>> buf_;
};

// Carves typed buffers out of one allocation: a first pass counts, the second assigns.
template <typename T>
class Arena {
public:
    using value_type = T;
    T* take(size_t n) {
        n = (n + 15) / 16 * 16;  // 64-byte granules
        const size_t at = used_;
        used_ += n;
        return storage_.empty() ? nullptr : storage_.data() + at;
    }
    void allocate(backend::Backend& be) {
        storage_.assign(be, used_);
        used_ = 0;
    }
    size_t size() const { return storage_.size(); }

private:
    Memory<T> storage_;
    size_t used_ = 0;
};

}  // namespace bertbench::model::detail
