// The machine's ceilings that utilisation is measured against: the FMA peak (a register-only
// loop of independent FMAs at the CPU's widest vector) and the sgemm ceiling on BERT's linear-layer
// shapes (forward, backward-data and backward-weight forms), timed through ops::gemm, i.e. with the
// GEMM library the engine itself calls.
#pragma once

#include <string>
#include <vector>

#include "ops/bf16.hpp"

namespace bertbench::bench {

struct GemmShape {
    std::string role;   // "qkv/attn-out fwd", "ffn-in bwd-weight", ...
    int m, n, k;        // C[m,n] = op(A)[m,k] · op(B)[k,n]
    bool trans_a, trans_b;
    int count;          // occurrences per encoder layer (weights the aggregate)
};

struct GemmResult {
    GemmShape shape;
    double gflops_median = 0, gflops_max = 0;
};

struct Ceiling {
    int threads = 0;
    ops::Precision dtype = ops::Precision::fp32;
    double fma_peak_gflops = 0;       // register-only FMA loop
    double gemm_gflops = 0;           // aggregate over shapes: Σ flops / Σ best time, weighted by count
    std::vector<GemmResult> gemms;
};

// The 18 linear-layer GEMMs of one encoder layer (6 projections x {fwd, bwd-data, bwd-weight})
// at `tokens` rows, for hidden size h and intermediate size i.
std::vector<GemmShape> bert_linear_shapes(int tokens, int h, int i);

// Widest FMA vector this CPU runs (8 floats for AVX2, 16 with AVX-512): the peak loop uses it,
// because the sgemm picks its kernels for the CPU at run time too.
int fma_vector_width();
double measure_fma_peak(int threads, double seconds);
// Each shape is timed `reps` times after one warm-up; returns median and best per shape.
// fp32: ops::gemm (oneDNN sgemm). bf16: ops::gemm_bf16 as the engine calls it (operands already
// bf16; a transposed A is formed while converting, so the timed call is A·op(B)).
Ceiling measure_ceiling(int threads, int tokens, int h, int i, int reps,
                        ops::Precision dtype = ops::Precision::fp32);

}  // namespace bertbench::bench
