// The CUDA backend's optimizer kernels (declared in kernels.cuh), each the CPU op of the same name
// (ops/optimizer.hpp): a block per chunk; sums over a chunk in double with a fixed block-tree
// order, over a tensor in chunk order (a thread per tensor), so the results do not depend on
// timing. Not yet run on a GPU.
#include <cmath>

#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.cuh"

namespace bertbench::backend::cuda {
using namespace detail;
namespace {

// The sum over the block in double, in a fixed tree order; thread 0 gets it.
__device__ double block_sum_double(double v, double* sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    return sh[0];
}

__global__ void k_chunk_sum_squares(double* partial, const float* x, const OptimChunk* chunks) {
    __shared__ double sh[kThreads];
    const OptimChunk c = chunks[blockIdx.x];
    double s = 0;
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) s += double(x[i]) * x[i];
    s = block_sum_double(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void k_chunk_accumulate(float* acc, const float* g, const OptimChunk* chunks,
                                   float scale, float n) {
    const OptimChunk c = chunks[blockIdx.x];
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
        acc[i] = __fadd_rn(acc[i], __fdiv_rn(__fmul_rn(g[i], scale), n));
}

__global__ void k_scale_values(float* x, size_t n, float s, int32_t* nonfinite) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
         i += size_t(gridDim.x) * blockDim.x) {
        if (nonfinite && !isfinite(x[i])) atomicOr(nonfinite, 1);
        x[i] = __fmul_rn(x[i], s);
    }
}

// m, v <- new moments; returns m̂ / (√v̂ + eps) (LAMB) or m / (√v + eps) (AdamW: bc 1).
__device__ __forceinline__ float moments(float& m, float& v, float g, const OptimConstants& k) {
    m = __fadd_rn(__fmul_rn(m, k.b1), __fmul_rn(g, k.one_minus_b1));
    v = __fadd_rn(__fmul_rn(v, k.b2), __fmul_rn(__fmul_rn(g, g), k.one_minus_b2));
    return __fdiv_rn(__fdiv_rn(m, k.bc1), __fadd_rn(__fsqrt_rn(__fdiv_rn(v, k.bc2)), k.eps));
}

// LAMB pass 1: moments; the fused update where the tensor has no adaptation (r = 1), else Σw², Σu²
// of the chunk. The decay term only where the tensor has decay.
__global__ void k_lamb_moments(float* w, float* m, float* v, const float* g,
                               const OptimChunk* chunks, const uint8_t* decay, const uint8_t* adapt,
                               float grad_scale, float lr, OptimConstants k, double* pw2, double* pu2) {
    __shared__ double sh[kThreads];
    const OptimChunk c = chunks[blockIdx.x];
    const bool adapted = adapt[c.tensor] != 0, decayed = decay[c.tensor] != 0;
    const float wd = decayed ? k.wd : 0.f;
    double w2 = 0, u2 = 0;
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
        float u = moments(m[i], v[i], __fmul_rn(g[i], grad_scale), k);
        if (!adapted) {
            if (decayed) u = __fadd_rn(u, __fmul_rn(wd, w[i]));
            w[i] = __fsub_rn(w[i], __fmul_rn(lr, u));
            continue;
        }
        u = __fadd_rn(u, __fmul_rn(wd, w[i]));
        w2 += double(w[i]) * w[i];
        u2 += double(u) * u;
    }
    if (!adapted) return;  // the whole block takes this branch
    w2 = block_sum_double(w2, sh);
    if (threadIdx.x == 0) pw2[blockIdx.x] = w2;
    __syncthreads();
    u2 = block_sum_double(u2, sh);
    if (threadIdx.x == 0) pu2[blockIdx.x] = u2;
}

__global__ void k_lamb_ratios(float* ratios, const double* pw2, const double* pu2, const size_t* first,
                              const uint8_t* adapt, size_t tensors) {
    const size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (t >= tensors) return;
    if (!adapt[t]) {
        ratios[t] = 1.f;
        return;
    }
    double w2 = 0, u2 = 0;
    for (size_t c = first[t]; c < first[t + 1]; ++c) {
        w2 += pw2[c];
        u2 += pu2[c];
    }
    const float wn = static_cast<float>(sqrt(w2)), un = static_cast<float>(sqrt(u2));
    ratios[t] = wn > 0.f ? (un > 0.f ? __fdiv_rn(wn, un) : 1.f) : 1.f;
}

__global__ void k_lamb_apply(float* w, const float* m, const float* v, const OptimChunk* chunks,
                             const uint8_t* decay, const uint8_t* adapt, const float* ratios, float lr,
                             OptimConstants k) {
    const OptimChunk c = chunks[blockIdx.x];
    if (!adapt[c.tensor]) return;
    const float step = __fmul_rn(ratios[c.tensor], lr);
    const float wd = decay[c.tensor] ? k.wd : 0.f;
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
        const float u = __fadd_rn(
            __fdiv_rn(__fdiv_rn(m[i], k.bc1), __fadd_rn(__fsqrt_rn(__fdiv_rn(v[i], k.bc2)), k.eps)),
            __fmul_rn(wd, w[i]));
        w[i] = __fsub_rn(w[i], __fmul_rn(step, u));
    }
}

