// The optimizer's ops: see optimizer.hpp. LAMB needs the norms of w and of the whole update u
// before it may change w, so it runs two passes over each adapted tensor: (1) update m, v and sum
// w², u² per chunk; (2) recompute u from the stored m, v and apply w -= (r·lr)·u. Recomputing u
// costs less than writing and re-reading it (the step is memory-bound). Tensors excluded from
// adaptation (r = 1) and the Adam variants need one pass. Chunks are dealt dynamically to OpenMP threads.
#include "ops/optimizer.hpp"

#include <immintrin.h>

#include <cmath>

#include "ops/parallel.hpp"

namespace bertbench::ops {
namespace {

// m, v <- new moments; returns u = m_hat / (sqrt(v_hat) + eps) (without the decay term).
// Operation order as lamb_optimizer_v1.py _resource_apply_dense.
inline float lamb_moments(float& m, float& v, float g, const LambConstants& k) {
    m = m * k.b1 + g * k.one_minus_b1;
    v = v * k.b2 + (g * g) * k.one_minus_b2;
    return (m / k.bc1) / (std::sqrt(v / k.bc2) + k.eps);
}
inline float lamb_update(float m, float v, const LambConstants& k) {
    return (m / k.bc1) / (std::sqrt(v / k.bc2) + k.eps);
}

// The per-chunk loops over [b, e) of the flat buffers: AVX for 8 floats at a time (GCC will not
// vectorize std::sqrt under the default -fmath-errno), then the same formulas in scalar code.
#if defined(__AVX__)
struct LambVec {
    __m256 b1, b2, omb1, omb2, bc1, bc2, eps, wd;
    explicit LambVec(const LambConstants& k)
        : b1(_mm256_set1_ps(k.b1)), b2(_mm256_set1_ps(k.b2)), omb1(_mm256_set1_ps(k.one_minus_b1)),
          omb2(_mm256_set1_ps(k.one_minus_b2)), bc1(_mm256_set1_ps(k.bc1)),
          bc2(_mm256_set1_ps(k.bc2)), eps(_mm256_set1_ps(k.eps)), wd(_mm256_set1_ps(k.wd)) {}
};
inline __m256 lamb_update8(__m256 m, __m256 v, const LambVec& k) {
    return _mm256_div_ps(_mm256_div_ps(m, k.bc1),
                         _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(v, k.bc2)), k.eps));
}
// m, v <- new moments (8 lanes); returns u without the decay term.
inline __m256 lamb_moments8(float* m, float* v, __m256 g, const LambVec& k) {
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m), k.b1), _mm256_mul_ps(g, k.omb1));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v), k.b2),
                                    _mm256_mul_ps(_mm256_mul_ps(g, g), k.omb2));
    _mm256_storeu_ps(m, mi);
    _mm256_storeu_ps(v, vi);
    return lamb_update8(mi, vi, k);
}
inline __m256d sum_sq_pd(__m256d acc, __m256 x) {  // acc += x^2 in double, lanes 0-3 and 4-7
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
    return _mm256_add_pd(acc, _mm256_add_pd(_mm256_mul_pd(lo, lo), _mm256_mul_pd(hi, hi)));
}
inline double hsum_pd(__m256d x) {  // fixed order
    alignas(32) double d[4];
    _mm256_store_pd(d, x);
    return (d[0] + d[1]) + (d[2] + d[3]);
}
#endif

// One pass for a tensor without adaptation (r = 1): w -= lr·u, u with the decay term where
// `decay` (MLPerf's LAMB has no such tensor: its unadapted ones are the undecayed ones).
void lamb_fused_chunk(float* w, float* m, float* v, const float* g, size_t b, size_t e,
                      float grad_scale, float lr, const LambConstants& k, bool decay) {
    size_t i = b;
#if defined(__AVX__)
    const LambVec kv(k);
    const __m256 gs = _mm256_set1_ps(grad_scale), lr8 = _mm256_set1_ps(lr);
    for (; i + 8 <= e; i += 8) {
        const __m256 wi = _mm256_loadu_ps(w + i);
        __m256 u = lamb_moments8(m + i, v + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), gs), kv);
        if (decay) u = _mm256_add_ps(u, _mm256_mul_ps(kv.wd, wi));
        _mm256_storeu_ps(w + i, _mm256_sub_ps(wi, _mm256_mul_ps(lr8, u)));
    }
