// Elementwise activations, forward and backward (dx = dy · f'(x), x = the saved input).
// GELU tanh form (reference BERT): 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)));
// GELU erf form (HF "gelu"): 0.5x(1 + erf(x/√2)); ReLU; tanh (pooler: dx = dy(1 - y²)).
// bf16 engines: forward and backward can also write the bf16 copy of their output that the next
// GEMM reads, chunk by chunk in the same pass (same bits as a separate to_bf16).
#pragma once

#include <cmath>
#include <cstddef>

#include "ops/bf16.hpp"
#include "ops/bias_grad.hpp"
#include "ops/isa.hpp"
#include "ops/parallel.hpp"
#include "ops/vmath.hpp"

namespace bertbench::ops {

enum class Activation { gelu_tanh, gelu_erf, relu };

}  // namespace bertbench::ops

BB_OPS_ISA_BEGIN

template <typename T>
inline T activation_value(Activation a, T x) {
    switch (a) {
        case Activation::gelu_tanh: {
            const T s = T(0.7978845608028654);  // √(2/π)
            return T(0.5) * x * (T(1) + vtanh(s * (x + T(0.044715) * x * x * x)));
        }
        case Activation::gelu_erf: return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
        case Activation::relu: return x > T(0) ? x : T(0);
    }
    return x;
}

template <typename T>
inline T activation_derivative(Activation a, T x) {
    switch (a) {
        case Activation::gelu_tanh: {
            const T s = T(0.7978845608028654);
            const T t = vtanh(s * (x + T(0.044715) * x * x * x));
            return T(0.5) * (T(1) + t) +
                   T(0.5) * x * (T(1) - t * t) * s * (T(1) + T(3 * 0.044715) * x * x);
        }
        case Activation::gelu_erf:
            return T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476))) +
                   x * vexp(T(-0.5) * x * x) * T(0.3989422804014327);  // 1/√(2π)
        case Activation::relu: return x > T(0) ? T(1) : T(0);
    }
    return T(1);
}

// y(n) = f(x(n)) on the calling thread (y may be x), the GELU tanh form vectorised (its exp to
// A's accuracy in float: Exp::q8 where an 8-bit quantizer takes y next).
template <Exp A = Exp::full, typename T>
inline void activation_values(Activation a, T* y, const T* x, size_t n) {
    if (a == Activation::gelu_tanh) return gelu_tanh_array<A>(y, x, n);
    for (size_t i = 0; i < n; ++i) y[i] = activation_value(a, x[i]);
}

// y(n) = f(x(n)) over chunks shared among the threads. yb(n) = bf16(y) too when not null; then y
// may be null (the backward needs x, not y: when y only feeds the next GEMM, a bf16 engine keeps
// only yb).
template <typename T>
void activation_forward(Activation a, T* y, const T* x, size_t n, bf16* yb = nullptr) {
    constexpr size_t kChunk = 4096;
    for_each_chunk(n, kChunk, n * 8, [&](size_t b, size_t e) {
        alignas(64) T tmp[kChunk];  // where y is null: the chunk's values, then converted
        T* out = y ? y + b : tmp;
        activation_values(a, out, x + b, e - b);
        if (yb) to_bf16_serial(yb + b, out, e - b);
    });
}

// dx(n) = dy(n) · f'(x(n)); dx may alias dy. dxb(n) = bf16(dx) too when not null; then dx may
// be null (a bf16 engine's GEMMs read only dxb). bg: dx's bias gradient too (bias_grad.hpp).
template <typename T>
void activation_backward(Activation a, T* dx, const T* dy, const T* x, size_t n,
                         bf16* dxb = nullptr, const BiasGrad<T>* bg = nullptr) {
    const auto values = [&](size_t b, size_t e, T* tmp) -> const T* {
        T* out = dx ? dx + b : tmp;
        if (a == Activation::gelu_tanh) {
            gelu_tanh_backward_array(out, dy + b, x + b, e - b);
        } else {
            for (size_t i = b; i < e; ++i) out[i - b] = dy[i] * activation_derivative(a, x[i]);
        }
        if (dxb) to_bf16_serial(dxb + b, out, e - b);
        return out;
    };
    if (bg) return for_each_row_summing(n, n * 8, *bg, values);
    for_each_chunk(n, 4096, n * 8, [&](size_t b, size_t e) {
        alignas(64) T tmp[4096];
        values(b, e, tmp);
    });
}

// y = tanh(x) in place
template <typename T>
void tanh_forward(T* y, size_t n) {
    for (size_t i = 0; i < n; ++i) y[i] = vtanh(y[i]);
}
// dx = dy · (1 - y²), y = tanh output; dx may alias dy
template <typename T>
void tanh_backward(T* dx, const T* dy, const T* y, size_t n) {
    for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
}

BB_OPS_ISA_END
