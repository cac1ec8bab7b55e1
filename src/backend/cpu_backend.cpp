// The CPU backend: host memory, the kernel table ops::kernels() chose for this CPU (AVX2 or
// AVX-512), oneDNN's GEMMs. Every op of the interface is here, so the CPU backend lacks none.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.hpp"
#include "core/aligned.hpp"
#include "core/error.hpp"
#include "ops/bf16.hpp"
#include "ops/gemm.hpp"
#include "ops/span_loss.hpp"

namespace bertbench::backend {
namespace {

// The GEMM forms the CPU engine uses: fp32 through sgemm, or through the matmul primitive for a
// bias or a bf16 output; bf16 operands through gemm_bf16 (emulated where the CPU has no bf16 unit).
// A transposed A (which the engine never passes: it keeps xᵀ in bf16) is copied transposed first.
void cpu_gemm(MatmulType type, bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda,
              const void* B, int ldb, float beta, void* C, int ldc, const float* bias, MatmulType c_type) {
    if (M == 0 || N == 0) return;
    const bool bf = type == MatmulType::bf16;
    if (trans_a && !(type == MatmulType::f32 && c_type == MatmulType::f32 && !bias)) {
        const size_t n = static_cast<size_t>(M) * K;  // op(A) = Aᵀ, A stored (K, M)
        if (bf) {
            std::vector<bf16> at(n);
            ops::transpose_bf16(at.data(), static_cast<const bf16*>(A), K, M, lda);
            return cpu_gemm(type, false, trans_b, M, N, K, at.data(), K, B, ldb, beta, C, ldc, bias, c_type);
        }
        std::vector<float> at(n);
        const float* a = static_cast<const float*>(A);
        for (int k = 0; k < K; ++k)
            for (int m = 0; m < M; ++m) at[static_cast<size_t>(m) * K + k] = a[static_cast<size_t>(k) * lda + m];
        return cpu_gemm(type, false, trans_b, M, N, K, at.data(), K, B, ldb, beta, C, ldc, bias, c_type);
    }
    if (!bf && c_type == MatmulType::f32) {
        if (!bias)
            return ops::gemm(trans_a, trans_b, M, N, K, 1.f, static_cast<const float*>(A), lda,
                             static_cast<const float*>(B), ldb, beta, static_cast<float*>(C), ldc);
        return ops::matmul(type, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, c_type);
    }
    if (bf && c_type == MatmulType::f32)
        return ops::gemm_bf16(trans_b, M, N, K, static_cast<const bf16*>(A), lda,
                              static_cast<const bf16*>(B), ldb, beta, static_cast<float*>(C), ldc, bias);
    // fp32 operands with a bf16 C (oneDNN's matmul has no such primitive), or bf16 emulated: the
    // fp32 product, then one rounding.
    if (!bf || !ops::bf16_native()) {
        if (beta != 0.f) fail("[backend cpu] gemm: a bf16 C takes beta 0, got {}", beta);
        std::vector<float> c(static_cast<size_t>(M) * N);
        cpu_gemm(type, false, trans_b, M, N, K, A, lda, B, ldb, 0.f, c.data(), N, bias, MatmulType::f32);
        for (int i = 0; i < M; ++i)
            ops::to_bf16(static_cast<bf16*>(C) + static_cast<size_t>(i) * ldc, c.data() + static_cast<size_t>(i) * N,
                         static_cast<size_t>(N));
        return;
    }
    ops::matmul(type, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, bias, c_type);
}

void cpu_to_bf16(bf16* dst, const float* src, size_t n) { ops::to_bf16(dst, src, n); }
void cpu_bias_backward(float* db, const float* dy, int N, int C) { ops::bias_backward(db, dy, N, C); }
void cpu_linear_forward(float* y, const float* x, const float* w, const float* b, int N, int IN, int OUT) {
    ops::linear_forward(y, x, w, b, N, IN, OUT);
}
void cpu_linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                         int IN, int OUT, bool accumulate_dx) {
    ops::linear_backward(dx, dw, db, dy, x, w, N, IN, OUT, accumulate_dx);
}
void cpu_linear_forward_bf16(void* y, MatmulType y_type, const bf16* xb, const bf16* wb, const float* b, int N,
                             int IN, int OUT) {
    if (y_type == MatmulType::bf16) return ops::linear_forward_bf16(static_cast<bf16*>(y), xb, wb, b, N, IN, OUT);
    ops::linear_forward_bf16(static_cast<float*>(y), xb, wb, b, N, IN, OUT);
}
void cpu_linear_backward_bf16(float* dx, float* dw, float* db, const float* dy, const bf16* dyb, const bf16* xt,
                              const bf16* wb, int N, int IN, int OUT, bool accumulate_dx) {
    ops::linear_backward_bf16(dx, dw, db, dy, dyb, xt, wb, N, IN, OUT, accumulate_dx);
}
void cpu_linear_backward_bf16_convert(float* dx, float* dw, float* db, const float* dy, const float* x,
                                      const bf16* wb, int N, int IN, int OUT, bool accumulate_dx, bf16* scratch) {
    ops::linear_backward_bf16(dx, dw, db, dy, x, wb, N, IN, OUT, accumulate_dx, scratch);
}
void cpu_matmul_packed(MatmulType type, int M, int N, int K, const void* A, int lda, const void* packed_b, void* C,
                       int ldc, const float* bias, MatmulType c_type) {
    ops::matmul_packed(type, M, N, K, A, lda, packed_b, C, ldc, bias, c_type);
}
void cpu_flash_forward(float* ctx, float* lse, const float* q, const float* k, const float* v,
                       const ops::AttentionShape& s, const ops::DropoutStream* drop, const ops::FlashBf16* lp) {
    ops::flash_attention_forward(ctx, lse, q, k, v, s, drop, lp, ops::default_flash_tiles(lp != nullptr));
}
void cpu_flash_backward(float* dq, float* dk, float* dv, const float* dctx, const float* q, const float* k,
                        const float* v, const float* ctx, const float* lse, const ops::AttentionShape& s,
                        const ops::DropoutStream* drop, const ops::FlashBf16* lp) {
    ops::flash_attention_backward(dq, dk, dv, dctx, q, k, v, ctx, lse, s, drop, lp,
                                  ops::default_flash_tiles(lp != nullptr));
}
template <typename V>  // float activations (gather_rows), uint8_t dropout masks (gather_mask_rows)
void cpu_gather_rows(V* dst, const V* src, const int32_t* rows, int R, int C) {
    for (int r = 0; r < R; ++r)
        std::copy_n(src + static_cast<size_t>(rows[r]) * C, C, dst + static_cast<size_t>(r) * C);
}
void cpu_scatter_add_rows(float* dst, const float* src, const int32_t* rows, int R, int C) {
    for (int r = 0; r < R; ++r) {
        float* row = dst + static_cast<size_t>(rows[r]) * C;
        const float* d = src + static_cast<size_t>(r) * C;
        for (int c = 0; c < C; ++c) row[c] += d[c];
    }
}
void cpu_bias_rows(float* y, const float* b, int N, int C) { ops::bias_rows(y, b, N, C); }

class CpuBackend final : public Backend {
public:
    CpuBackend() {
        const ops::Kernels& k = ops::kernels();
        ops_.gemm = cpu_gemm;
        ops_.to_bf16 = cpu_to_bf16;
        ops_.bias_backward = cpu_bias_backward;
        ops_.layernorm_forward = k.layernorm_forward;
        ops_.layernorm_backward = k.layernorm_backward;
        ops_.activation_forward = k.activation_forward;
        ops_.activation_backward = k.activation_backward;
        ops_.tanh_forward = k.tanh_forward;
        ops_.tanh_backward = k.tanh_backward;
        ops_.softmax_forward = k.softmax_forward;
        ops_.softmax_backward = k.softmax_backward;
        ops_.dropout_mask = k.dropout_fill_mask_parallel;
        ops_.dropout_add_forward = k.dropout_add_forward;
        ops_.dropout_backward = k.dropout_backward;
        ops_.attention_forward = k.attention_forward;
        ops_.attention_backward = k.attention_backward;
        ops_.embedding_forward = k.embedding_forward;
        ops_.embedding_backward = k.embedding_backward;
        ops_.cross_entropy_forward = k.cross_entropy_forward;
        ops_.cross_entropy_backward = k.cross_entropy_backward;
        ops_.cross_entropy_forward_bias = k.cross_entropy_forward_bias;
        ops_.cross_entropy_backward_bf16 = k.cross_entropy_backward_bf16;
        ops_.linear_forward = cpu_linear_forward;
        ops_.linear_backward = cpu_linear_backward;
        ops_.linear_forward_bf16 = cpu_linear_forward_bf16;
        ops_.linear_backward_bf16 = cpu_linear_backward_bf16;
        ops_.linear_backward_bf16_convert = cpu_linear_backward_bf16_convert;
        ops_.transpose_bf16 = ops::transpose_bf16;
        ops_.matmul_packed = cpu_matmul_packed;
        ops_.quantize_rows = ops::quantize_rows;
        ops_.linear_forward_int8 = ops::linear_forward_int8;
        ops_.attention_forward_int8 = ops::attention_forward_int8;
        ops_.flash_attention_forward = cpu_flash_forward;
        ops_.flash_attention_backward = cpu_flash_backward;
        ops_.gather_rows = cpu_gather_rows<float>;
        ops_.scatter_add_rows = cpu_scatter_add_rows;
        ops_.gather_mask_rows = cpu_gather_rows<uint8_t>;
        ops_.bias_rows = cpu_bias_rows;
        ops_.segment_cross_entropy = ops::segment_cross_entropy<float>;
        ops_.strided_copy = ops::strided_copy<float>;
        ops_.chunk_sum_squares = ops::chunk_sum_squares;
        ops_.chunk_accumulate = ops::chunk_accumulate;
        ops_.scale_values = ops::scale_values;
        ops_.lamb_update = ops::lamb_update;
        ops_.adamw_update = ops::adamw_update;
        ops_.keras_adam_update = ops::keras_adam_update;
        name_ = std::string("kernels ") + k.name + ", bf16 GEMM " + ops::bf16_gemm_impl();
    }
    const char* name() const override { return "cpu"; }
    std::string describe() const override { return name_; }
    // As the engines' host buffers always were: 64-byte aligned, huge pages from 2 MiB (aligned.hpp)
    void* alloc(size_t bytes) override { return AlignedAllocator<unsigned char>().allocate(bytes); }
    void release(void* p) noexcept override { AlignedAllocator<unsigned char>().deallocate(static_cast<unsigned char*>(p), 0); }
    void upload(void* dst, const void* host, size_t bytes) override { std::memcpy(dst, host, bytes); }
    void download(void* host, const void* src, size_t bytes) override { std::memcpy(host, src, bytes); }
    // With every OpenMP thread (a BERT-base gradient is 440 MB; one thread takes twice as long).
    void zero(void* dst, size_t bytes) override {
        constexpr size_t kPart = size_t{1} << 17;
        const long parts = static_cast<long>((bytes + kPart - 1) / kPart);
#pragma omp parallel for schedule(static) if (parts > 1)
        for (long i = 0; i < parts; ++i) {
            const size_t b = static_cast<size_t>(i) * kPart;
            std::memset(static_cast<unsigned char*>(dst) + b, 0, std::min(kPart, bytes - b));
        }
    }
    void synchronize() override {}
    bool host_memory() const override { return true; }
    // None for bf16 without bf16 units: oneDNN then has no bf16 matmul to pack for (AVX2), and the
    // emulated bf16 GEMM widens plain bf16 operands.
    std::unique_ptr<ops::PackedWeights> packed_weights(MatmulType type) const override {
        if (type == MatmulType::bf16 && !ops::bf16_native()) return nullptr;
        return std::make_unique<ops::PackedWeights>(type);
    }
    std::unique_ptr<ops::Int8Weights> int8_weights() const override {
        return std::make_unique<ops::Int8Weights>();
    }

private:
    std::string name_;
};

}  // namespace

std::vector<const char*> Backend::missing() const {
    std::vector<const char*> out;
#define BB_BACKEND_MISSING(name) \
    if (!ops_.name) out.push_back(#name);
    BB_BACKEND_OPS(BB_BACKEND_MISSING)
#undef BB_BACKEND_MISSING
    return out;
}

void Backend::lacks(const char* op) const {
    fail("[backend {}] lacks the op {} (this backend does not implement it yet; nothing runs it on "
         "another device in its place)",
         name(), op);
}

std::unique_ptr<Collectives> Backend::collectives(std::span<const std::byte>, int, int) {
    fail("[backend {}] has no collectives of its own (collectives_id() was empty)", name());
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

Backend& cpu() {
    static const std::unique_ptr<Backend> backend = make_cpu_backend();
    return *backend;
}

#ifndef BB_CUDA
bool cuda_built() { return false; }
std::unique_ptr<Backend> make_cuda_backend(int, const CudaOptions&) {
    fail("--device=cuda: this bertbench was built without the CUDA backend (hint: cmake -DBB_CUDA=ON "
         "where a CUDA toolkit is installed; docs/gpu.md)");
}
#endif

}  // namespace bertbench::backend
