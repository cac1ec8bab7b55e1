// The CUDA backend's kernels (declared, with their contract, in kernels.cuh). Straightforward
// first versions, written for exactness against the CPU ops: a block per row for the row ops, a
// grid-stride loop for the elementwise ones, column sums in an order fixed by the matrix's shape
// (so dgamma, dbeta and db do not depend on the GPU or the launch), a thread per column for the
// embedding gradients (tokens in order: the CPU's bits).
#include <cmath>

#include "backend/cuda/device.cuh"
#include "backend/cuda/kernels.cuh"

namespace bertbench::backend::cuda {
using namespace detail;
namespace {

__device__ __forceinline__ float act_value(Act a, float x) {
    if (a == 0) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    if (a == 1) return 0.5f * x * (1.f + erff(x * 0.7071067811865476f));
    return x > 0.f ? x : 0.f;
}

__device__ __forceinline__ float act_derivative(Act a, float x) {
    if (a == 0) {
        const float s = 0.7978845608028654f;
        const float t = tanhf(s * (x + 0.044715f * x * x * x));
        return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * s * (1.f + 3.f * 0.044715f * x * x);
    }
    if (a == 1)
        return 0.5f * (1.f + erff(x * 0.7071067811865476f)) + x * expf(-0.5f * x * x) * 0.3989422804014327f;
    return x > 0.f ? 1.f : 0.f;
}

__global__ void k_to_bf16(uint16_t* dst, const float* src, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dst[i] = bf16_bits(src[i]);
}

// db(C) += Σ_rows f(r·C + c, r), in two kernels. The first sums segments of kSegmentRows rows: a
// block of 32 columns x 8 lanes (a warp per lane, so each row's 32 values are one read), lane l
// taking the segment's rows l, l + 8, ..., the lanes then added in order, one partial sum per
// (segment, column); the second adds each column's partial sums in segment order. The order
// depends only on the rows and columns, so the sums have the same bits on every GPU. (A thread
// per column with every row in turn left most SMs idle: ~35 % of a BERT-large training step on an
// H100, docs/PERFORMANCE-gpu.md.)
constexpr int kSegmentRows = 128, kSumColumns = 32, kSumLanes = kThreads / kSumColumns;

template <typename F>
__global__ void k_column_partial(float* part, int rows, int C, int tiles, F f) {
    __shared__ float sh[kSumLanes][kSumColumns];
    const int tile = blockIdx.x % tiles, seg = blockIdx.x / tiles;
    const int col = threadIdx.x % kSumColumns, lane = threadIdx.x / kSumColumns, c = tile * kSumColumns + col;
    const int end = min(rows, (seg + 1) * kSegmentRows);
    float s = 0.f;
    if (c < C)
        for (int r = seg * kSegmentRows + lane; r < end; r += kSumLanes) s += f(static_cast<size_t>(r) * C + c, r);
    sh[lane][col] = s;
    __syncthreads();
    if (lane == 0 && c < C) {
        for (int l = 1; l < kSumLanes; ++l) s += sh[l][col];
        part[static_cast<size_t>(seg) * C + c] = s;
    }
}

__global__ void k_column_finish(float* db, const float* part, int segments, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.f;
    for (int g = 0; g < segments; ++g) s += part[static_cast<size_t>(g) * C + c];
    db[c] += s;
}

struct Plain {
    const float* v;
    __device__ float operator()(size_t i, int) const { return v[i]; }
};
struct ActGrad {
    Act a;
    const float *dy, *x;
    __device__ float operator()(size_t i, int) const { return dy[i] * act_derivative(a, x[i]); }
};
struct DropGrad {
    const float* dy;
    const uint8_t* mask;
    float scale;
    __device__ float operator()(size_t i, int) const { return mask ? (mask[i] ? dy[i] * scale : 0.f) : dy[i]; }
};
struct NormGrad {  // dgamma's terms: dy · x̂
    const float *dy, *x, *mean, *rstd;
    __device__ float operator()(size_t i, int r) const { return dy[i] * (x[i] - mean[r]) * rstd[r]; }
};

template <typename F>
void column_sum(cudaStream_t st, float* db, size_t n, int C, F f) {
    if (!db || C <= 0 || n == 0) return;
    const int rows = static_cast<int>(n / C), tiles = (C + kSumColumns - 1) / kSumColumns;
    const int segments = (rows + kSegmentRows - 1) / kSegmentRows;
    float* part = nullptr;
    if (const cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&part), sizeof(float) * segments * C, st);
        e != cudaSuccess) {
        if (g_last == cudaSuccess) g_last = e;
        return;
    }
    launch_kernel(k_column_partial<F>, static_cast<unsigned>(tiles * segments), kThreads, 0, st, part, rows, C, tiles,
                  f);
    after_launch();
    launch_kernel(k_column_finish, (C + kThreads - 1) / kThreads, kThreads, 0, st, db, static_cast<const float*>(part),
                  segments, C);
    after_launch();
    cudaFreeAsync(part, st);
}

