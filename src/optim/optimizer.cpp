// LAMB and AdamW; see optimizer.hpp. LAMB needs the norms of w and of the whole update u before it
// may change w, so it runs two passes over each adapted tensor: (1) update m, v and sum w^2, u^2
// per chunk; (2) recompute u from the stored m, v and apply w -= (r*lr)*u. Recomputing u costs
// less than writing and re-reading it (the step is memory-bound). Tensors excluded from
// adaptation (r = 1) and AdamW need one pass. Chunks are dealt dynamically to OpenMP threads;
// the per-tensor norms are summed in chunk order, so results are the same for any thread count.
#include "optim/optimizer.hpp"

#include <immintrin.h>

#include <cmath>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "model/cost.hpp"

namespace bertbench::optim {

OptimizerKind parse_optimizer_kind(const std::string& name) {
    if (name == "lamb") return OptimizerKind::lamb;
    if (name == "adamw") return OptimizerKind::adamw;
    fail("--optimizer: expected \"lamb\" or \"adamw\", got \"{}\"", name);
}

const char* to_string(OptimizerKind kind) {
    return kind == OptimizerKind::lamb ? "lamb" : "adamw";
}

OptimizerConfig OptimizerConfig::adamw_reference() {
    OptimizerConfig c;
    c.kind = OptimizerKind::adamw;
    c.beta_1 = 0.9;
    c.beta_2 = 0.999;
    c.epsilon = 1e-6;
    c.weight_decay_rate = 0.01;
    return c;
}

void OptimizerConfig::validate() const {
    if (!(beta_1 >= 0 && beta_1 < 1)) fail("--lamb_beta_1: expected in [0, 1), got {}", beta_1);
    if (!(beta_2 >= 0 && beta_2 < 1)) fail("--lamb_beta_2: expected in [0, 1), got {}", beta_2);
    if (!(epsilon > 0))
        fail("--log_epsilon: expected epsilon = 10^log_epsilon > 0, got {}", epsilon);
    if (!(weight_decay_rate >= 0))
        fail("--lamb_weight_decay_rate: expected >= 0, got {}", weight_decay_rate);
}

Optimizer::Optimizer(std::span<const model::ParamInfo> entries, size_t total_floats,
                     OptimizerConfig config)
    : config_(config),
      plan_(entries, total_floats),
      m_(total_floats, 0.0f),
      v_(total_floats, 0.0f),
      partial_w2_(plan_.chunks().size()),
      partial_u2_(plan_.chunks().size()),
      ratios_(plan_.tensors().size(), 1.0f),
      beta1_power_(static_cast<float>(config.beta_1)),
      beta2_power_(static_cast<float>(config.beta_2)) {
    config_.validate();
}

Optimizer::Optimizer(const model::ParamTable& table, OptimizerConfig config)
    : Optimizer(table.entries(), table.total_floats(), config) {}

void Optimizer::set_scalars(int64_t update_count, float beta1_power, float beta2_power) {
    if (update_count < 0) fail("[optim] update count: expected >= 0, got {}", update_count);
    updates_ = update_count;
    beta1_power_ = beta1_power;
    beta2_power_ = beta2_power;
}

std::vector<StateTensor> Optimizer::state_tensors() {
    std::vector<StateTensor> out;
    out.reserve(2 * plan_.tensors().size());
    for (const auto& t : plan_.tensors()) {
        out.push_back({t.name + "/adam_m", std::span<float>(m_).subspan(t.offset, t.size)});
        out.push_back({t.name + "/adam_v", std::span<float>(v_).subspan(t.offset, t.size)});
    }
    return out;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads, float lr,
                     float grad_scale) {
    if (params.size() != plan_.total_floats() || grads.size() != plan_.total_floats())
        fail("[optim] step: expected params and grads of {} floats (the ParamTable's total), got "
             "{} and {}",
             plan_.total_floats(), params.size(), grads.size());
    BB_PROFILE_OP_SCOPE(model::Op::optimizer, model::Pass::step);
    if (config_.kind == OptimizerKind::lamb)
        step_lamb(params.data(), grads.data(), lr, grad_scale);
    else
        step_adamw(params.data(), grads.data(), lr, grad_scale);
    ++updates_;
}

namespace {

// The reference's LAMB constants for one step, rounded to fp32 where TF does.
struct LambConst {
    float b1, b2, one_minus_b1, one_minus_b2, bc1, bc2, eps, wd;
};

// m, v <- new moments; returns u = m_hat / (sqrt(v_hat) + eps) (without the decay term).
// Operation order as lamb_optimizer_v1.py _resource_apply_dense.
inline float lamb_moments(float& m, float& v, float g, const LambConst& k) {
    m = m * k.b1 + g * k.one_minus_b1;
    v = v * k.b2 + (g * g) * k.one_minus_b2;
    return (m / k.bc1) / (std::sqrt(v / k.bc2) + k.eps);
}
inline float lamb_update(float m, float v, const LambConst& k) {
    return (m / k.bc1) / (std::sqrt(v / k.bc2) + k.eps);
}

// The per-chunk loops over [b, e) of the flat buffers: AVX for 8 floats at a time (GCC will not
// vectorize std::sqrt under the default -fmath-errno), then the same formulas in scalar code.
#if defined(__AVX__)
struct LambVec {
    __m256 b1, b2, omb1, omb2, bc1, bc2, eps, wd;
    explicit LambVec(const LambConst& k)
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

void lamb_fused_chunk(float* w, float* m, float* v, const float* g, size_t b, size_t e,
                      float grad_scale, float lr, const LambConst& k) {
    size_t i = b;
#if defined(__AVX__)
    const LambVec kv(k);
    const __m256 gs = _mm256_set1_ps(grad_scale), lr8 = _mm256_set1_ps(lr);
    for (; i + 8 <= e; i += 8) {
        const __m256 u = lamb_moments8(m + i, v + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), gs), kv);
        _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(lr8, u)));
    }
