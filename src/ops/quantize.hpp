// The elementwise passes of int8 inference (ops/int8.hpp), vectorised: a row quantized to s8
// symmetrically (or to u8 as s8 plus 128), int32 products dequantized with their row and column
// scales and the bias, and the int8 attention's softmax quantized to u8.
// They give the same bits as their scalar formulas on every path (max is exact, the conversion
// rounds to nearest even as std::nearbyint does in the default rounding mode, and the dequantization
// multiplies and adds without contraction, in the scalar order).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/activation.hpp"
#include "ops/isa.hpp"
#include "ops/vmath.hpp"

BB_OPS_ISA_BEGIN

// qmax/m, the reciprocal step of a row (or channel) whose largest |value| is m; 0 where m is 0 or so
// small (under qmax/3.4e38, subnormal) that qmax/m overflows: such a row quantizes to 0, scale 0.
inline float inverse_step(float m, float qmax) { return m > 0.f && qmax / m <= 3.4e38f ? qmax / m : 0.f; }

// One row x(C) to [-qmax, qmax]: m = max|x|, q = round(x·(qmax/m)), scale = m/qmax; a row of zeros
// (or of values under ~4e-37: inverse_step) gives q 0 and scale 0. False (q and scale unwritten)
// when the row holds a NaN or ±Inf, or |x| > 3.4e38. Q uint8_t: each q stored plus 128 (the bits
// of the int8 q with the sign bit flipped), the form an int8 product's u8 operand takes.
template <typename Q>
inline bool quantize_row(Q* q, float* scale, const float* x, int C, int qmax) {
    static_assert(std::is_same_v<Q, int8_t> || std::is_same_v<Q, uint8_t>);
    constexpr int offset = std::is_same_v<Q, uint8_t> ? 128 : 0;
    float m = 0.f;
    bool bad = false;
    int c = 0;
#ifdef BB_OPS_AVX512
    {
        const __m512 z = _mm512_setzero_ps();
        __m512 mv = z;
        __mmask16 nonfinite = 0;
        for (; c + 16 <= C; c += 16) {
            const __m512 v = _mm512_loadu_ps(x + c);
            mv = _mm512_max_ps(mv, _mm512_abs_ps(v));
            // v·0 is NaN exactly when v is NaN or ±Inf
            nonfinite = static_cast<__mmask16>(nonfinite | _mm512_cmp_ps_mask(_mm512_mul_ps(v, z), z, _CMP_NEQ_UQ));
        }
        m = _mm512_reduce_max_ps(mv);
        bad = nonfinite != 0;
    }
#endif
    {
        const __m256 z = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.f);
        __m256 mv = _mm256_set1_ps(m), nonfinite = z;
        for (; c + 8 <= C; c += 8) {
            const __m256 v = _mm256_loadu_ps(x + c);
            mv = _mm256_max_ps(mv, _mm256_andnot_ps(sign, v));
            nonfinite = _mm256_or_ps(nonfinite, _mm256_cmp_ps(_mm256_mul_ps(v, z), z, _CMP_NEQ_UQ));
        }
        m = hmax8(mv);
        bad = bad || _mm256_movemask_ps(nonfinite) != 0;
    }
    for (; c < C; ++c) {
        const float a = std::fabs(x[c]);
        m = m < a ? a : m;
        bad = bad || x[c] * 0.f != 0.f;
    }
    if (bad || !(m <= 3.4e38f)) return false;
    const float r = inverse_step(m, static_cast<float>(qmax));
    if (r == 0.f) {
        std::fill(q, q + C, static_cast<Q>(offset));
        *scale = 0.f;
        return true;
    }
    c = 0;
    const __m128i flip = _mm_set1_epi8(static_cast<char>(offset));  // + 128 mod 256 on the int8 bits
#ifdef BB_OPS_AVX512
    {
        const __m512 rv = _mm512_set1_ps(r);
        for (; c + 16 <= C; c += 16) {
            const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c), rv));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c), _mm_xor_si128(_mm512_cvtsepi32_epi8(v), flip));
        }
    }
#endif
    {
        const __m256 rv = _mm256_set1_ps(r);
        for (; c + 8 <= C; c += 8) {
            const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + c), rv));
            const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(q + c), _mm_xor_si128(_mm_packs_epi16(w, w), flip));
        }
    }
    for (; c < C; ++c) q[c] = static_cast<Q>(static_cast<int>(std::nearbyint(x[c] * r)) + offset);
    *scale = m / static_cast<float>(qmax);
    return true;
}

inline bool quantize_row_s8(int8_t* q, float* scale, const float* x, int C, int qmax) {
    return quantize_row(q, scale, x, C, qmax);
}
// To ±127, plus 128: the activations of the int8 dense layers (ops/int8.hpp).
inline bool quantize_row_u8(uint8_t* q, float* scale, const float* x, int C) {
    return quantize_row(q, scale, x, C, 127);
}

