// One instruction set's table of float kernels (ops/kernels.hpp explains the scheme). This file
// is compiled twice: for the baseline (AVX2) in bb_ops, and with BB_OPS_AVX512 defined as the
// object library bb_ops_avx512, whose kernel headers then compile for AVX-512 (ops/isa.hpp).
#include "ops/kernels.hpp"

namespace bertbench::ops {

namespace {
namespace isa = ::bertbench::ops::BB_OPS_ISA;

const Kernels kTable = {
#ifdef BB_OPS_AVX512
    .isa = Isa::avx512,
    .name = "avx512",
#else
    .isa = Isa::avx2,
    .name = "avx2",
#endif
    .layernorm_forward = &isa::layernorm_forward<float>,
    .layernorm_backward = &isa::layernorm_backward<float>,
    .activation_forward = &isa::activation_forward<float>,
    .activation_backward = &isa::activation_backward<float>,
    .tanh_forward = &isa::tanh_forward<float>,
    .tanh_backward = &isa::tanh_backward<float>,
    .softmax_forward = &isa::softmax_forward<float>,
    .softmax_backward = &isa::softmax_backward<float>,
    .dropout_fill_mask = &isa::dropout_fill_mask,
    .dropout_fill_mask_parallel = &isa::dropout_fill_mask_parallel,
    .dropout_add_forward = &isa::dropout_add_forward<float>,
    .dropout_backward = &isa::dropout_backward<float>,
    .attention_forward = &isa::attention_forward<float>,
    .attention_backward = &isa::attention_backward<float>,
    .embedding_forward = &isa::embedding_forward<float>,
    .embedding_backward = &isa::embedding_backward<float>,
    .cross_entropy_forward = &isa::cross_entropy_forward<float>,
    .cross_entropy_backward = &isa::cross_entropy_backward<float>,
    .cross_entropy_forward_bias = &isa::cross_entropy_forward_bias<float>,
    .cross_entropy_backward_bf16 = &isa::cross_entropy_backward_bf16,
    .quantize_row_s8 = &isa::quantize_row_s8,
    .quantize_row_u8 = &isa::quantize_row_u8,
    .quantize_groups_s8 = &isa::quantize_groups_s8,
    .dequantize_rows = &isa::dequantize_rows,
    .softmax_rows_u8 = &isa::softmax_rows_u8,
    .array_argmax = &isa::array_argmax<float>,
    .exp_affine_sum = &isa::exp_affine_sum<isa::Exp::full, float>,
};
}  // namespace

#ifdef BB_OPS_AVX512
const Kernels* kernels_table_avx512() { return &kTable; }
#else
const Kernels* kernels_table_avx2() { return &kTable; }
#endif

}  // namespace bertbench::ops
