// oneDNN matmul primitives of fixed shapes (its brgemm kernels; a runtime-sized matmul falls back
// to slower ones), created once per shape and kept in a bounded process-wide cache. The bf16 GEMM
// (bf16.hpp) runs on them, and so does the float GEMM (gemm.hpp) where they beat dnnl_sgemm: a
// transposed B with few rows of A (the MLM decoder at small batches, docs/engine.md).
#pragma once

#include <cstddef>
#include <string>

namespace bertbench::ops {

// The operand type of A and B; C, bias and accumulation are always f32.
enum class MatmulType { f32, bf16 };

// C(M,N) = A(M,K) · op(B)(K,N) + beta·C (+ bias row), row-major; op(B) = Bᵀ when trans_b (B
// stored (N,K)). beta is 0 or 1; bias (N) only with beta 0. M, N, K > 0. Safe to call from several
// threads at once (each runs the primitive on its own scratchpad; inside an OpenMP region it runs
// on the calling thread only). Throws std::bad_alloc when oneDNN cannot allocate, else fails.
void matmul(MatmulType type, bool trans_b, int M, int N, int K, const void* A, int lda,
            const void* B, int ldb, float beta, float* C, int ldc, const float* bias = nullptr);

// oneDNN's implementation for a 64×64×64 matmul of this type ("brg:avx512_core_bf16", "ref:any"
// where it has no kernel), or "" when it refuses the type altogether.
std::string matmul_impl(MatmulType type);

// Primitives held by the shared cache (bounded; the least recently used go first).
size_t cached_matmuls();

}  // namespace bertbench::ops