#endif
    for (; i < e; ++i) {
        float u = lamb_moments(m[i], v[i], g[i] * grad_scale, k);
        if (decay) u = u + k.wd * w[i];
        w[i] = w[i] - lr * u;
    }
}

void lamb_moments_chunk(const float* w, float* m, float* v, const float* g, size_t b, size_t e,
                        float grad_scale, const LambConstants& k, double& w2_out, double& u2_out) {
    size_t i = b;
    double w2 = 0.0, u2 = 0.0;
#if defined(__AVX__)
    const LambVec kv(k);
    const __m256 gs = _mm256_set1_ps(grad_scale);
    __m256d w2v = _mm256_setzero_pd(), u2v = _mm256_setzero_pd();
    for (; i + 8 <= e; i += 8) {
        const __m256 wi = _mm256_loadu_ps(w + i);
        const __m256 u = _mm256_add_ps(
            lamb_moments8(m + i, v + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), gs), kv),
            _mm256_mul_ps(kv.wd, wi));
        w2v = sum_sq_pd(w2v, wi);
        u2v = sum_sq_pd(u2v, u);
    }
    w2 = hsum_pd(w2v);
    u2 = hsum_pd(u2v);
#endif
    for (; i < e; ++i) {
        const float u = lamb_moments(m[i], v[i], g[i] * grad_scale, k) + k.wd * w[i];
        w2 += static_cast<double>(w[i]) * w[i];
        u2 += static_cast<double>(u) * u;
    }
    w2_out = w2;
    u2_out = u2;
}

void lamb_apply_chunk(float* w, const float* m, const float* v, size_t b, size_t e, float step,
                      const LambConstants& k) {
    size_t i = b;
#if defined(__AVX__)
    const LambVec kv(k);
    const __m256 step8 = _mm256_set1_ps(step);
    for (; i + 8 <= e; i += 8) {
        const __m256 wi = _mm256_loadu_ps(w + i);
        const __m256 u = _mm256_add_ps(lamb_update8(_mm256_loadu_ps(m + i), _mm256_loadu_ps(v + i), kv),
                                       _mm256_mul_ps(kv.wd, wi));
        _mm256_storeu_ps(w + i, _mm256_sub_ps(wi, _mm256_mul_ps(step8, u)));
    }
#endif
    for (; i < e; ++i) {
        const float u = lamb_update(m[i], v[i], k) + k.wd * w[i];
        w[i] = w[i] - step * u;
    }
}

void adamw_chunk(float* w, float* m, float* v, const float* g, size_t b, size_t e,
                 float grad_scale, float lr, const AdamConstants& k) {
    size_t i = b;
#if defined(__AVX__)
    const __m256 b1 = _mm256_set1_ps(k.b1), b2 = _mm256_set1_ps(k.b2);
    const __m256 omb1 = _mm256_set1_ps(k.one_minus_b1), omb2 = _mm256_set1_ps(k.one_minus_b2);
    const __m256 eps = _mm256_set1_ps(k.eps), wd = _mm256_set1_ps(k.wd);
    const __m256 gs = _mm256_set1_ps(grad_scale), lr8 = _mm256_set1_ps(lr);
    for (; i + 8 <= e; i += 8) {
        const __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, gi));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                        _mm256_mul_ps(omb2, _mm256_mul_ps(gi, gi)));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 wi = _mm256_loadu_ps(w + i);
        const __m256 u = _mm256_add_ps(_mm256_div_ps(mi, _mm256_add_ps(_mm256_sqrt_ps(vi), eps)),
                                       _mm256_mul_ps(wd, wi));
        _mm256_storeu_ps(w + i, _mm256_sub_ps(wi, _mm256_mul_ps(lr8, u)));
    }
