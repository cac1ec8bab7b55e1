// Vectorised float maths over arrays (AVX2 + FMA intrinsics, 8 lanes; the compiler does not
// vectorise the libm calls, and without -fno-trapping-math not the clamps of a scalar version):
// exp, GELU, and the reductions (max, argmax, sums) behind softmax, LayerNorm and the loss.
// exp: Cephes expf (ln 2 split in two, degree-5 polynomial; ≈ 2 ulp on [-87.3, 88], inputs are
// clamped to that range, so exp(-1e4) ≈ 1e-38 instead of 0); exp<Exp::q8> (the same reduction, a
// degree-3 minimax polynomial: relative error ≤ 1.02e-4, 40× below the half step of an 8-bit
// quantizer, for values one takes next: the int8 engine's probabilities and GELU). Scalar tanh (the pooler): Cephes
// tanhf polynomial for |x| < 0.625, 1 − 2/(e^{2|x|} + 1) otherwise (≈ 3 ulp). Scalar tails use the
// same formulas. double keeps std::exp / std::tanh so finite-difference checks run on exact maths.
// The AVX-512 build of the kernels (BB_OPS_AVX512, ops/kernels.hpp) adds 16-lane loops in front of
// the 8-lane ones with the same formulas: exp, GELU, max and argmax give the same bits on both paths;
// exp_affine_sum's sum runs in 16 lanes there, so it may differ in the last bits.
#pragma once

#include <algorithm>
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/isa.hpp"

BB_OPS_ISA_BEGIN

namespace vm {
constexpr float kLo = -87.3f, kHi = 88.0f, kLog2e = 1.44269504088896341f;
constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
// exp's degree-3 minimax polynomial on [-ln2/2, ln2/2] (relative error, its value at 0 held to 1)
constexpr float kQ1 = 1.00019586f, kQ2 = 0.50413036f, kQ3 = 0.16517976f;
constexpr float kT0 = -5.70498872745e-3f, kT1 = 2.06390887954e-2f, kT2 = -5.37397155531e-2f,
                kT3 = 1.33314422036e-1f, kT4 = -3.33332819422e-1f;
}  // namespace vm

enum class Exp { full, q8 };  // exp's accuracy: float's, or an 8-bit quantizer's input's

template <Exp A = Exp::full>
inline float fast_exp(float x) {
    using namespace vm;
    x = std::fmin(std::fmax(x, kLo), kHi);
    const float n = std::nearbyint(x * kLog2e);
    float r = std::fma(-n, kC1, x);
    r = std::fma(-n, kC2, r);
    float y;
    if constexpr (A == Exp::q8) {
        y = std::fma(std::fma(std::fma(kQ3, r, kQ2), r, kQ1), r, 1.0f);
    } else {
        float p = kP0;
        p = std::fma(p, r, kP1);
        p = std::fma(p, r, kP2);
        p = std::fma(p, r, kP3);
        p = std::fma(p, r, kP4);
        p = std::fma(p, r, kP5);
        y = std::fma(p, r * r, r) + 1.0f;
    }
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

template <Exp A = Exp::full>
inline __m256 exp8(__m256 x) {
    using namespace vm;
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kLo)), _mm256_set1_ps(kHi));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC1), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kC2), r);
    __m256 y;
    if constexpr (A == Exp::q8) {
        y = _mm256_fmadd_ps(_mm256_set1_ps(kQ3), r, _mm256_set1_ps(kQ2));
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kQ1));
        y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.0f));
    } else {
        __m256 p = _mm256_set1_ps(kP0);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
        y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    }
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}

#ifdef BB_OPS_AVX512
// exp8's formula on 16 lanes, the same bits per lane: y·2^n by vscalefps (one instruction where
// exp8 builds 2^n's bits in three and multiplies; a product by a power of two rounds alike either
// way, also where it is subnormal: KernelsIsa.ExpEveryFloatBitIdenticalSlow checks every float).
template <Exp A = Exp::full>
inline __m512 exp16(__m512 x) {
    using namespace vm;
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLo)), _mm512_set1_ps(kHi));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC1), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kC2), r);
    __m512 y;
    if constexpr (A == Exp::q8) {
        y = _mm512_fmadd_ps(_mm512_set1_ps(kQ3), r, _mm512_set1_ps(kQ2));
        y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kQ1));
        y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    } else {
        __m512 p = _mm512_set1_ps(kP0);
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
        y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    }
    return _mm512_scalef_ps(y, n);
}
#endif