__global__ void k_layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                                    const float* beta, int C, float eps, uint16_t* yb) {
    __shared__ float sh[32];
    const size_t row = static_cast<size_t>(blockIdx.x) * C;
    float s = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += x[row + c];
    const float m = block_sum(s, sh) / static_cast<float>(C);
    float v = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) v += (x[row + c] - m) * (x[row + c] - m);
    const float r = 1.f / sqrtf(block_sum(v, sh) / static_cast<float>(C) + eps);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float o = (x[row + c] - m) * r * gamma[c] + beta[c];
        if (y) y[row + c] = o;
        if (yb) yb[row + c] = bf16_bits(o);
    }
    if (threadIdx.x == 0) mean[blockIdx.x] = m, rstd[blockIdx.x] = r;
}

__global__ void k_layernorm_dx(float* dx, const float* dy, const float* x, const float* gamma, const float* mean,
                               const float* rstd, int C, bool accumulate) {
    __shared__ float sh[32];
    const size_t row = static_cast<size_t>(blockIdx.x) * C;
    const float m = mean[blockIdx.x], r = rstd[blockIdx.x];
    float sg = 0.f, sgx = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float g = dy[row + c] * gamma[c];
        sg += g;
        sgx += g * (x[row + c] - m) * r;
    }
    sg = block_sum(sg, sh) / static_cast<float>(C);
    sgx = block_sum(sgx, sh) / static_cast<float>(C);
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float xhat = (x[row + c] - m) * r;
        const float d = r * (dy[row + c] * gamma[c] - sg - xhat * sgx);
        dx[row + c] = accumulate ? dx[row + c] + d : d;
    }
}

__global__ void k_activation_forward(Act a, float* y, const float* x, size_t n, uint16_t* yb) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float o = act_value(a, x[i]);
        if (y) y[i] = o;
        if (yb) yb[i] = bf16_bits(o);
    }
}

__global__ void k_activation_backward(Act a, float* dx, const float* dy, const float* x, size_t n, uint16_t* dxb) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float d = dy[i] * act_derivative(a, x[i]);
        if (dx) dx[i] = d;
        if (dxb) dxb[i] = bf16_bits(d);
    }
}

__global__ void k_tanh_forward(float* y, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        y[i] = tanhf(y[i]);
}

__global__ void k_tanh_backward(float* dx, const float* dy, const float* y, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        dx[i] = dy[i] * (1.f - y[i] * y[i]);
}

__global__ void k_softmax_forward(float* p, const float* s, int C, float scale) {
    __shared__ float sh[32];
    const size_t row = static_cast<size_t>(blockIdx.x) * C;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, s[row + c]);
    m = block_max(m, sh) * scale;
    float sum = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float e = expf(s[row + c] * scale - m);
        p[row + c] = e;
        sum += e;
    }
    const float inv = 1.f / block_sum(sum, sh);
    for (int c = threadIdx.x; c < C; c += blockDim.x) p[row + c] *= inv;
}