#endif
    for (; i < e; ++i) {
        const float u = lamb_moments(m[i], v[i], g[i] * grad_scale, k);
        w[i] = w[i] - lr * u;
    }
}

void lamb_moments_chunk(const float* w, float* m, float* v, const float* g, size_t b, size_t e,
                        float grad_scale, const LambConst& k, double& w2_out, double& u2_out) {
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
                      const LambConst& k) {
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

struct AdamConst {
    float b1, b2, one_minus_b1, one_minus_b2, eps, wd;
};

void adamw_chunk(float* w, float* m, float* v, const float* g, size_t b, size_t e,
                 float grad_scale, float lr, const AdamConst& k) {
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

}  // namespace

void Optimizer::step_lamb(float* w, const float* g, float lr, float grad_scale) {
    const float b1 = static_cast<float>(config_.beta_1), b2 = static_cast<float>(config_.beta_2);
    // TF: 1 - beta1_t and 1 - beta1_power are fp32 ops on fp32 tensors.
    const LambConst k{b1,
                      b2,
                      1.0f - b1,
                      1.0f - b2,
                      1.0f - beta1_power_,
                      1.0f - beta2_power_,
                      static_cast<float>(config_.epsilon),
                      static_cast<float>(config_.weight_decay_rate)};
    const auto& chunks = plan_.chunks();
    const auto& tensors = plan_.tensors();
    float* m = m_.data();
    float* v = v_.data();
    const long nc = static_cast<long>(chunks.size());
    const long nt = static_cast<long>(tensors.size());
#pragma omp parallel
    {
#pragma omp for schedule(dynamic, 1)
        for (long c = 0; c < nc; ++c) {
            const Chunk ch = chunks[c];
            if (!tensors[ch.tensor].decay) {
                // Excluded from decay and from layer adaptation: r = 1, one fused pass.
                lamb_fused_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, lr, k);
                continue;
            }
            lamb_moments_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, k, partial_w2_[c],
                               partial_u2_[c]);
        }
#pragma omp for schedule(static)
        for (long t = 0; t < nt; ++t) {
            if (!tensors[t].decay) {
                ratios_[t] = 1.0f;
                continue;
            }
            double w2 = 0.0, u2 = 0.0;  // chunk order: deterministic
            for (size_t c = plan_.first_chunk(t); c < plan_.first_chunk(t + 1); ++c) {
                w2 += partial_w2_[c];
                u2 += partial_u2_[c];
            }
            const float w_norm = static_cast<float>(std::sqrt(w2));
            const float u_norm = static_cast<float>(std::sqrt(u2));
            ratios_[t] = w_norm > 0.0f ? (u_norm > 0.0f ? w_norm / u_norm : 1.0f) : 1.0f;
        }
#pragma omp for schedule(dynamic, 1)
        for (long c = 0; c < nc; ++c) {
            const Chunk ch = chunks[c];
            if (!tensors[ch.tensor].decay) continue;
            const float step = ratios_[ch.tensor] * lr;  // TF: ratio * lr_t * update
            lamb_apply_chunk(w, m, v, ch.begin, ch.end, step, k);
        }
    }
    // TF _finish: beta powers advance after the update, as fp32 products.
    beta1_power_ = beta1_power_ * b1;
    beta2_power_ = beta2_power_ * b2;
}

void Optimizer::step_adamw(float* w, const float* g, float lr, float grad_scale) {
    // AdamWeightDecayOptimizer: Python-float constants, so 1 - beta is taken in double and then
    // rounded to fp32; no bias correction; decay skipped when the rate is 0 or the name excluded.
    const AdamConst k{static_cast<float>(config_.beta_1), static_cast<float>(config_.beta_2),
                      static_cast<float>(1.0 - config_.beta_1),
                      static_cast<float>(1.0 - config_.beta_2),
                      static_cast<float>(config_.epsilon), static_cast<float>(config_.weight_decay_rate)};
    const AdamConst k_excluded{k.b1, k.b2, k.one_minus_b1, k.one_minus_b2, k.eps, 0.0f};
    const auto& chunks = plan_.chunks();
    const auto& tensors = plan_.tensors();
    float* m = m_.data();
    float* v = v_.data();
    const long nc = static_cast<long>(chunks.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < nc; ++c) {
        const Chunk ch = chunks[c];
        adamw_chunk(w, m, v, g, ch.begin, ch.end, grad_scale, lr,
                    tensors[ch.tensor].decay ? k : k_excluded);
    }
}

}  // namespace bertbench::optim
