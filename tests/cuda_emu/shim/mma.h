// Host emulation (cuda_runtime.h) of wmma's contract on 16×16×16 tiles: a fragment holds its whole
// tile; lane 0 of the warp does the loads, products and stores (the other lanes' fragments are
// never stored), so the other lanes see a stored tile only after the kernel's __syncwarp. Pointers
// must be 32-byte aligned and strides multiples of 16 bytes, as on the GPU. Products accumulate in
// fp32 in k order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda::wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation has 16x16x16 tiles only");
    float x[256];
};
using Accumulator = fragment<accumulator, 16, 16, 16, float>;

namespace emu {
inline bool lane0() {
    return (threadIdx.x & 31) == 0;
}
inline void check(const void* p, unsigned ldm, size_t elem) {
    if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ldm * elem) % 16 != 0) {
        std::fprintf(stderr,
                     "wmma emulation: tile at %p with stride %u x %zu bytes is misaligned\n", p,
                     ldm, elem);
        std::abort();
    }
}
inline float value(float v) {
    return v;
}
inline float value(__nv_bfloat16 v) {
    return __bfloat162float(v);
}
// Element (r, c) of a tile stored row-major (or column-major) with stride ldm.
inline size_t at(int r, int c, unsigned ldm, bool row_major) {
    return row_major ? r * ldm + c : c * ldm + r;
}
}  // namespace emu

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
    emu::check(p, ldm, sizeof(T));
    if (!emu::lane0()) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
            f.x[r * 16 + c] = emu::value(p[emu::at(r, c, ldm, std::is_same_v<Layout, row_major>)]);
}
inline void load_matrix_sync(Accumulator& f, const float* p, unsigned ldm, layout_t layout) {
    emu::check(p, ldm, sizeof(float));
    if (!emu::lane0()) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
            f.x[r * 16 + c] = p[emu::at(r, c, ldm, layout == mem_row_major)];
}
inline void store_matrix_sync(float* p, const Accumulator& f, unsigned ldm, layout_t layout) {
    emu::check(p, ldm, sizeof(float));
    if (!emu::lane0()) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c)
            p[emu::at(r, c, ldm, layout == mem_row_major)] = f.x[r * 16 + c];
}
template <typename Fragment>
void fill_fragment(Fragment& f, float v) {
    for (float& e : f.x) e = v;
}
template <typename A, typename B>
void mma_sync(Accumulator& d, const A& a, const B& b, const Accumulator& c) {
    if (!emu::lane0()) return;
    float t[256];
    for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 16; ++n) {
            float s = c.x[r * 16 + n];
            for (int k = 0; k < 16; ++k) s += a.x[r * 16 + k] * b.x[k * 16 + n];
            t[r * 16 + n] = s;
        }
    for (int i = 0; i < 256; ++i) d.x[i] = t[i];
}

}  // namespace nvcuda::wmma