#endif
    for (; i < e; ++i) {
        const float gi = g[i] * grad_scale;
        m[i] = k.b1 * m[i] + k.one_minus_b1 * gi;
        v[i] = k.b2 * v[i] + k.one_minus_b2 * (gi * gi);
        const float u = m[i] / (std::sqrt(v[i]) + k.eps) + k.wd * w[i];  // wd = 0: exactly u
        w[i] = w[i] - lr * u;
    }
}

// Keras AdamWeightDecay on [b, e): the decoupled decay first (its own assignment to w), then
// ResourceApplyAdam's m += (g - m)·(1 - b1), v += (g² - v)·(1 - b2), w -= (m·alpha)/(√v + eps).
void keras_adam_chunk(float* w, float* m, float* v, const float* g, size_t b, size_t e,
                      float grad_scale, float lr, const KerasAdamConstants& k, bool decay) {
    size_t i = b;
#if defined(__AVX__)
    const __m256 omb1 = _mm256_set1_ps(k.one_minus_b1), omb2 = _mm256_set1_ps(k.one_minus_b2);
    const __m256 eps = _mm256_set1_ps(k.eps), wd = _mm256_set1_ps(k.wd), alpha = _mm256_set1_ps(k.alpha);
    const __m256 gs = _mm256_set1_ps(grad_scale), lr8 = _mm256_set1_ps(lr);
    for (; i + 8 <= e; i += 8) {
        __m256 wi = _mm256_loadu_ps(w + i);
        if (decay) wi = _mm256_sub_ps(wi, _mm256_mul_ps(_mm256_mul_ps(lr8, wi), wd));
        const __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 mi = _mm256_loadu_ps(m + i), vi = _mm256_loadu_ps(v + i);
        mi = _mm256_add_ps(mi, _mm256_mul_ps(_mm256_sub_ps(gi, mi), omb1));
        vi = _mm256_add_ps(vi, _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(gi, gi), vi), omb2));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        wi = _mm256_sub_ps(wi, _mm256_div_ps(_mm256_mul_ps(mi, alpha), _mm256_add_ps(_mm256_sqrt_ps(vi), eps)));
        _mm256_storeu_ps(w + i, wi);
    }
#endif
    for (; i < e; ++i) {
        if (decay) w[i] = w[i] - (lr * w[i]) * k.wd;
        const float gi = g[i] * grad_scale;
        m[i] = m[i] + (gi - m[i]) * k.one_minus_b1;
        v[i] = v[i] + (gi * gi - v[i]) * k.one_minus_b2;
        w[i] = w[i] - (m[i] * k.alpha) / (std::sqrt(v[i]) + k.eps);
    }
}

// Σ x² in double. AVX: four independent accumulators of 4 doubles (16 floats per iteration),
// combined in a fixed order, so the result depends only on n and the data.
double sum_squares(const float* x, size_t n) {
    size_t i = 0;
    double s = 0.0;
#if defined(__AVX__)
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 4; ++k) {
            const __m256d d = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * k));
            acc[k] = _mm256_add_pd(acc[k], _mm256_mul_pd(d, d));
        }
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
    s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
    for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
}

}  // namespace

void chunk_sum_squares(double* partial, const float* x, const ChunkTable& t) {
    const long n = static_cast<long>(t.num_chunks);
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < n; ++c)
        partial[c] = sum_squares(x + t.chunks[c].begin, t.chunks[c].end - t.chunks[c].begin);
}

void chunk_accumulate(float* acc, const float* g, const ChunkTable& t, float scale, float n) {
    const long count = static_cast<long>(t.num_chunks);
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < count; ++c)
        for (size_t i = t.chunks[c].begin; i < t.chunks[c].end; ++i) acc[i] = acc[i] + (g[i] * scale) / n;
}

