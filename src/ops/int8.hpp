// int8 inference for the dense layers (docs/engine.md "int8 inference"): weights quantized once
// per output channel (symmetric s8), activations per token at run time (symmetric, stored as u8:
// below), products in int8 with int32 accumulation on oneDNN's VNNI/AMX kernels, dequantized (and
// biased, activated, re-quantized for the next dense layer) while each block of rows is in cache.
//   x ≈ sx(i)·qx(i,k) with sx(i) = max_k |x(i,k)| / 127, qx = round(x / sx) (nearest even)
//   W ≈ qw(k,j)·sw(j) with sw(j) = max_k |W(k,j)| / qmax, qw = round(W / sw)
//   y(i,j) = sx(i)·sw(j)·Σ_k qx(i,k)·qw(k,j) + b(j)     (the sum exact in int32)
// The activations are stored as ux = qx + 128 (u8), the operand type the dot-product instructions
// take (vpdpbusd: u8 × s8); oneDNN's s8 × s8 product adds the 128 itself, inside its kernels, and
// ran 10-30 % slower (ops_micro BM_DenseInference, ways 5 and 6, Emerald Rapids). The sum over ux
// exceeds the one over qx by 128·Σ_k qw(k,j) per column, subtracted in the epilogue, exactly:
//   Σ_k qx(i,k)·qw(k,j) = Σ_k ux(i,k)·qw(k,j) − o(j),  o(j) = 128·Σ_k qw(k,j)
// qmax is 127 where oneDNN runs int8 on dot-product units (AVX512-VNNI, AVX-VNNI, AMX), and 63
// elsewhere: without VNNI, oneDNN's int8 kernels add pairs of u8·s8 products in int16
// (vpmaddubsw), which saturates with 8-bit weights; 7-bit weights cannot overflow it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/aligned.hpp"
#include "ops/activation.hpp"
#include "ops/matmul.hpp"