inline float fast_tanh(float x) {
    using namespace vm;
    const float a = std::fabs(x);
    const float z = x * x;
    float p = kT0;
    p = std::fma(p, z, kT1);
    p = std::fma(p, z, kT2);
    p = std::fma(p, z, kT3);
    p = std::fma(p, z, kT4);
    const float small = std::fma(x * z, p, x);
    const float e = fast_exp(2.0f * a);
    const float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
    return a < 0.625f ? small : big;
}

template <typename T>
inline T vexp(T x) {
    return std::exp(x);
}
template <>
inline float vexp<float>(float x) {
    return fast_exp(x);
}
template <typename T>
inline T vtanh(T x) {
    return std::tanh(x);
}
template <>
inline float vtanh<float>(float x) {
    return fast_tanh(x);
}

// y[i] = exp(x[i]·scale − shift)   (y may alias x)
template <typename T>
inline void exp_affine(T* y, const T* x, size_t n, T scale, T shift) {
    size_t i = 0;
    if constexpr (std::is_same_v<T, float>) {
#ifdef BB_OPS_AVX512
        const __m512 s16 = _mm512_set1_ps(scale), m16 = _mm512_set1_ps(shift);
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, exp16(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), s16, m16)));
#endif
        const __m256 s = _mm256_set1_ps(scale), m = _mm256_set1_ps(shift);
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, exp8(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), s, m)));
    }
    for (; i < n; ++i) y[i] = vexp(x[i] * scale - shift);
}

// Horizontal reductions of 8 lanes.
inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Σ_{i<n} f(i) in 8 interleaved partial sums (i mod 8), added in lane order, then the tail: a fixed
// order for a given n that the compiler vectorises (a single running sum is a serial chain of
// additions at 4 cycles each).
// The AVX-512 copy keeps 16 partial sums (i mod 16; acc[j] + acc[j+8] then as above): GCC turns
// the 8-sum loop at 512-bit width into permutes that made LayerNorm 1.5-2x slower.
template <typename T, typename F>
inline T sum_lanes8(size_t n, F f) {
#ifdef BB_OPS_AVX512
    if constexpr (std::is_same_v<T, float>) {
        T acc16[16] = {};
        size_t i = 0;
        for (; i + 16 <= n; i += 16)
            for (size_t j = 0; j < 16; ++j) acc16[j] += f(i + j);
        T a[8];
        for (size_t j = 0; j < 8; ++j) a[j] = acc16[j] + acc16[j + 8];
        for (; i + 8 <= n; i += 8)
            for (size_t j = 0; j < 8; ++j) a[j] += f(i + j);
        T s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        for (; i < n; ++i) s += f(i);
        return s;
    }
#endif
    T acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t j = 0; j < 8; ++j) acc[j] += f(i + j);
    T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; ++i) s += f(i);
    return s;
}

// max over x(n), n ≥ 1 (exact in any order)
template <typename T>
inline T array_max(const T* x, size_t n) {
    size_t i = 0;
    T m = x[0];
    if constexpr (std::is_same_v<T, float>) {
#ifdef BB_OPS_AVX512
        if (n >= 16) {  // four chains of vmaxps, whose latency would bound one (4 cycles per 16)
            __m512 a = _mm512_loadu_ps(x), b = a, c = a, d = a;
            for (i = 16; i + 64 <= n; i += 64) {
                a = _mm512_max_ps(a, _mm512_loadu_ps(x + i));
                b = _mm512_max_ps(b, _mm512_loadu_ps(x + i + 16));
                c = _mm512_max_ps(c, _mm512_loadu_ps(x + i + 32));
                d = _mm512_max_ps(d, _mm512_loadu_ps(x + i + 48));
            }
            for (; i + 16 <= n; i += 16) a = _mm512_max_ps(a, _mm512_loadu_ps(x + i));
            m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a, b), _mm512_max_ps(c, d)));
        }
#else
        if (n >= 16) {
            __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
            for (i = 16; i + 16 <= n; i += 16) {
                a = _mm256_max_ps(a, _mm256_loadu_ps(x + i));
                b = _mm256_max_ps(b, _mm256_loadu_ps(x + i + 8));
            }
            m = hmax8(_mm256_max_ps(a, b));
        }
#endif
    }
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