__global__ void k_softmax_backward(float* ds, const float* dp, const float* p, int C) {
    __shared__ float sh[32];
    const size_t row = static_cast<size_t>(blockIdx.x) * C;
    float dot = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dot += dp[row + c] * p[row + c];
    dot = block_sum(dot, sh);
    for (int c = threadIdx.x; c < C; c += blockDim.x) ds[row + c] = p[row + c] * (dp[row + c] - dot);
}

__global__ void k_dropout_mask(uint8_t* mask, Philox s, size_t n) {
    const size_t blocks = (n + 3) / 4;
    for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < blocks; b += size_t(gridDim.x) * blockDim.x) {
        const uint4 w = philox_block(s.seed, s.step, s.site, b);
        const uint32_t words[4] = {w.x, w.y, w.z, w.w};
        for (int j = 0; j < 4 && 4 * b + j < n; ++j) mask[4 * b + j] = (words[j] >> 8) < s.threshold ? 1 : 0;
    }
}

__global__ void k_dropout_add(float* y, const float* x, const uint8_t* mask, float scale, const float* residual,
                              size_t n, uint16_t* yb) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        float v = mask ? (mask[i] ? x[i] * scale : 0.f) : x[i];
        if (residual) v = v + residual[i];
        y[i] = v;
        if (yb) yb[i] = bf16_bits(v);
    }
}

__global__ void k_dropout_backward(float* dx, const float* dy, const uint8_t* mask, float scale, size_t n,
                                   uint16_t* dxb) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float d = mask ? (mask[i] ? dy[i] * scale : 0.f) : dy[i];
        if (dx) dx[i] = d;
        if (dxb) dxb[i] = bf16_bits(d);
    }
}

__global__ void k_embedding_forward(float* e, const float* word, const float* pos, const float* type,
                                    const int32_t* ids, const int32_t* segments, const int32_t* offsets, int H) {
    const int b = blockIdx.x;
    for (int i = offsets[b]; i < offsets[b + 1]; ++i) {
        const float* w = word + static_cast<size_t>(ids[i]) * H;
        const float* p = pos + static_cast<size_t>(i - offsets[b]) * H;
        const float* t = type + static_cast<size_t>(segments[i]) * H;
        float* o = e + static_cast<size_t>(i) * H;
        for (int c = threadIdx.x; c < H; c += blockDim.x) o[c] = w[c] + p[c] + t[c];
    }
}

// A thread per column adds every token's gradient in token order: the CPU's order, so its bits.
__global__ void k_embedding_backward(float* dword, float* dpos, float* dtype, const float* de, const int32_t* ids,
                                     const int32_t* segments, const int32_t* offsets, int B, int H) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= H) return;
    for (int b = 0; b < B; ++b) {
        for (int i = offsets[b]; i < offsets[b + 1]; ++i) {
            const float d = de[static_cast<size_t>(i) * H + c];
            dword[static_cast<size_t>(ids[i]) * H + c] += d;
            dpos[static_cast<size_t>(i - offsets[b]) * H + c] += d;
            dtype[static_cast<size_t>(segments[i]) * H + c] += d;
        }
    }
}