namespace bertbench::ops {

// Per-row symmetric quantization of x (N, C) to ±127, stored plus 128 (ux above): q (N, C), scale
// (N). A row of zeros (or of subnormal values, whose reciprocal step would overflow: ops/quantize.hpp
// inverse_step) has scale 0 and q 128. Non-finite values are an Error (int8 cannot carry them).
void quantize_rows(uint8_t* q, float* scale, const float* x, int N, int C);
// Per-column symmetric quantization of W (K, N) row-major to [-qmax, qmax]: q (K, N), scale (N).
void quantize_columns(int8_t* q, float* scale, const float* w, int K, int N, int qmax);
// The same for W stored transposed, (N, K) row-major (one output channel per row): q (N, K).
void quantize_columns_transposed(int8_t* q, float* scale, const float* wt, int K, int N, int qmax);

// A quantized dense kernel: oneDNN's packed layout (for u8 × s8 products) and its per-output-channel
// scales and offsets o(j), in
// slabs of slab_cols output channels (the last may be narrower), each packed on its own, so that a
// product with few rows and many columns (the tied MLM decoder: 30522 columns) splits over threads
// by columns and reads each weight once. The encoder's kernels are one slab.
struct Int8Matrix {
    const void* const* slabs = nullptr;  // null: no such kernel
    int slab_cols = 0;
    const float* scale = nullptr;
    const int32_t* offset = nullptr;  // o(j) = 128·Σ_k qw(k,j), per output channel
    // kernels side by side (Int8Weights::add_side_by_side): their biases, likewise; else null
    const float* bias = nullptr;
};

// The dense kernels of an inference engine, quantized and packed once (the weights do not change).
class Int8Weights {
public:
    // Registers the kernel (K, N) row-major at element `offset` of the parameters, or with trans_b
    // the matrix stored (N, K) there (the tied decoder's embeddings, one output channel per row),
    // packed in slabs of slab_cols output channels (0: one slab).
    void add(size_t offset, int K, int N, bool trans_b = false, int slab_cols = 0);
    // Registers, at kernels[0], one kernel (K, n·N) made of the n kernels (K, N) at `kernels` side
    // by side (an attention layer's Q, K and V as one product), each kernel a slab, and its bias
    // (n·N) made of the biases (N) at `biases` (Int8Matrix::bias).
    void add_side_by_side(std::span<const size_t> kernels, std::span<const size_t> biases, int K, int N);
    // Quantizes every registered kernel from the float parameters and packs it.
    void quantize(const float* params);
    // The kernel registered at `offset` (slabs null when none is); an Error for a kernel registered
    // since the last quantize().
    Int8Matrix at(size_t offset) const;
    size_t bytes() const {
        return packed_.bytes() + (scales_.size() + biases_.size()) * sizeof(float) + offsets_.size() * sizeof(int32_t);
    }

private:
    struct Entry {
        size_t offset, scale_at, slab_at;  // slab_at: the first slab's in slab_ptrs_
        int K, N, slab_cols;
        bool trans_b;
        std::vector<size_t> parts, part_biases;  // add_side_by_side's (then bias_at in biases_)
        size_t bias_at = 0;
    };
    PackedWeights packed_{MatmulType::u8};  // each slab at its offset in quantize()'s int8 image
    std::vector<Entry> entries_;
    std::unordered_map<size_t, size_t> index_;  // offset -> entries_
    AlignedVector<float> scales_, biases_;
    AlignedVector<int32_t> offsets_;      // indexed as scales_
    std::vector<size_t> slab_offsets_;    // each slab's offset in that image
    std::vector<const void*> slab_ptrs_;  // each slab's packed form, after quantize()
    size_t staged_ = 0;                   // the image's size
};

// Where linear_forward_int8 writes act(y) quantized for the next int8 product, instead of y:
struct Int8Output {
    // each row to ±127 plus 128 (quantize_rows' form: the next dense layer's input), scale (N) ...
    uint8_t* rows = nullptr;
    // ... or each group of `group` columns of a row on its own, to ±int8_weight_max() as int8 (the
    // int8 attention's q, k and v, which its products take as either operand; w's slabs whole
    // groups), scale (N, OUT / group)
    int8_t* groups = nullptr;
    int group = 0;
    float* scale = nullptr;
};

// What linear_forward_int8 does to each row of its product after dequantizing it, in this
// order, each step where given (all null: v alone).
struct Int8Norm {  // a LayerNorm (layernorm_forward's bits), its mean and rstd (N) written
    const float* gamma;
    const float* beta;
    float* mean;
    float* rstd;
    double eps;
};
struct Int8Epilogue {
    const float* bias = nullptr;      // v(i,j) += b(j)
    const Activation* act = nullptr;  // v = act(v)
    const float* residual = nullptr;  // v += residual(i,j) (N, OUT: as dropout_add_forward adds it)
    const Int8Norm* norm = nullptr;   // v(i,·) = LayerNorm(v(i,·))
};

// The int8 dense layer: acc = ux(N, IN)·qw(IN, OUT) in int32 (xq as quantize_rows writes it), then
// per row v(i,j) = sx(i)·sw(j)·(acc(i,j) − o(j)) and e's steps, written into y (N, OUT) as float,
// or as bf16 with y_type bf16 (rounded once, as to_bf16), or, with out, quantized into out's rows
// or groups (y null then). With e.norm, both: the normalized rows into y (float), and into out's
// rows where out is given (the next dense layer's input). A residual needs a float y.
void linear_forward_int8(void* y, MatmulType y_type, const Int8Output* out, const uint8_t* xq, const float* xscale,
                         const Int8Matrix& w, int N, int IN, int OUT, const Int8Epilogue& e);

struct AttentionShape;  // ops/attention.hpp

// The attention of an int8 engine (inference: no dropout, no probabilities kept), both products
// in int8 with int32 accumulation, from the Q, K and V product's quantized output
// (linear_forward_int8 into Int8Output groups of HS): qkv (N, 3H), each row q | k | v, each head's HS
// channels quantized on their own, and scales (N, 3·NH) likewise, so that for head h of row r
// q(r) ≈ sq(r)·qq(r), k(r) ≈ sk(r)·qk(r), v(r) ≈ sv(r)·qv(r). For each sequence b and head h
// (AttentionShape's layout; i over its t rows, j over its kn keys):
//   x(i,j) = qq(i)·qk(j) · (sq(i)/√HS)·sk(j),  e(i,j) = exp(x(i,j) − max_j x(i,j))  (fp32)
//     (qq(i)·qk(j) run as u8 × s8, exactly: (qq(i) + 128)·qk(j) − 128·Σ_c qk(j,c), as the dense layers)
//   P(i,j)·sv(j) = e(i,j)·sv(j) / Σ_j e(i,j) ≈ sp(i)·u(i,j), v's scales folded into the u8 values:
//     m(i) = max_j e(i,j)·sv(j),  u = round(e·sv·(255/m)),  sp(i) = m(i) / (255·Σ_j e(i,j))
//   ctx(i,c) = sp(i)·Σ_j u(i,j)·qv(j,c)
void attention_forward_int8(float* ctx, const int8_t* qkv, const float* scales, const AttentionShape& s);

// The weight range quantize_columns should use on this CPU (127 or 63, above).
int int8_weight_max();
// True where oneDNN's int8 matmul runs on dot-product units (AVX512-VNNI, AVX-VNNI or AMX).
bool int8_native();
// oneDNN's implementation of the int8 matmul ("brg:avx512_core_vnni", "gemm:jit", ...).
std::string int8_gemm_impl();

}  // namespace bertbench::ops