__global__ void k_adamw(float* w, float* m, float* v, const float* g, const OptimChunk* chunks,
                        const uint8_t* decay, float grad_scale, float lr, OptimConstants k) {
    const OptimChunk c = chunks[blockIdx.x];
    const float wd = decay[c.tensor] ? k.wd : 0.f;
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
        const float u = __fadd_rn(moments(m[i], v[i], __fmul_rn(g[i], grad_scale), k), __fmul_rn(wd, w[i]));
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, u));
    }
}

// Keras AdamWeightDecay: the decoupled decay (tensors with decay, wd != 0), then ResourceApplyAdam.
__global__ void k_keras_adam(float* w, float* m, float* v, const float* g, const OptimChunk* chunks,
                             const uint8_t* decay, float grad_scale, float lr, KerasConstants k) {
    const OptimChunk c = chunks[blockIdx.x];
    const bool decayed = decay[c.tensor] != 0 && k.wd != 0.f;
    for (size_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
        float wi = w[i];
        if (decayed) wi = __fsub_rn(wi, __fmul_rn(__fmul_rn(lr, wi), k.wd));
        const float gi = __fmul_rn(g[i], grad_scale);
        const float mi = __fadd_rn(m[i], __fmul_rn(__fsub_rn(gi, m[i]), k.one_minus_b1));
        const float vi = __fadd_rn(v[i], __fmul_rn(__fsub_rn(__fmul_rn(gi, gi), v[i]), k.one_minus_b2));
        m[i] = mi;
        v[i] = vi;
        w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(mi, k.alpha), __fadd_rn(__fsqrt_rn(vi), k.eps)));
    }
}

}  // namespace

void chunk_sum_squares(cudaStream_t st, double* partial, const float* x, const OptimTable& t) {
    if (!t.num_chunks) return;
    launch_kernel(k_chunk_sum_squares, static_cast<unsigned>(t.num_chunks), kThreads, 0, st, partial, x, t.chunks);
    after_launch();
}

void chunk_accumulate(cudaStream_t st, float* acc, const float* g, const OptimTable& t, float scale,
                      float n) {
    if (!t.num_chunks) return;
    launch_kernel(k_chunk_accumulate, static_cast<unsigned>(t.num_chunks), kThreads, 0, st, acc, g, t.chunks, scale,
                  n);
    after_launch();
}

void scale_values(cudaStream_t st, float* x, size_t n, float s, int32_t* nonfinite) {
    if (nonfinite) cudaMemsetAsync(nonfinite, 0, sizeof(int32_t), st);
    if (n) launch_kernel(k_scale_values, grid_for(n), kThreads, 0, st, x, n, s, nonfinite);
    after_launch();
}

void lamb_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t,
                 float grad_scale, float lr, const OptimConstants& k, double* partials,
                 float* ratios) {
    if (!t.num_chunks) return;
    const unsigned chunks = static_cast<unsigned>(t.num_chunks);
    double* pw2 = partials;
    double* pu2 = partials + t.num_chunks;
    const uint8_t* adapt = t.adapt ? t.adapt : t.decay;
    launch_kernel(k_lamb_moments, chunks, kThreads, 0, st, w, m, v, g, t.chunks, t.decay, adapt, grad_scale, lr,
                  k, pw2, pu2);
    launch_kernel(k_lamb_ratios, grid_for(t.num_tensors), kThreads, 0, st, ratios, pw2, pu2, t.first_chunk, adapt,
                  t.num_tensors);
    launch_kernel(k_lamb_apply, chunks, kThreads, 0, st, w, m, v, t.chunks, t.decay, adapt, ratios, lr, k);
    after_launch();
}

void adamw_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t,
                  float grad_scale, float lr, const OptimConstants& k) {
    if (!t.num_chunks) return;
    launch_kernel(k_adamw, static_cast<unsigned>(t.num_chunks), kThreads, 0, st, w, m, v, g, t.chunks, t.decay,
                  grad_scale, lr, k);
    after_launch();
}

void keras_adam_update(cudaStream_t st, float* w, float* m, float* v, const float* g, const OptimTable& t,
                       float grad_scale, float lr, const KerasConstants& k) {
    if (!t.num_chunks) return;
    launch_kernel(k_keras_adam, static_cast<unsigned>(t.num_chunks), kThreads, 0, st, w, m, v, g, t.chunks, t.decay,
                  grad_scale, lr, k);
    after_launch();
}

}  // namespace bertbench::backend::cuda