// loss = lse − z[label] (in double from the max and Σ), argmax (first of the maxima),
// lse = max + log Σ exp(z − max)
__global__ void k_cross_entropy_forward(double* loss, int32_t* argmax, float* lse, const float* logits,
                                        const int32_t* labels, int V) {
    __shared__ float shv[32];
    __shared__ int shi[32];
    __shared__ float sh[32];
    const size_t row = static_cast<size_t>(blockIdx.x) * V;
    float best = -INFINITY;
    int at = V;
    for (int c = threadIdx.x; c < V; c += blockDim.x) {
        const float z = logits[row + c];
        if (z > best || at == V) best = z, at = c;  // ascending c per thread: keeps the first
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, at, o);
        if (ov > best || (ov == best && oi < at)) best = ov, at = oi;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) shv[w] = best, shi[w] = at;
    __syncthreads();
    if (w == 0) {
        best = lane < nw ? shv[lane] : -INFINITY;
        at = lane < nw ? shi[lane] : V;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, o);
            const int oi = __shfl_xor_sync(0xffffffffu, at, o);
            if (ov > best || (ov == best && oi < at)) best = ov, at = oi;
        }
        if (lane == 0) shv[0] = best, shi[0] = at;
    }
    __syncthreads();
    const float m = shv[0];
    const int arg = shi[0];
    float s = 0.f;
    for (int c = threadIdx.x; c < V; c += blockDim.x) s += expf(logits[row + c] - m);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        const float l = m + logf(s);
        lse[blockIdx.x] = l;
        argmax[blockIdx.x] = arg;
        // (m − z) + log(s) in double, as ops::loss_from_sum (not l − z: l is rounded at m's size)
        loss[blockIdx.x] = (static_cast<double>(m) - static_cast<double>(logits[row + labels[blockIdx.x]])) +
                           log(static_cast<double>(s));
    }
}

__global__ void k_cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                                         const int32_t* labels, const float* coef, int V) {
    const size_t row = static_cast<size_t>(blockIdx.x) * V;
    const float c = coef[blockIdx.x], l = lse[blockIdx.x];
    const int label = labels[blockIdx.x];
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float d = expf(logits[row + j] - l) * c;
        dlogits[row + j] = j == label ? d - c : d;
    }
}

// Block per (b, h): rows i in turn; threads over the keys j for the scores, over the channels d
// for ctx. scores go into probs (the row's slice), softmaxed in place. In: float, or uint16_t for
// bf16 inputs (the products are fp32 either way).
template <typename In>
__global__ void k_attention_forward(float* ctx, float* probs, uint8_t* mask, const In* q, const In* k,
                                    const In* v, AttnShape s, Philox drop, bool has_drop, float inv_keep) {
    __shared__ float sh[32];
    const int b = blockIdx.x / s.NH, h = blockIdx.x % s.NH, H = s.NH * s.HS, HS = s.HS;
    const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.key_lengths ? s.key_lengths[b] : t;
    const float scale = 1.f / sqrtf(static_cast<float>(HS));
    const size_t base = s.prob_offsets[b] + static_cast<size_t>(h) * t * kn;
    for (int i = 0; i < t; ++i) {
        float* p = probs + base + static_cast<size_t>(i) * kn;
        const In* qi = q + static_cast<size_t>(o + i) * H + h * HS;
        float m = -INFINITY;
        for (int j = threadIdx.x; j < kn; j += blockDim.x) {
            const In* kj = k + static_cast<size_t>(o + j) * H + h * HS;
            float dot = 0.f;
            for (int d = 0; d < HS; ++d) dot += val(qi[d]) * val(kj[d]);
            p[j] = dot;
            m = fmaxf(m, dot);
        }
        m = block_max(m, sh) * scale;
        float sum = 0.f;
        for (int j = threadIdx.x; j < kn; j += blockDim.x) {
            const float e = expf(p[j] * scale - m);
            p[j] = e;
            sum += e;
        }
        const float inv = 1.f / block_sum(sum, sh);
        for (int j = threadIdx.x; j < kn; j += blockDim.x) {
            p[j] *= inv;
            if (has_drop) mask[base + static_cast<size_t>(i) * kn + j] = keep_element(drop, base + static_cast<size_t>(i) * kn + j);
        }
        __syncthreads();  // the row of p (and mask) complete before ctx reads it
        const uint8_t* mi = has_drop ? mask + base + static_cast<size_t>(i) * kn : nullptr;
        for (int d = threadIdx.x; d < HS; d += blockDim.x) {
            float acc = 0.f;
            for (int j = 0; j < kn; ++j) {
                const float pj = mi ? (mi[j] ? p[j] * inv_keep : 0.f) : p[j];
                acc += pj * val(v[static_cast<size_t>(o + j) * H + h * HS + d]);
            }
            ctx[static_cast<size_t>(o + i) * H + h * HS + d] = acc;
        }
    }
}

