// The instruction-set region of the kernel headers (ops/kernels.hpp explains the scheme).
// Every inline function and template in vmath, activation, softmax, layernorm, dropout,
// bias_grad, attention, embedding, cross_entropy and quantize sits between BB_OPS_ISA_BEGIN and BB_OPS_ISA_END: in
// the inline namespace bertbench::ops::avx2 everywhere, except in the AVX-512 copy of
// ops/kernels_isa.cpp (BB_OPS_AVX512 defined), where it is bertbench::ops::avx512 and compiled
// for AVX-512 by GCC's target pragma. Distinct names keep the two copies of e.g.
// layernorm_forward<float> apart at link time (the linker keeps one definition per name, and it
// could keep the AVX-512 one for every caller); the pragma confines AVX-512 code generation to
// that region, so the std:: templates and the plain types' members (DropoutStream, AttentionShape,
// which stay outside, in bertbench::ops) are compiled for the baseline in every object.
#pragma once

#ifdef BB_OPS_AVX512
#define BB_OPS_ISA avx512
#define BB_OPS_ISA_BEGIN                                                 \
    namespace bertbench::ops::inline avx512 {                           \
    _Pragma("GCC push_options")                                          \
    _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,fma\")")    \
    _Pragma("GCC target(\"prefer-vector-width=512\")")
#define BB_OPS_ISA_END _Pragma("GCC pop_options") }
#else
#define BB_OPS_ISA avx2
#define BB_OPS_ISA_BEGIN namespace bertbench::ops::inline avx2 {
#define BB_OPS_ISA_END }
#endif
