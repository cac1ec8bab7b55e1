// The int8 attention's two per-head products (ops/int8.hpp attention_forward_int8: q·kᵀ and P·v,
// e.g. 128×64·64×128 and 128×128·128×64 at BERT-base seq 128) as u8 × s8 with int32 results, written
// for AVX512-VNNI (vpdpbusd). One head's two products at T=128: 6.8 µs with the packing against
// 8.4 µs on oneDNN (ops_micro BM_AttentionProductsInt8, one thread, Zen 5; docs/engine.md "The
// attention's products by hand"). The sums are exact int32, the same as matmul(MatmulType::u8)'s.
//
// B is used in the layout vpdpbusd reads: for each group of 4 inputs (k = 4g..4g+3) and output n,
// the 4 bytes B(4g..4g+3, n) side by side, n running fastest, padded with zeros to 64 outputs and
// to whole groups of 4 inputs. A's rows are read 4 bytes at a time: each row must be readable to
// its 4·ceil(K/4)th byte (the bytes past K meet B's zero padding, so their values do not matter).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bertbench::ops {

// True where the CPU has AVX512-VNNI and the process runs the AVX-512 kernels (kernels(): BB_ISA);
// elsewhere the attention's products run on oneDNN.
bool vnni_products();

// Bytes of the packed form of a B with K inputs and N outputs.
size_t vnni_packed_bytes(int K, int N);
// Packs B(k, n) = src[n·ld + k] (B stored transposed: output n's K inputs contiguous, as the keys
// of q·kᵀ are).
void vnni_pack_transposed(int8_t* packed, const int8_t* src, size_t ld, int K, int N);
// Packs B(k, n) = src[k·ld + n] (B stored row-major, as v is).
void vnni_pack_rows(int8_t* packed, const int8_t* src, size_t ld, int K, int N);
// C(M, N) = A(M, K)·B as int32, rows ldc apart; A u8, rows lda apart (readable as above).
void vnni_product(int32_t* C, size_t ldc, const uint8_t* A, size_t lda, const int8_t* packed, int M, int N, int K);

}  // namespace bertbench::ops