// Index of the first maximum of x(n), n ≥ 1: the scalar rule "best = c if x[c] > x[best]" (ties ->
// lowest index; with NaNs present the scalar loop itself decides, so the result is that rule's in
// every case). float: one vector pass for the max (and a NaN check), one to find its first index.
template <typename T>
inline size_t array_argmax(const T* x, size_t n) {
    if constexpr (std::is_same_v<T, float>) {
#ifdef BB_OPS_AVX512
        if (n >= 16) {  // the same two passes on 16 lanes
            __m512 mv = _mm512_loadu_ps(x);
            __mmask16 nan = _mm512_cmp_ps_mask(mv, mv, _CMP_UNORD_Q);
            size_t i = 16;
            for (; i + 16 <= n; i += 16) {
                const __m512 v = _mm512_loadu_ps(x + i);
                mv = _mm512_max_ps(mv, v);
                nan = static_cast<__mmask16>(nan | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
            }
            float m = _mm512_reduce_max_ps(mv);
            bool any_nan = nan != 0;
            for (; i < n; ++i) {
                any_nan = any_nan || x[i] != x[i];
                m = x[i] > m ? x[i] : m;
            }
            if (!any_nan) {
                const __m512 vm = _mm512_set1_ps(m);
                for (i = 0; i + 16 <= n; i += 16) {
                    const unsigned hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vm, _CMP_EQ_OQ);
                    if (hit) return i + static_cast<size_t>(__builtin_ctz(hit));
                }
                for (; i < n; ++i)
                    if (x[i] == m) return i;
            }
        } else
#endif
        if (n >= 8) {
            __m256 mv = _mm256_loadu_ps(x), nan = _mm256_cmp_ps(mv, mv, _CMP_UNORD_Q);
            size_t i = 8;
            for (; i + 8 <= n; i += 8) {
                const __m256 v = _mm256_loadu_ps(x + i);
                mv = _mm256_max_ps(mv, v);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            }
            float m = hmax8(mv);
            bool any_nan = _mm256_movemask_ps(nan) != 0;
            for (; i < n; ++i) {
                any_nan = any_nan || x[i] != x[i];
                m = x[i] > m ? x[i] : m;
            }
            if (!any_nan) {
                const __m256 vm = _mm256_set1_ps(m);
                for (i = 0; i + 8 <= n; i += 8) {
                    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
                    if (hit) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(hit)));
                }
                for (; i < n; ++i)
                    if (x[i] == m) return i;
            }
        }
    }
    size_t best = 0;
    for (size_t c = 1; c < n; ++c)
        if (x[c] > x[best]) best = c;
    return best;
}

// y[i] = exp(x[i]·scale − shift) (y may alias x; float: exp to A's accuracy); returns Σ y (float:
// in 8 lanes)
template <Exp A = Exp::full, typename T>
inline T exp_affine_sum(T* y, const T* x, size_t n, T scale, T shift) {
    size_t i = 0;
    T sum = 0;
    if constexpr (std::is_same_v<T, float>) {
#ifdef BB_OPS_AVX512
        const __m512 s16 = _mm512_set1_ps(scale), m16 = _mm512_set1_ps(shift);
        __m512 acc16 = _mm512_setzero_ps();
        for (; i + 16 <= n; i += 16) {
            const __m512 e = exp16<A>(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), s16, m16));
            _mm512_storeu_ps(y + i, e);
            acc16 = _mm512_add_ps(acc16, e);
        }
        sum = _mm512_reduce_add_ps(acc16);
#endif
        const __m256 s = _mm256_set1_ps(scale), m = _mm256_set1_ps(shift);
        __m256 acc = _mm256_setzero_ps();
        for (; i + 8 <= n; i += 8) {
            const __m256 e = exp8<A>(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), s, m));
            _mm256_storeu_ps(y + i, e);
            acc = _mm256_add_ps(acc, e);
        }
        sum += hsum8(acc);
    }
    for (; i < n; ++i) {
        if constexpr (std::is_same_v<T, float>)
            sum += y[i] = fast_exp<A>(x[i] * scale - shift);
        else
            sum += y[i] = vexp(x[i] * scale - shift);
    }
    return sum;
}

