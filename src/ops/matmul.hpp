// oneDNN matmul primitives of fixed shapes (its brgemm kernels; a runtime-sized matmul falls back
// to slower ones), created once per shape and kept in a bounded process-wide cache. The bf16 GEMM
// (bf16.hpp) runs on them, and so does the float GEMM (gemm.hpp) where they beat dnnl_sgemm: a
// transposed B with few rows of A (the MLM decoder at small batches, docs/engine.md).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/aligned.hpp"

namespace bertbench::ops {

// The operand type of A and B; C, bias and accumulation are f32, except for s8 operands: int32
// accumulation and C s32 (the int8 dense layers, ops/int8.hpp). u8: A uint8, B int8, C int32 (the
// int8 attention's probabilities times v, ops/int8.hpp).
enum class MatmulType { f32, bf16, s8, s32, u8 };

// C(M,N) = A(M,K) · op(B)(K,N) + beta·C (+ bias row), row-major; op(B) = Bᵀ when trans_b (B
// stored (N,K)). beta is 0 or 1; bias (N) only with beta 0. M, N, K > 0. C is f32, or with c_type
// bf16 (beta 0 only) the fp32 result rounded to nearest even, as to_bf16 rounds. Type s8: A and B
// int8, C int32 (c_type s32, beta 0, no bias), exact; type u8 the same with A uint8. Safe to call from
// several threads at once (each runs the primitive on its own scratchpad; inside an OpenMP region
// it runs on the calling thread only). Throws std::bad_alloc when oneDNN cannot allocate, else
// fails.
void matmul(MatmulType type, bool trans_b, int M, int N, int K, const void* A, int lda,
            const void* B, int ldb, float beta, void* C, int ldc, const float* bias = nullptr,
            MatmulType c_type = MatmulType::f32);

// Weights that many products reuse unchanged (an inference engine's; a bf16 engine's per-update
// copy), kept in the blocked layout oneDNN's matmul kernels read B in, so that no call re-packs
// them: 1.1-1.7x on the MLM decoder at few rows, ~7 % on BERT-base's bf16 layers (docs/engine.md
// "Packed weights"). The layout depends on (type, K, N) only, not on M. Where oneDNN has no blocked
// kernel (an AVX2 machine) it is the plain layout and packing is a copy.
class PackedWeights {
public:
    explicit PackedWeights(MatmulType type) : type_(type) {}
    MatmulType type() const { return type_; }
    // Registers op(B)(K, N) stored at element `offset` of the buffer pack() reads: a kernel (K, N)
    // row-major, or with trans_b a matrix stored (N, K) (the tied MLM decoder's embeddings).
    void add(size_t offset, int K, int N, bool trans_b);
    // (Re)packs every registered matrix from src: float for f32, bf16 (ops::bf16) for bf16, int8
    // for s8.
    void pack(const void* src);
    // The packed op(B) registered at `offset`, or nullptr.
    const void* at(size_t offset) const;
    size_t bytes() const { return storage_.size(); }

private:
    struct Entry {
        size_t offset, at;
        int K, N;
        bool trans_b;
    };
    MatmulType type_;
    std::vector<Entry> entries_;
    std::unordered_map<size_t, size_t> index_;  // offset -> entries_
    AlignedVector<unsigned char> storage_;
};

// C(M,N) = A(M,K) · B(K,N) (+ bias row) with B = PackedWeights::at(..) of the same type and shape;
// C's type as matmul's.
void matmul_packed(MatmulType type, int M, int N, int K, const void* A, int lda, const void* packed_b,
                   void* C, int ldc, const float* bias = nullptr, MatmulType c_type = MatmulType::f32);

// oneDNN's implementation for a 64×64×64 matmul of this type ("brg:avx512_core_bf16", "ref:any"
// where it has no kernel), or "" when it refuses the type altogether.
std::string matmul_impl(MatmulType type);
// oneDNN runs on AVX2 with AVX-VNNI (its ISA avx2_vnni: Intel's client cores since Alder Lake, AMD
// Zen 5's VEX encoding, or a cap by ONEDNN_MAX_CPU_ISA=AVX2_VNNI): its int8 kernel ("gemm:jit",
// a name without "vnni") then multiplies on vpdpbusd, exact with 8-bit operands.
bool matmul_avx_vnni();

// Primitives held by the shared cache (bounded; the least recently used go first).
size_t cached_matmuls();

}  // namespace bertbench::ops