void scale_values(float* x, size_t n, float s, int32_t* nonfinite) {
    const long long count = static_cast<long long>(n);
    bool finite = true;
#pragma omp parallel for schedule(static) reduction(&& : finite) if (worth_parallel(n))
    for (long long i = 0; i < count; ++i) {
        float& v = x[static_cast<size_t>(i)];
        finite = finite && std::isfinite(v);
        v *= s;
    }
    if (nonfinite) *nonfinite = finite ? 0 : 1;
}

void lamb_update(float* w, float* m, float* v, const float* g, const ChunkTable& t, float grad_scale,
                 float lr, const LambConstants& k, double* partials, float* ratios) {
    const ParamChunk* chunks = t.chunks;
    const uint8_t* adapt = t.adapt ? t.adapt : t.decay;
    LambConstants k_undecayed = k;  // u without the decay term (NGC: adapted, not decayed)
    k_undecayed.wd = 0.0f;
    double* partial_w2 = partials;
    double* partial_u2 = partials + t.num_chunks;
    const long nc = static_cast<long>(t.num_chunks);
    const long nt = static_cast<long>(t.num_tensors);
#pragma omp parallel
    {
#pragma omp for schedule(dynamic, 1)
        for (long c = 0; c < nc; ++c) {
            const ParamChunk ch = chunks[c];
            const bool decay = t.decay[ch.tensor] != 0;
            if (!adapt[ch.tensor]) {
                // Excluded from layer adaptation: r = 1, one fused pass.
                lamb_fused_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, lr, k, decay);
                continue;
            }
            lamb_moments_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, decay ? k : k_undecayed,
                               partial_w2[c], partial_u2[c]);
        }
#pragma omp for schedule(static)
        for (long i = 0; i < nt; ++i) {
            if (!adapt[i]) {
                ratios[i] = 1.0f;
                continue;
            }
            double w2 = 0.0, u2 = 0.0;  // chunk order: deterministic
            for (size_t c = t.first_chunk[i]; c < t.first_chunk[i + 1]; ++c) {
                w2 += partial_w2[c];
                u2 += partial_u2[c];
            }
            const float w_norm = static_cast<float>(std::sqrt(w2));
            const float u_norm = static_cast<float>(std::sqrt(u2));
            ratios[i] = w_norm > 0.0f ? (u_norm > 0.0f ? w_norm / u_norm : 1.0f) : 1.0f;
        }
#pragma omp for schedule(dynamic, 1)
        for (long c = 0; c < nc; ++c) {
            const ParamChunk ch = chunks[c];
            if (!adapt[ch.tensor]) continue;
            const float step = ratios[ch.tensor] * lr;  // TF: ratio * lr_t * update
            lamb_apply_chunk(w, m, v, ch.begin, ch.end, step, t.decay[ch.tensor] ? k : k_undecayed);
        }
    }
}

void adamw_update(float* w, float* m, float* v, const float* g, const ChunkTable& t, float grad_scale,
                  float lr, const AdamConstants& k) {
    const AdamConstants k_excluded{k.b1, k.b2, k.one_minus_b1, k.one_minus_b2, k.eps, 0.0f};
    const long nc = static_cast<long>(t.num_chunks);
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < nc; ++c) {
        const ParamChunk ch = t.chunks[c];
        adamw_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, lr, t.decay[ch.tensor] ? k : k_excluded);
    }
}

void keras_adam_update(float* w, float* m, float* v, const float* g, const ChunkTable& t,
                       float grad_scale, float lr, const KerasAdamConstants& k) {
    const long nc = static_cast<long>(t.num_chunks);
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < nc; ++c) {
        const ParamChunk ch = t.chunks[c];
        // AdamWeightDecay._do_use_weight_decay: no decay at all when the rate is 0
        const bool decay = t.decay[ch.tensor] != 0 && k.wd != 0.0f;
        keras_adam_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, lr, k, decay);
    }
}

}  // namespace bertbench::ops
