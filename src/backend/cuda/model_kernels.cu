// The CUDA backend's kernels for the model's ops beyond the elementwise and row kernels of
// kernels.cu (declared in kernels.cuh): transposes, row gathers and scatters, the bf16 loss
// gradient, the span loss. First versions written for exactness: sums over rows run in row order
// (a thread per column), so the scatter-add and the column sums do not depend on the launch shape.
#include <cmath>

#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.cuh"

namespace bertbench::backend::cuda {
using namespace detail;
namespace {

__global__ void k_transpose_bf16(uint16_t* dst, const uint16_t* src, int rows, int cols, int ld) {
    const size_t n = static_cast<size_t>(rows) * cols;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const size_t c = i / rows, r = i % rows;  // dst(c, r), consecutive threads along r
        dst[i] = src[r * ld + c];
    }
}

template <typename V>  // float activations, uint8_t dropout masks
__global__ void k_gather_rows(V* dst, const V* src, const int32_t* rows, int R, int C) {
    const size_t n = static_cast<size_t>(R) * C;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = src[static_cast<size_t>(rows[i / C]) * C + i % C];
}

template <typename V>
void launch_gather_rows(cudaStream_t st, V* dst, const V* src, const int32_t* rows, int R, int C) {
    const size_t n = static_cast<size_t>(R) * C;
    if (!n) return;
    launch_kernel(k_gather_rows<V>, grid_for(n), kThreads, 0, st, dst, src, rows, R, C);
    after_launch();
}

__global__ void k_scatter_add_rows(float* dst, const float* src, const int32_t* rows, int R, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int r = 0; r < R; ++r) dst[static_cast<size_t>(rows[r]) * C + c] += src[static_cast<size_t>(r) * C + c];
}

__global__ void k_bias_rows(float* y, const float* b, int N, int C, bool add) {
    const size_t n = static_cast<size_t>(N) * C;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        y[i] = add ? y[i] + b[i % C] : b[i % C];
}

__global__ void k_ce_backward_bf16(uint16_t* dlb, const float* logits, const float* lse, const int32_t* labels,
                                   const float* coef, int V) {
    const size_t row = static_cast<size_t>(blockIdx.x) * V;
    const float c = coef[blockIdx.x], l = lse[blockIdx.x];
    const int label = labels[blockIdx.x];
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float d = expf(logits[row + j] - l) * c;
        dlb[row + j] = bf16_bits(j == label ? d - c : d);
    }
}

__global__ void k_ce_bias_grad(float* db, const float* logits, const float* lse, const int32_t* labels,
                               const float* coef, int R, int V) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= V) return;
    float s = 0.f;
    for (int r = 0; r < R; ++r) {
        const float d = expf(logits[static_cast<size_t>(r) * V + j] - lse[r]) * coef[r];
        s += labels[r] == j ? d - coef[r] : d;
    }
    db[j] += s;
}

__global__ void k_segment_ce(double* loss, float* dz, int dzs, const float* z, int zs, const int32_t* offsets,
                             const int32_t* labels, float coef) {
    __shared__ float sh[32];
    const int b = blockIdx.x, o = offsets[b], n = offsets[b + 1] - o;
    if (labels[b] < 0 || labels[b] >= n) {  // tf.one_hot's all-zero row: no loss, no gradient
        if (threadIdx.x == 0) loss[b] = 0;
        for (int i = threadIdx.x; dz && i < n; i += blockDim.x) dz[static_cast<size_t>(o + i) * dzs] = 0.f;
        return;
    }
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, z[static_cast<size_t>(o + i) * zs]);
    mx = block_max(mx, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += expf(z[static_cast<size_t>(o + i) * zs] - mx);
    s = block_sum(s, sh);
    const float lse = mx + logf(s);
    if (threadIdx.x == 0)  // in double from mx and s, as ops::loss_from_sum
        loss[b] = (static_cast<double>(mx) - static_cast<double>(z[static_cast<size_t>(o + labels[b]) * zs])) +
                  log(static_cast<double>(s));
    if (!dz) return;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = coef * expf(z[static_cast<size_t>(o + i) * zs] - lse);
        dz[static_cast<size_t>(o + i) * dzs] = i == labels[b] ? d - coef : d;
    }
}

__global__ void k_strided_copy(float* dst, const float* src, size_t n, int stride) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = src[i * stride];
}

unsigned columns(int C) { return static_cast<unsigned>((C + kThreads - 1) / kThreads); }

}  // namespace

void transpose_bf16(cudaStream_t st, uint16_t* dst, const uint16_t* src, int rows, int cols, int ld) {
    const size_t n = static_cast<size_t>(rows) * cols;
    if (!n) return;
    launch_kernel(k_transpose_bf16, grid_for(n), kThreads, 0, st, dst, src, rows, cols, ld);
    after_launch();
}

void gather_rows(cudaStream_t st, float* dst, const float* src, const int32_t* rows, int R, int C) {
    launch_gather_rows(st, dst, src, rows, R, C);
}

void gather_mask_rows(cudaStream_t st, uint8_t* dst, const uint8_t* src, const int32_t* rows, int R, int C) {
    launch_gather_rows(st, dst, src, rows, R, C);
}

void scatter_add_rows(cudaStream_t st, float* dst, const float* src, const int32_t* rows, int R, int C) {
    if (R <= 0 || C <= 0) return;
    launch_kernel(k_scatter_add_rows, columns(C), kThreads, 0, st, dst, src, rows, R, C);
    after_launch();
}

void bias_rows(cudaStream_t st, float* y, const float* b, int N, int C) {
    const size_t n = static_cast<size_t>(N) * C;
    if (!n) return;
    launch_kernel(k_bias_rows, grid_for(n), kThreads, 0, st, y, b, N, C, false);
    after_launch();
}

void bias_add(cudaStream_t st, float* y, const float* b, int N, int C) {
    const size_t n = static_cast<size_t>(N) * C;
    if (!n) return;
    launch_kernel(k_bias_rows, grid_for(n), kThreads, 0, st, y, b, N, C, true);
    after_launch();
}

void cross_entropy_backward_bf16(cudaStream_t st, uint16_t* dlb, float* db, const float* logits, const float* lse,
                                 const int32_t* labels, const float* coef, int R, int V) {
    if (R <= 0 || V <= 0) return;
    launch_kernel(k_ce_backward_bf16, R, kThreads, 0, st, dlb, logits, lse, labels, coef, V);
    after_launch();
    launch_kernel(k_ce_bias_grad, columns(V), kThreads, 0, st, db, logits, lse, labels, coef, R, V);
    after_launch();
}

void segment_cross_entropy(cudaStream_t st, double* loss, float* dz, int dz_stride, const float* z, int z_stride,
                           const int32_t* offsets, const int32_t* labels, int B, float coef) {
    if (B <= 0) return;
    launch_kernel(k_segment_ce, B, kThreads, 0, st, loss, dz, dz_stride, z, z_stride, offsets, labels, coef);
    after_launch();
}

void strided_copy(cudaStream_t st, float* dst, const float* src, size_t n, int stride) {
    if (!n) return;
    launch_kernel(k_strided_copy, grid_for(n), kThreads, 0, st, dst, src, n, stride);
    after_launch();
}

}  // namespace bertbench::backend::cuda
