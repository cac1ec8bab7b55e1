// GEMM wrapper (float: oneDNN dnnl_sgemm or a cached matmul primitive, double: OpenBLAS
// cblas_dgemm) and the dense layer.
#include "ops/gemm.hpp"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "core/error.hpp"
#include "ops/matmul.hpp"
#include "ops/parallel.hpp"

namespace bertbench::ops {

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {  // BLAS: C = beta·C (oneDNN 2.6 leaves C untouched)
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                float& c = C[static_cast<size_t>(i) * ldc + j];
                c = beta == 0.f ? 0.f : beta * c;
            }
        return;
    }
    // A transposed B with few rows of A (the MLM decoder's 20 positions per sequence against the
    // (30522, H) embedding table at batch 1-8; a backward dx at a few tokens): oneDNN's brgemm
    // matmul reads B where it lies, dnnl_sgemm packs all of it first. ops_micro's BM_GemmTransB
    // (Zen 5, 2 threads, N = 30522, K = 768): matmul / sgemm 1.79x at M = 20, 1.06x at M = 160,
    // 0.93x at M = 640; 2.1x at M = 128, N = 768, K = 3072. The attention's per-head products (B of
    // 8K values, single-threaded inside its parallel loop) are left to sgemm. Not trans_a, alpha 1
    // and beta 0/1 only: the matmul has no other epilogue.
    const bool big_b = static_cast<size_t>(N) * static_cast<size_t>(K) >= (size_t(1) << 20);
    if (trans_b && !trans_a && M <= 256 && big_b && alpha == 1.f && (beta == 0.f || beta == 1.f)) {
        matmul(MatmulType::f32, true, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    // A transposed A whose rows lie a multiple of 4 KiB apart (lda a multiple of 1,024 floats: the
    // demo's tied decoder, dE += dlogitsᵀ·t over its 4,096-piece vocabulary; the weight
    // gradients xᵀ·dy of 1,024- or 4,096-wide inputs): sgemm's reads down A's columns then fall on
    // few cache sets. So A is first copied with rows 64 bytes longer; the kernel and its order of
    // summation are sgemm's own either way, so C has the same bits
    // (Gemm.TransposedAWithAliasedRowsKeepsTheBits). `ops_micro --benchmark_filter=GemmTransA`
    // (Zen 3, AVX2, 2 threads): (M, N, K) = (4096, 128, 416) 40-45 -> 56-74 GFLOP/s with the
    // copy, (1024, 128, 416) 51-54 -> 70-72; rows 2 KiB apart (M = 512) gained nothing
    // measurable. Only for narrow products (N <= 512, where the gain was seen), outside parallel
    // regions, and while the copy stays <= 16 MiB (a scratch kept per thread).
    if (trans_a && lda % 1024 == 0 && M >= 256 && N <= 512 &&
        static_cast<size_t>(K) * (static_cast<size_t>(lda) + 16) <= (size_t(1) << 22) && !omp_in_parallel()) {
        thread_local std::vector<float> padded;
        const int ld = lda + 16;
        padded.resize(static_cast<size_t>(K) * ld);
        float* dst = padded.data();
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(K) * M))
        for (int k = 0; k < K; ++k)
            std::memcpy(dst + static_cast<size_t>(k) * ld, A + static_cast<size_t>(k) * lda,
                        static_cast<size_t>(M) * sizeof(float));
        A = dst;
        lda = ld;
    }
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                                        lda, B, ldb, beta, C, ldc);
    // It fails when its packing buffers cannot be allocated, or on invalid arguments (our bug).
    if (st == dnnl_out_of_memory) throw std::bad_alloc();
    if (st != dnnl_success)
        fail("internal error: dnnl_sgemm({}, {}, M={}, N={}, K={}, lda={}, ldb={}, ldc={}) "
             "returned status {}", trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, lda, ldb,
             ldc, static_cast<int>(st));
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
          const double* B, int ldb, double beta, double* C, int ldc) {
    if (M == 0 || N == 0) return;
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void bias_add(T* y, const T* b, int N, int C) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i) {
        T* row = y + static_cast<size_t>(i) * C;
        for (int c = 0; c < C; ++c) row[c] += b[c];
    }
}

template <typename T>
void bias_backward(T* db, const T* dy, int N, int C) {
    constexpr int kBlock = 64;
    const int nblocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(dynamic) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int blk = 0; blk < nblocks; ++blk) {
        const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
        T acc[kBlock] = {};
        for (int i = 0; i < N; ++i) {
            const T* row = dy + static_cast<size_t>(i) * C;
            for (int c = c0; c < c1; ++c) acc[c - c0] += row[c];
        }
        for (int c = c0; c < c1; ++c) db[c] += acc[c - c0];
    }
}

template <typename T>
void bias_rows(T* y, const T* b, int N, int C) {
#pragma omp parallel for schedule(static) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i) std::copy(b, b + C, y + static_cast<size_t>(i) * C);
}

template <typename T>
void linear_forward(T* y, const T* x, const T* w, const T* b, int N, int IN, int OUT) {
    if (N == 0) return;
    // Initialise y with the bias rows, then one GEMM with beta = 1.
    if (b) bias_rows(y, b, N, OUT);
    gemm(false, false, N, OUT, IN, T(1), x, IN, w, OUT, b ? T(1) : T(0), y, OUT);
}

template <typename T>
void linear_backward(T* dx, T* dw, T* db, const T* dy, const T* x, const T* w, int N, int IN,
                     int OUT, bool accumulate_dx) {
    if (N == 0) return;
    if (dx) gemm(false, true, N, IN, OUT, T(1), dy, OUT, w, OUT, accumulate_dx ? T(1) : T(0), dx, IN);
    if (dw) gemm(true, false, IN, OUT, N, T(1), x, IN, dy, OUT, T(1), dw, OUT);
    if (db) bias_backward(db, dy, N, OUT);
}

template void bias_rows<float>(float*, const float*, int, int);
template void bias_rows<double>(double*, const double*, int, int);
template void bias_add<float>(float*, const float*, int, int);
template void bias_add<double>(double*, const double*, int, int);
template void bias_backward<float>(float*, const float*, int, int);
template void bias_backward<double>(double*, const double*, int, int);
template void linear_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void linear_forward<double>(double*, const double*, const double*, const double*, int, int,
                                     int);
template void linear_backward<float>(float*, float*, float*, const float*, const float*,
                                     const float*, int, int, int, bool);
template void linear_backward<double>(double*, double*, double*, const double*, const double*,
                                      const double*, int, int, int, bool);

}  // namespace bertbench::ops