// Block per (b, h): dS row by row into dprobs, then dq by rows, dk and dv by key rows.
template <typename In>
__global__ void k_attention_backward(float* dq, float* dk, float* dv, float* dprobs, const In* dctx,
                                     const In* q, const In* k, const In* v, const float* probs,
                                     const uint8_t* mask, float inv_keep, AttnShape s) {
    __shared__ float sh[32];
    const int b = blockIdx.x / s.NH, h = blockIdx.x % s.NH, H = s.NH * s.HS, HS = s.HS;
    const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.key_lengths ? s.key_lengths[b] : t;
    const float scale = 1.f / sqrtf(static_cast<float>(HS));
    const size_t base = s.prob_offsets[b] + static_cast<size_t>(h) * t * kn;
    const auto at = [&](int row, int d) { return static_cast<size_t>(o + row) * H + h * HS + d; };
    for (int i = 0; i < t; ++i) {
        const size_t r = base + static_cast<size_t>(i) * kn;
        float dot = 0.f;
        for (int j = threadIdx.x; j < kn; j += blockDim.x) {
            float g = 0.f;  // dP'_ij = dctx_i · v_j, then through the dropout
            for (int d = 0; d < HS; ++d) g += val(dctx[at(i, d)]) * val(v[at(j, d)]);
            if (mask) g = mask[r + j] ? g * inv_keep : 0.f;
            dprobs[r + j] = g;
            dot += g * probs[r + j];
        }
        dot = block_sum(dot, sh);
        for (int j = threadIdx.x; j < kn; j += blockDim.x) dprobs[r + j] = probs[r + j] * (dprobs[r + j] - dot);
    }
    __syncthreads();
    for (int i = 0; i < t; ++i)
        for (int d = threadIdx.x; d < HS; d += blockDim.x) {
            float acc = 0.f;
            for (int j = 0; j < kn; ++j) acc += dprobs[base + static_cast<size_t>(i) * kn + j] * val(k[at(j, d)]);
            dq[at(i, d)] = scale * acc;
        }
    for (int j = 0; j < t; ++j)
        for (int d = threadIdx.x; d < HS; d += blockDim.x) {
            float gk = 0.f, gv = 0.f;
            if (j < kn) {  // rows that are no key get zero dk, dv
                for (int i = 0; i < t; ++i) {
                    const size_t e = base + static_cast<size_t>(i) * kn + j;
                    gk += dprobs[e] * val(q[at(i, d)]);
                    const float pv = mask ? (mask[e] ? probs[e] * inv_keep : 0.f) : probs[e];
                    gv += pv * val(dctx[at(i, d)]);
                }
            }
            dk[at(j, d)] = scale * gk;
            dv[at(j, d)] = gv;
        }
}

__global__ void k_bias_store(void* C, int ldc, bool c_bf16, const float* acc, int M, int N, const float* bias) {
    const size_t n = static_cast<size_t>(M) * N;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const size_t r = i / N, c = i % N;
        const float val = bias ? acc[i] + bias[c] : acc[i];
        if (c_bf16)
            static_cast<uint16_t*>(C)[r * ldc + c] = bf16_bits(val);
        else
            static_cast<float*>(C)[r * ldc + c] = val;
    }
}

}  // namespace