// quantize_row_s8 on each of `groups` groups of `group` values of x, into q and scale(groups);
// false when one holds a NaN or ±Inf.
inline bool quantize_groups_s8(int8_t* q, float* scale, const float* x, int groups, int group, int qmax) {
    bool ok = true;
    for (int g = 0; g < groups; ++g) {
        const size_t at = static_cast<size_t>(g) * group;
        ok = quantize_row_s8(q + at, scale + g, x + at, group, qmax) && ok;
    }
    return ok;
}

// One int32 product dequantized, fma(acc(j) − offset(j), t, b), on 16, 8 or 1 lanes (offset may be
// null: 0; the difference is exact in int32): dequantize_rows' and softmax_rows_u8's arithmetic.
#ifdef BB_OPS_AVX512
inline __m512 dequantize16(const int32_t* acc, const int32_t* offset, __m512 t, __m512 b) {
    __m512i v = _mm512_loadu_si512(acc);
    if (offset) v = _mm512_sub_epi32(v, _mm512_loadu_si512(offset));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), t, b);
}
#endif
inline __m256 dequantize8(const int32_t* acc, const int32_t* offset, __m256 t, __m256 b) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc));
    if (offset) v = _mm256_sub_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), t, b);
}
inline float dequantize1(const int32_t* acc, const int32_t* offset, float t, float b) {
    return std::fma(static_cast<float>(*acc - (offset ? *offset : 0)), t, b);
}

// y(i, j) = fma(acc(i, j) − offset(j), xscale(i)·wscale(j), bias(j)) over rows × cols (offset and
// bias may be null: 0; the difference is exact in int32), then y(i, ·) = act(y(i, ·)) where act is
// given, each row while it is in L1 (activation_values<Exp::q8>: an 8-bit quantizer takes the
// activation's output next, FFN-in's GELU in int8.cpp; vmath.hpp), then y(i, j) +=
// residual(i, j) where residual is given; acc's rows are cols apart, y's and residual's ldy apart (a
// column slab of a wider y). The fused multiply-add is written out, so the result does not depend
// on the compiler contracting a product and a sum (it did at -O3, not at -O0).
inline void dequantize_rows(float* y, const int32_t* acc, const int32_t* offset, const float* xscale,
                            const float* wscale, const float* bias, const float* residual, int rows, int cols,
                            int ldy, const Activation* act) {
    for (int i = 0; i < rows; ++i) {
        const int32_t* a = acc + static_cast<size_t>(i) * cols;
        float* o = y + static_cast<size_t>(i) * ldy;
        // the residual in the loops below, or (after an activation) in a pass of its own
        const float* r = residual && !act ? residual + static_cast<size_t>(i) * ldy : nullptr;
        const float sx = xscale[i];
        int j = 0;
#ifdef BB_OPS_AVX512
        {
            const __m512 s = _mm512_set1_ps(sx);
            for (; j + 16 <= cols; j += 16) {
                const __m512 b = bias ? _mm512_loadu_ps(bias + j) : _mm512_setzero_ps();
                const __m512 t = _mm512_mul_ps(s, _mm512_loadu_ps(wscale + j));
                __m512 f = dequantize16(a + j, offset ? offset + j : nullptr, t, b);
                if (r) f = _mm512_add_ps(f, _mm512_loadu_ps(r + j));
                _mm512_storeu_ps(o + j, f);
            }
        }
#endif
        const __m256 s = _mm256_set1_ps(sx);
        for (; j + 8 <= cols; j += 8) {
            const __m256 b = bias ? _mm256_loadu_ps(bias + j) : _mm256_setzero_ps();
            const __m256 t = _mm256_mul_ps(s, _mm256_loadu_ps(wscale + j));
            __m256 f = dequantize8(a + j, offset ? offset + j : nullptr, t, b);
            if (r) f = _mm256_add_ps(f, _mm256_loadu_ps(r + j));
            _mm256_storeu_ps(o + j, f);
        }
        for (; j < cols; ++j) {
            const float f = dequantize1(a + j, offset ? offset + j : nullptr, sx * wscale[j], bias ? bias[j] : 0.f);
            o[j] = r ? f + r[j] : f;
        }
        if (act) activation_values<Exp::q8>(*act, o, o, static_cast<size_t>(cols));
        if (residual && act)
            for (j = 0; j < cols; ++j) o[j] += residual[static_cast<size_t>(i) * ldy + j];
    }
}