// GELU tanh form: y = 0.5x(1 + tanh(u)) = x·σ(2u), u = √(2/π)(x + 0.044715x³);
// dy/dx = 0.5(1 + t) + 0.5x(1 − t²)u' = σ + 2x·σ(1 − σ)·u', t = tanh(u), u' = √(2/π)(1 + 3·0.044715x²).
// float evaluates the σ form, σ = 1/(1 + e^{−2u}) (one exp and one division; tanh's accuracy near 0
// does not matter here because it is added to 1). e^{−2u} is capped at e^80 so that σ stays a
// normal float (a subnormal would take the slow microcode path; the error is < 1e-33 absolute).
// double evaluates the tanh form with std::tanh (exact maths for the finite-difference checks).
namespace vm {
constexpr float kGeluS = 0.7978845608028654f, kGeluK = 0.044715f, kSigCap = 80.0f;
template <Exp A = Exp::full>
inline float gelu_sigma(float x) {  // σ(2u), in the lanes' order: the same bits wherever x sits
    return 1.0f / (1.0f + fast_exp<A>(std::fmin(-2.0f * kGeluS * std::fma(kGeluK * x, x * x, x), kSigCap)));
}
template <Exp A = Exp::full>
inline __m256 gelu_sigma8(__m256 v) {
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(-2.0f * kGeluS),
                                   _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(kGeluK), v), _mm256_mul_ps(v, v), v));
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, exp8<A>(_mm256_min_ps(u, _mm256_set1_ps(kSigCap)))));
}
#ifdef BB_OPS_AVX512
template <Exp A = Exp::full>
inline __m512 gelu_sigma16(__m512 v) {
    const __m512 u = _mm512_mul_ps(_mm512_set1_ps(-2.0f * kGeluS),
                                   _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluK), v), _mm512_mul_ps(v, v), v));
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, exp16<A>(_mm512_min_ps(u, _mm512_set1_ps(kSigCap)))));
}
#endif
}  // namespace vm

template <Exp A = Exp::full, typename T>
inline void gelu_tanh_array(T* y, const T* x, size_t n) {
    if constexpr (std::is_same_v<T, float>) {
        size_t i = 0;
#ifdef BB_OPS_AVX512
        for (; i + 16 <= n; i += 16) {
            const __m512 v = _mm512_loadu_ps(x + i);
            _mm512_storeu_ps(y + i, _mm512_mul_ps(v, vm::gelu_sigma16<A>(v)));
        }
#endif
        for (; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            _mm256_storeu_ps(y + i, _mm256_mul_ps(v, vm::gelu_sigma8<A>(v)));
        }
        for (; i < n; ++i) y[i] = x[i] * vm::gelu_sigma<A>(x[i]);
    } else {
        const T s = T(0.7978845608028654), k = T(0.044715);
        for (size_t i = 0; i < n; ++i) {
            const T v = x[i];
            y[i] = T(0.5) * v * (T(1) + std::tanh(s * (v + k * v * v * v)));
        }
    }
}

template <typename T>
inline void gelu_tanh_backward_array(T* dx, const T* dy, const T* x, size_t n) {
    if constexpr (std::is_same_v<T, float>) {
        using namespace vm;
        size_t i = 0;
        const __m256 two_s = _mm256_set1_ps(2.0f * kGeluS), k3 = _mm256_set1_ps(3.0f * kGeluK),
                     one = _mm256_set1_ps(1.0f);
#ifdef BB_OPS_AVX512
        const __m512 two_s16 = _mm512_set1_ps(2.0f * kGeluS), k316 = _mm512_set1_ps(3.0f * kGeluK),
                     one16 = _mm512_set1_ps(1.0f);
        for (; i + 16 <= n; i += 16) {
            const __m512 v = _mm512_loadu_ps(x + i);
            const __m512 sg = gelu_sigma16(v);
            const __m512 du2 = _mm512_mul_ps(two_s16, _mm512_fmadd_ps(_mm512_mul_ps(k316, v), v, one16));
            const __m512 d = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(v, sg), _mm512_sub_ps(one16, sg)), du2, sg);
            _mm512_storeu_ps(dx + i, _mm512_mul_ps(_mm512_loadu_ps(dy + i), d));
        }
#endif
        const auto eight = [&](float* o, const float* xs, const float* dys) {
            const __m256 v = _mm256_loadu_ps(xs);
            const __m256 sg = gelu_sigma8(v);
            const __m256 du2 = _mm256_mul_ps(two_s, _mm256_fmadd_ps(_mm256_mul_ps(k3, v), v, one));  // 2u'
            const __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(v, sg), _mm256_sub_ps(one, sg)), du2, sg);
            _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(dys), d));
        };
        for (; i + 8 <= n; i += 8) eight(dx + i, x + i, dy + i);
        if (i < n) {  // the tail through the same lanes: a value's bits do not depend on where it sits
            alignas(32) float xt[8] = {}, dyt[8] = {}, o[8];
            std::copy(x + i, x + n, xt);
            std::copy(dy + i, dy + n, dyt);
            eight(o, xt, dyt);
            std::copy(o, o + (n - i), dx + i);
        }
    } else {
        const T s = T(0.7978845608028654), k = T(0.044715);
        for (size_t i = 0; i < n; ++i) {
            const T v = x[i];
            const T t = std::tanh(s * (v + k * v * v * v));
            dx[i] = dy[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * s * (T(1) + T(3) * k * v * v));
        }
    }
}

BB_OPS_ISA_END