const char* last_launch_error() {
    const cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

void to_bf16(cudaStream_t st, uint16_t* dst, const float* src, size_t n) {
    if (!n) return;
    launch_kernel(k_to_bf16, grid_for(n), kThreads, 0, st, dst, src, n);
    after_launch();
}

void bias_backward(cudaStream_t st, float* db, const float* dy, int N, int C) {
    column_sum(st, db, static_cast<size_t>(N) * C, C, Plain{dy});
}

void layernorm_forward(cudaStream_t st, float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int N, int C, float eps, uint16_t* yb) {
    if (N <= 0) return;
    launch_kernel(k_layernorm_forward, N, kThreads, 0, st, y, mean, rstd, x, gamma, beta, C, eps, yb);
    after_launch();
}

void layernorm_backward(cudaStream_t st, float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int N, int C, bool accumulate_dx) {
    if (N <= 0) return;
    // the parameter gradients first: dx may alias dy
    column_sum(st, dgamma, static_cast<size_t>(N) * C, C, NormGrad{dy, x, mean, rstd});
    column_sum(st, dbeta, static_cast<size_t>(N) * C, C, Plain{dy});
    launch_kernel(k_layernorm_dx, N, kThreads, 0, st, dx, dy, x, gamma, mean, rstd, C, accumulate_dx);
    after_launch();
}

void activation_forward(cudaStream_t st, Act a, float* y, const float* x, size_t n, uint16_t* yb) {
    if (!n) return;
    launch_kernel(k_activation_forward, grid_for(n), kThreads, 0, st, a, y, x, n, yb);
    after_launch();
}

void activation_backward(cudaStream_t st, Act a, float* dx, const float* dy, const float* x, size_t n,
                         uint16_t* dxb, BiasSum bg) {
    if (!n) return;
    column_sum(st, bg.db, n, bg.C, ActGrad{a, dy, x});  // before dx: dx may alias dy
    launch_kernel(k_activation_backward, grid_for(n), kThreads, 0, st, a, dx, dy, x, n, dxb);
    after_launch();
}

void tanh_forward(cudaStream_t st, float* y, size_t n) {
    if (!n) return;
    launch_kernel(k_tanh_forward, grid_for(n), kThreads, 0, st, y, n);
    after_launch();
}

void tanh_backward(cudaStream_t st, float* dx, const float* dy, const float* y, size_t n) {
    if (!n) return;
    launch_kernel(k_tanh_backward, grid_for(n), kThreads, 0, st, dx, dy, y, n);
    after_launch();
}

void softmax_forward(cudaStream_t st, float* p, const float* s, int R, int C, float scale) {
    if (R <= 0) return;
    launch_kernel(k_softmax_forward, R, kThreads, 0, st, p, s, C, scale);
    after_launch();
}

void softmax_backward(cudaStream_t st, float* ds, const float* dp, const float* p, int R, int C) {
    if (R <= 0) return;
    launch_kernel(k_softmax_backward, R, kThreads, 0, st, ds, dp, p, C);
    after_launch();
}

void dropout_mask(cudaStream_t st, uint8_t* mask, Philox s, size_t n) {
    if (!n) return;
    launch_kernel(k_dropout_mask, grid_for((n + 3) / 4), kThreads, 0, st, mask, s, n);
    after_launch();
}

void dropout_add_forward(cudaStream_t st, float* y, const float* x, const uint8_t* mask, float keep_prob,
                         const float* residual, size_t n, uint16_t* yb) {
    if (!n) return;
    launch_kernel(k_dropout_add, grid_for(n), kThreads, 0, st, y, x, mask, 1.f / keep_prob, residual, n, yb);
    after_launch();
}

void dropout_backward(cudaStream_t st, float* dx, const float* dy, const uint8_t* mask, float keep_prob,
                      size_t n, uint16_t* dxb, BiasSum bg) {
    if (!n) return;
    const float scale = 1.f / keep_prob;
    column_sum(st, bg.db, n, bg.C, DropGrad{dy, mask, scale});  // before dx: dx may alias dy
    launch_kernel(k_dropout_backward, grid_for(n), kThreads, 0, st, dx, dy, mask, scale, n, dxb);
    after_launch();
}

void embedding_forward(cudaStream_t st, float* e, const float* word, const float* pos, const float* type,
                       const int32_t* ids, const int32_t* segments, const int32_t* offsets, int B, int H) {
    if (B <= 0) return;
    launch_kernel(k_embedding_forward, B, kThreads, 0, st, e, word, pos, type, ids, segments, offsets, H);
    after_launch();
}

void embedding_backward(cudaStream_t st, float* dword, float* dpos, float* dtype, const float* de,
                        const int32_t* ids, const int32_t* segments, const int32_t* offsets, int B, int H) {
    if (B <= 0) return;
    launch_kernel(k_embedding_backward, (H + kThreads - 1) / kThreads, kThreads, 0, st, dword, dpos, dtype, de, ids,
                  segments, offsets, B, H);
    after_launch();
}

void cross_entropy_forward(cudaStream_t st, double* loss, int32_t* argmax, float* lse, const float* logits,
                           const int32_t* labels, int R, int V) {
    if (R <= 0) return;
    launch_kernel(k_cross_entropy_forward, R, kThreads, 0, st, loss, argmax, lse, logits, labels, V);
    after_launch();
}

void cross_entropy_backward(cudaStream_t st, float* dlogits, const float* logits, const float* lse,
                            const int32_t* labels, const float* coef, int R, int V) {
    if (R <= 0) return;
    launch_kernel(k_cross_entropy_backward, R, kThreads, 0, st, dlogits, logits, lse, labels, coef, V);
    after_launch();
}

void attention_forward(cudaStream_t st, float* ctx, float* probs, uint8_t* mask, const void* q, const void* k,
                       const void* v, bool bf16_in, AttnShape s, const Philox* drop, float keep_prob) {
    if (s.B <= 0 || s.NH <= 0) return;
    const Philox ph = drop ? *drop : Philox{0, 0, 0, 0};
    const float inv_keep = drop ? 1.f / keep_prob : 1.f;
    if (bf16_in)
        launch_kernel(k_attention_forward<uint16_t>, s.B * s.NH, 128, 0, st, ctx, probs, mask,
                      static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k),
                      static_cast<const uint16_t*>(v), s, ph, drop != nullptr, inv_keep);
    else
        launch_kernel(k_attention_forward<float>, s.B * s.NH, 128, 0, st, ctx, probs, mask,
                      static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v), s, ph,
                      drop != nullptr, inv_keep);
    after_launch();
}

