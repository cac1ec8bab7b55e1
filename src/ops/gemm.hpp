// GEMM and the dense (linear) layer on top of it. Row-major throughout; kernels stored [in, out]
// as in TensorFlow, so y = x·W + b needs no transpose. float -> oneDNN's dnnl_sgemm, double ->
// OpenBLAS's cblas_dgemm. Both are OpenMP builds: they use the omp pool (omp_set_num_threads)
// outside a parallel region and 1 thread inside one.
#pragma once

#include <span>

namespace bertbench::ops {

// C(M,N) = alpha · op(A)(M,K) · op(B)(K,N) + beta · C, row-major with leading dimensions.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc);
void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc);

// Dense layer. Legend: N rows (tokens), IN, OUT features.
// forward:  y(N,OUT) = x(N,IN) · w(IN,OUT) + b(OUT)            (y overwritten)
// backward: dx(N,IN) = dy · wᵀ (overwritten, or += if accumulate_dx; skipped if dx is null)
//           dw(IN,OUT) += xᵀ · dy ;  db(OUT) += Σ_rows dy
template <typename T>
void linear_forward(T* y, const T* x, const T* w, const T* b, int N, int IN, int OUT);
template <typename T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int N, int IN,
                     int OUT, bool accumulate_dx = false);

// db(C) += Σ_rows dy(N,C): column blocks in parallel, rows summed in order (deterministic for any
// thread count).
template <typename T>
void bias_backward(T* db, const T* dy, int N, int C);
// y(N,C) = b(C) in every row
template <typename T>
void bias_rows(T* y, const T* b, int N, int C);
// y(N,C) += b(C)
template <typename T>
void bias_add(T* y, const T* b, int N, int C);

}  // namespace bertbench::ops