// The int8 attention's probabilities (ops/int8.hpp), row by row: the scores x(j) =
// (s(i,j) − offset(j))·(sa(i)·sb(j)) from the int32 products s (rows, cols), the offsets of a u8
// operand (null: 0; the difference exact) and the scales folded into sa, sb,
// e(j) = exp(x(j) − max x), then the probabilities times the column weights w (v's scales) as
// uint8 values and a scale per row:
//   y(j) = e(j)·w(j),  m = max_j y(j),  q(i,j) = round(y(j)·(255/m)),  scale(i) = m / (255·Σ_j e(j))
// so that softmax(x)(j)·w(j) ≈ scale(i)·q(i,j), the row's largest on 255 (a row whose y are all 0
// or subnormal, inverse_step: q 0, scale 0). Three passes over a row: x as dequantize_rows computes
// it (and its max), e as exp_affine_sum<Exp::q8> does (Σ e in its lane order; exp to 1.02e-4
// relative, 40× below q's half step: vmath.hpp) with y and its max, then q; the same bits as those
// functions and array_max in six. work: cols floats. False where a row's
// scores hold a NaN or their max is not finite (scales near the float range).
inline bool softmax_rows_u8(uint8_t* q, float* scale, const int32_t* s, const int32_t* offset, const float* sa,
                            const float* sb, const float* w, int rows, int cols, float* work) {
    const size_t n = static_cast<size_t>(cols);
    constexpr float lowest = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < rows; ++i) {
        const int32_t* a = s + static_cast<size_t>(i) * n;
        uint8_t* o = q + static_cast<size_t>(i) * n;
        const float sx = sa[i];
        float mx = lowest;
        bool nan = false;
        size_t j = 0;
#ifdef BB_OPS_AVX512
        {
            const __m512 s16 = _mm512_set1_ps(sx), z = _mm512_setzero_ps();
            __m512 m16 = _mm512_set1_ps(lowest);
            __mmask16 bad = 0;
            for (; j + 16 <= n; j += 16) {
                const __m512 t = _mm512_mul_ps(s16, _mm512_loadu_ps(sb + j));
                const __m512 x = dequantize16(a + j, offset ? offset + j : nullptr, t, z);
                bad = static_cast<__mmask16>(bad | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q));
                m16 = _mm512_max_ps(m16, x);
                _mm512_storeu_ps(work + j, x);
            }
            mx = _mm512_reduce_max_ps(m16);
            nan = bad != 0;
        }
#endif
        {
            const __m256 s8 = _mm256_set1_ps(sx), z = _mm256_setzero_ps();
            __m256 m8 = _mm256_set1_ps(mx), bad = z;
            for (; j + 8 <= n; j += 8) {
                const __m256 t = _mm256_mul_ps(s8, _mm256_loadu_ps(sb + j));
                const __m256 x = dequantize8(a + j, offset ? offset + j : nullptr, t, z);
                bad = _mm256_or_ps(bad, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
                m8 = _mm256_max_ps(m8, x);
                _mm256_storeu_ps(work + j, x);
            }
            mx = hmax8(m8);
            nan = nan || _mm256_movemask_ps(bad) != 0;
        }
        for (; j < n; ++j) {
            const float x = dequantize1(a + j, offset ? offset + j : nullptr, sx * sb[j], 0.f);
            nan = nan || std::isnan(x);
            mx = x > mx ? x : mx;
            work[j] = x;
        }
        if (nan || !(std::fabs(mx) <= 3.4e38f)) return false;
        float sum = 0.f, m = 0.f;  // Σ e; the max of y (y ≥ 0)
        j = 0;
#ifdef BB_OPS_AVX512
        {
            const __m512 m16 = _mm512_set1_ps(mx);
            __m512 acc = _mm512_setzero_ps(), ym = acc;
            for (; j + 16 <= n; j += 16) {
                const __m512 e = exp16<Exp::q8>(_mm512_sub_ps(_mm512_loadu_ps(work + j), m16));
                acc = _mm512_add_ps(acc, e);
                const __m512 y = _mm512_mul_ps(e, _mm512_loadu_ps(w + j));
                ym = _mm512_max_ps(ym, y);
                _mm512_storeu_ps(work + j, y);
            }
            sum = _mm512_reduce_add_ps(acc);
            m = _mm512_reduce_max_ps(ym);
        }
#endif
        {
            const __m256 m8 = _mm256_set1_ps(mx);
            __m256 acc = _mm256_setzero_ps(), ym = _mm256_set1_ps(m);
            for (; j + 8 <= n; j += 8) {
                const __m256 e = exp8<Exp::q8>(_mm256_sub_ps(_mm256_loadu_ps(work + j), m8));
                acc = _mm256_add_ps(acc, e);
                const __m256 y = _mm256_mul_ps(e, _mm256_loadu_ps(w + j));
                ym = _mm256_max_ps(ym, y);
                _mm256_storeu_ps(work + j, y);
            }
            sum += hsum8(acc);
            m = hmax8(ym);
        }
        for (; j < n; ++j) {
            const float e = fast_exp<Exp::q8>(work[j] - mx);
            sum += e;
            work[j] = e * w[j];
            m = work[j] > m ? work[j] : m;
        }
        const float r = inverse_step(m, 255.f);
        j = 0;
#ifdef BB_OPS_AVX512
        for (const __m512 k = _mm512_set1_ps(r); j + 16 <= n; j += 16)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + j),
                             _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(work + j), k))));
#endif
        for (const __m256 k = _mm256_set1_ps(r); j + 8 <= n; j += 8) {
            const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(work + j), k));
            const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o + j), _mm_packus_epi16(p, p));
        }
        for (; j < n; ++j) o[j] = static_cast<uint8_t>(static_cast<int>(std::nearbyint(work[j] * r)));
        scale[i] = r > 0.f ? m / (255.f * sum) : 0.f;
    }
    return true;
}

BB_OPS_ISA_END