void attention_backward(cudaStream_t st, float* dq, float* dk, float* dv, float* dprobs, const void* dctx,
                        const void* q, const void* k, const void* v, bool bf16_in, const float* probs,
                        const uint8_t* mask, float keep_prob, AttnShape s) {
    if (s.B <= 0 || s.NH <= 0) return;
    using U = const uint16_t*;
    using F = const float*;
    if (bf16_in)
        launch_kernel(k_attention_backward<uint16_t>, s.B * s.NH, 128, 0, st, dq, dk, dv, dprobs,
                      static_cast<U>(dctx), static_cast<U>(q), static_cast<U>(k), static_cast<U>(v), probs, mask,
                      1.f / keep_prob, s);
    else
        launch_kernel(k_attention_backward<float>, s.B * s.NH, 128, 0, st, dq, dk, dv, dprobs, static_cast<F>(dctx),
                      static_cast<F>(q), static_cast<F>(k), static_cast<F>(v), probs, mask, 1.f / keep_prob, s);
    after_launch();
}

void bias_store(cudaStream_t st, void* C, int ldc, bool c_bf16, const float* acc, int M, int N, const float* bias) {
    const size_t n = static_cast<size_t>(M) * N;
    if (!n) return;
    launch_kernel(k_bias_store, grid_for(n), kThreads, 0, st, C, ldc, c_bf16, acc, M, N, bias);
    after_launch();
}

}  // namespace bertbench::backend::cuda
