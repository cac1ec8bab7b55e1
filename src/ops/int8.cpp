// int8 dense layers (int8.hpp): quantization, the packed int8 kernels, the blocked product.
#include "ops/int8.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include <omp.h>

#include "core/error.hpp"
#include "ops/bf16.hpp"
#include "ops/int8_vnni.hpp"
#include "ops/kernels.hpp"

namespace bertbench::ops {

namespace {

// Rows of the product computed and dequantized together by one thread, while their int32 block
// (kBlockBytes at most) is still in the core's caches. 128 KiB to 768 KiB run within a few per
// cent of each other (ops_micro's BM_DenseInference, BERT-base shapes, Zen 4); 3 MiB blocks were
// slower in the engine (bench --profile, BERT-base b32, on a busy host).
constexpr size_t kBlockBytes = size_t(768) << 10;

// The most inputs per output of an int8 kernel whose sums fit int32 (u8 × s8: 255·127 per input).
constexpr int kMaxInputs = 65536;

// The first exception thrown inside an OpenMP region (none may leave it), rethrown after it.
// keep() is called from the catch handler.
struct FirstError {
    std::exception_ptr error;
    void keep() {
#pragma omp critical(bb_int8_error)
        if (!error) error = std::current_exception();
    }
    void rethrow() const {
        if (error) std::rethrow_exception(error);
    }
};

[[noreturn]] void nonfinite_activation() {
    fail("int8: a non-finite activation (NaN or Inf) cannot be quantized; the fp32 engine would "
         "carry it to the outputs (hint: run --dtype=fp32 to see where it starts)");
}

}  // namespace

void quantize_rows(uint8_t* q, float* scale, const float* x, int N, int C) {
    int bad = 0;
    const Kernels& k = kernels();
#pragma omp parallel for schedule(static) reduction(|| : bad) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i)
        bad = bad || !k.quantize_row_u8(q + static_cast<size_t>(i) * C, scale + i, x + static_cast<size_t>(i) * C, C);
    if (bad) nonfinite_activation();
}

namespace {

// The largest |w| so far, or NaN from the first NaN on (which std::max would pass over).
float abs_max(float m, float w) {
    const float a = std::fabs(w);
    return a > m || std::isnan(a) ? a : m;
}

// Channel j's scale from its largest |w| m (0 where m is 0 or subnormal: inverse_step), and the
// reciprocal step its values are multiplied by.
float channel_step(float& scale, float m, int j, int K, int N, int qmax) {
    if (!std::isfinite(m))
        fail("int8: output channel {} of a {}x{} weight holds a non-finite value; it cannot be "
             "quantized", j, K, N);
    const float r = inverse_step(m, static_cast<float>(qmax));
    scale = r > 0.f ? m / static_cast<float>(qmax) : 0.f;
    return r;
}

int8_t quantize_value(float w, float r) { return static_cast<int8_t>(static_cast<int>(std::nearbyint(w * r))); }

}  // namespace

void quantize_columns(int8_t* q, float* scale, const float* w, int K, int N, int qmax) {
    std::vector<float> m(static_cast<size_t>(N), 0.f);
    for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) m[j] = abs_max(m[j], w[static_cast<size_t>(k) * N + j]);
    std::vector<float> r(static_cast<size_t>(N));
    for (int j = 0; j < N; ++j) r[j] = channel_step(scale[j], m[j], j, K, N, qmax);
    for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) {
            const size_t at = static_cast<size_t>(k) * N + j;
            q[at] = quantize_value(w[at], r[j]);
        }
}

void quantize_columns_transposed(int8_t* q, float* scale, const float* wt, int K, int N, int qmax) {
    for (int j = 0; j < N; ++j) {
        const float* row = wt + static_cast<size_t>(j) * K;
        float m = 0.f;
        for (int k = 0; k < K; ++k) m = abs_max(m, row[k]);
        const float r = channel_step(scale[j], m, j, K, N, qmax);
        for (int k = 0; k < K; ++k) q[static_cast<size_t>(j) * K + k] = quantize_value(row[k], r);
    }
}

void Int8Weights::add(size_t offset, int K, int N, bool trans_b, int slab_cols) {
    if (index_.count(offset)) return;
    // the int32 sums hold up to 255·127·K (and the offsets 128·127·K)
    if (K > kMaxInputs)
        fail("int8: a dense kernel with {} inputs per output; the int32 sums hold at most {}", K, kMaxInputs);
    const int cols = slab_cols > 0 && slab_cols < N ? slab_cols : N;
    index_[offset] = entries_.size();
    entries_.push_back(Entry{offset, scales_.size(), slab_offsets_.size(), K, N, cols, trans_b, {}, {}, 0});
    scales_.resize(scales_.size() + static_cast<size_t>(N));
    offsets_.resize(scales_.size());
    for (int j0 = 0; j0 < N; j0 += cols) {  // each slab (K, n), or (n, K) with trans_b, in quantize()'s image
        const size_t n = static_cast<size_t>(std::min(cols, N - j0));
        slab_offsets_.push_back(staged_);
        packed_.add(staged_, K, static_cast<int>(n), trans_b);
        staged_ += n * static_cast<size_t>(K);
    }
}

void Int8Weights::add_side_by_side(std::span<const size_t> kernels, std::span<const size_t> biases, int K, int N) {
    BB_CHECK(!kernels.empty() && kernels.size() == biases.size());
    if (index_.count(kernels[0])) return;
    const int n = static_cast<int>(kernels.size());
    add(kernels[0], K, n * N, false, N);  // each kernel a slab
    Entry& e = entries_.back();
    e.parts.assign(kernels.begin(), kernels.end());
    e.part_biases.assign(biases.begin(), biases.end());
    e.bias_at = biases_.size();
    biases_.resize(biases_.size() + static_cast<size_t>(n) * N);
}

void Int8Weights::quantize(const float* params) {
    // PackedWeights::pack reads every slab at its offset of one buffer: the int8 image of the
    // slabs, each contiguous
    AlignedVector<int8_t> staged(staged_);
    std::vector<int8_t> q;
    const int qmax = int8_weight_max();
    std::vector<float> joined;
    for (const Entry& e : entries_) {
        const size_t K = static_cast<size_t>(e.K);
        q.resize(K * static_cast<size_t>(e.N));
        float* scale = scales_.data() + e.scale_at;
        const float* w = params + e.offset;
        if (!e.parts.empty()) {  // the parts' rows side by side, and their biases
            const size_t n = static_cast<size_t>(e.N) / e.parts.size();
            joined.resize(K * static_cast<size_t>(e.N));
            for (size_t p = 0; p < e.parts.size(); ++p) {
                for (size_t k = 0; k < K; ++k) std::copy_n(params + e.parts[p] + k * n, n, joined.data() + k * e.N + p * n);
                std::copy_n(params + e.part_biases[p], n, biases_.data() + e.bias_at + p * n);
            }
            w = joined.data();
        }
        int32_t* offset = offsets_.data() + e.scale_at;
        std::fill_n(offset, e.N, 0);
        if (e.trans_b) {
            quantize_columns_transposed(q.data(), scale, w, e.K, e.N, qmax);
            for (size_t j = 0; j < static_cast<size_t>(e.N); ++j)
                for (size_t k = 0; k < K; ++k) offset[j] += q[j * K + k];
        } else {
            quantize_columns(q.data(), scale, w, e.K, e.N, qmax);
            for (size_t k = 0; k < K; ++k)
                for (size_t j = 0; j < static_cast<size_t>(e.N); ++j) offset[j] += q[k * e.N + j];
        }
        for (int j = 0; j < e.N; ++j) offset[j] *= 128;
        for (int j0 = 0, s = 0; j0 < e.N; j0 += e.slab_cols, ++s) {
            const size_t n = static_cast<size_t>(std::min(e.slab_cols, e.N - j0));
            int8_t* dst = staged.data() + slab_offsets_[e.slab_at + static_cast<size_t>(s)];
            if (e.trans_b)  // rows j0.. of (N, K)
                std::copy_n(q.data() + static_cast<size_t>(j0) * K, n * K, dst);
            else  // columns j0.. of (K, N)
                for (size_t k = 0; k < K; ++k) std::copy_n(q.data() + k * e.N + j0, n, dst + k * n);
        }
    }
    packed_.pack(staged.data());
    slab_ptrs_.resize(slab_offsets_.size());
    for (size_t i = 0; i < slab_offsets_.size(); ++i) slab_ptrs_[i] = packed_.at(slab_offsets_[i]);
}

Int8Matrix Int8Weights::at(size_t offset) const {
    const auto it = index_.find(offset);
    if (it == index_.end()) return {};
    // a registered kernel before its quantize(): an Error, never an empty matrix that a caller
    // would take for "not int8" and run in float instead
    BB_CHECK(slab_ptrs_.size() == slab_offsets_.size());
    const Entry& e = entries_[it->second];
    return {slab_ptrs_.data() + e.slab_at, e.slab_cols, scales_.data() + e.scale_at, offsets_.data() + e.scale_at,
            e.parts.empty() ? nullptr : biases_.data() + e.bias_at};
}

void linear_forward_int8(void* y, MatmulType y_type, const Int8Output* out, const uint8_t* xq, const float* xscale,
                         const Int8Matrix& w, int N, int IN, int OUT, const Int8Epilogue& e) {
    BB_CHECK(w.slabs && w.slab_cols > 0 && w.scale && w.offset);
    BB_CHECK(y_type == MatmulType::f32 || y_type == MatmulType::bf16);
    const Int8Norm* const norm = e.norm;
    BB_CHECK(!out || ((out->rows != nullptr) != (out->groups != nullptr) && out->scale));
    BB_CHECK(norm ? y && y_type == MatmulType::f32 && (!out || out->rows) : (y != nullptr) != (out != nullptr));
    BB_CHECK(!e.residual || (y && y_type == MatmulType::f32));
    const bool grouped = out && out->groups;
    BB_CHECK(!grouped || (out->group > 0 && OUT % out->group == 0));
    // out's groups: the whole row to ±127 (plus 128), or groups of `group` columns to the weights' range
    const int group = grouped ? out->group : OUT, groups = OUT / group;
    const int gmax = int8_weight_max();
    const int cols = w.slab_cols, slabs = (OUT + cols - 1) / cols;
    BB_CHECK(!grouped || slabs == 1 || cols % group == 0);  // a group in one slab
    if (N <= 0) return;
    // out's rows and a LayerNorm need a row's every column (its scale, its mean), so a tile is then
    // a block of rows through every slab, staged as float (kBlockBytes at most) before it is
    // normalized or quantized; else a tile is a block of rows × one slab whose int32 product is
    // kBlockBytes at most, dequantized row by row while each row is in L1 where it is quantized
    // (out's groups, or out's rows of a one-slab kernel: FFN-in's) or converted. As many tiles as a
    // multiple of the thread count where the rows allow (even work).
    const bool whole = norm || (out && out->rows && slabs > 1);
    const int tile_slabs = whole ? 1 : slabs;  // tiles per block of rows
    const int threads = omp_get_max_threads();
    const size_t bytes = static_cast<size_t>(N) * (whole ? OUT : cols) * 4;
    int blocks = static_cast<int>(std::min<size_t>((bytes + kBlockBytes - 1) / kBlockBytes, static_cast<size_t>(N)));
    blocks = std::min(N, ((blocks * tile_slabs + threads - 1) / threads * threads + tile_slabs - 1) / tile_slabs);
    const int rows = (N + blocks - 1) / blocks;
    blocks = (N + rows - 1) / rows;
    const int tiles = blocks * tile_slabs;
    const Kernels& k = kernels();
    FirstError error;
    int bad = 0;
#pragma omp parallel reduction(|| : bad)
    {
        // Each thread's tile buffers, kept between calls (grown, never shrunk): a forward makes six
        // calls per layer, and fresh ~1 MB buffers would be zeroed and page-faulted every time.
        thread_local AlignedVector<int32_t> acc;
        thread_local AlignedVector<float> stage;
        // the float values of whole's rows, or of one row (L1) before it is quantized or converted
        const size_t staged = whole ? static_cast<size_t>(rows) * OUT : out || y_type == MatmulType::bf16 ? cols : 0;
        if (acc.size() < static_cast<size_t>(rows) * cols) acc.resize(static_cast<size_t>(rows) * cols);
        if (stage.size() < staged) stage.resize(staged);
        // tile t: slab t / blocks (whole: every slab), so that a thread's consecutive tiles share a
        // slab's weights
#pragma omp for schedule(static)
        for (int t = 0; t < tiles; ++t) try {
            const int r0 = (t % blocks) * rows, m = std::min(rows, N - r0);
            const int s0 = whole ? 0 : t / blocks, s1 = whole ? slabs : s0 + 1;
            for (int s = s0; s < s1; ++s) {
                const int j0 = s * cols, n = std::min(cols, OUT - j0);
                const size_t at = static_cast<size_t>(r0) * OUT + j0;
                const float* const bj = e.bias ? e.bias + j0 : nullptr;
                const float* const rj = e.residual ? e.residual + at : nullptr;
                const int32_t* const oj = w.offset + j0;
                // Inside the parallel region the product runs on this thread alone (matmul.hpp).
                matmul(MatmulType::u8, false, m, n, IN, xq + static_cast<size_t>(r0) * IN, IN, w.slabs[s], -1, 0.f,
                       acc.data(), n, nullptr, MatmulType::s32);
                if (whole || !staged) {
                    k.dequantize_rows(whole ? stage.data() + j0 : static_cast<float*>(y) + at, acc.data(), oj,
                                      xscale + r0, w.scale + j0, bj, rj, m, n, OUT, e.act);
                    continue;
                }
                for (int i = 0; i < m; ++i) {  // each row dequantized, activated and written while in L1
                    const size_t to = at + static_cast<size_t>(i) * OUT;
                    k.dequantize_rows(stage.data(), acc.data() + static_cast<size_t>(i) * n, oj, xscale + r0 + i,
                                      w.scale + j0, bj, nullptr, 1, n, n, e.act);
                    if (grouped) {  // the tile's groups of the row
                        float* const scale = out->scale + static_cast<size_t>(r0 + i) * groups + j0 / group;
                        bad = bad ||
                              !k.quantize_groups_s8(out->groups + to, scale, stage.data(), n / group, group, gmax);
                    } else if (out) {  // the whole row (one slab)
                        bad = bad || !k.quantize_row_u8(out->rows + to, out->scale + r0 + i, stage.data(), n);
                    } else {
                        to_bf16_serial(static_cast<bf16*>(y) + to, stage.data(), static_cast<size_t>(n));
                    }
                }
            }
            if (!whole) continue;
            const float* v = stage.data();  // the tile's rows
            if (norm) {
                float* const yr = static_cast<float*>(y) + static_cast<size_t>(r0) * OUT;
                k.layernorm_forward(yr, norm->mean + r0, norm->rstd + r0, v, norm->gamma, norm->beta, m, OUT,
                                    norm->eps, nullptr);
                v = yr;
            }
            for (int i = 0; out && i < m; ++i) {
                const size_t row = static_cast<size_t>(r0 + i);
                const float* const vi = v + static_cast<size_t>(i) * OUT;
                bad = bad || !k.quantize_row_u8(out->rows + row * OUT, out->scale + row, vi, OUT);
            }
        } catch (...) {
            error.keep();
        }
    }
    error.rethrow();
    if (bad) nonfinite_activation();
}

void attention_forward_int8(float* ctx, const int8_t* qkv, const float* scales, const AttentionShape& s) {
    const int H = s.H(), NH = s.NH, HS = s.HS, items = s.B * NH;
    const size_t H3 = 3 * static_cast<size_t>(H), NH3 = 3 * static_cast<size_t>(NH);
    const float c = 1.f / std::sqrt(static_cast<float>(HS));
    const Kernels& kk = kernels();
    const bool vnni = vnni_products();
    // Each thread runs a contiguous run of the items (sequence b, head h), in that order, of about
    // equal cost (rows × keys): a thread's items are then mostly its own tokens' in the dense layers
    // around (contiguous blocks of rows in thread order). Against OpenMP's dynamic schedule over
    // the same items: 1.60 -> 1.44 ms a step (BERT-base s128 b1, 2 threads, Zen 5, 6 alternating runs).
    std::vector<double> upto(static_cast<size_t>(items) + 1, 0.0);  // the cost of the items before each
    for (int it = 0; it < items; ++it) {
        const int b = it / NH, t = s.offsets[b + 1] - s.offsets[b];
        upto[it + 1] = upto[it] + static_cast<double>(t) * s.keys(b, t);
    }
    const int threads = worth_parallel(s.prob_offsets[s.B] * (s.HS + 1)) ? omp_get_max_threads() : 1;
    FirstError error;
    int bad = 0;
#pragma omp parallel num_threads(threads) reduction(|| : bad)
    for (int it = 0; it < items; ++it) try {
        const int p = omp_get_thread_num(), np = omp_get_num_threads();
        const double mid = 0.5 * (upto[it] + upto[it + 1]);  // the item's, by where its middle falls
        if (mid < upto[items] * p / np || (p + 1 < np && mid >= upto[items] * (p + 1) / np)) continue;
        const int b = it / NH, h = it % NH;
        const int o = s.offsets[b], t = s.offsets[b + 1] - o, kn = s.keys(b, t);
        if (t == 0 || bad) continue;
        // the item's probabilities, products and scales, per thread, kept between calls (grown)
        thread_local AlignedVector<uint8_t> u;
        thread_local AlignedVector<int32_t> acc;
        thread_local AlignedVector<float> f;
        thread_local AlignedVector<int8_t> packed;  // k or v in vnni_product's layout
        const size_t T = static_cast<size_t>(t), K = static_cast<size_t>(kn), C = static_cast<size_t>(HS);
        // u's rows are read in groups of 4 bytes by vnni_product: 3 bytes of room past the last
        if (u.size() < T * std::max(K, C) + 3) u.resize(T * std::max(K, C) + 3);
        if (acc.size() < T * std::max(K, C) + K) acc.resize(T * std::max(K, C) + K);
        if (f.size() < 2 * T + 3 * K + C) f.resize(2 * T + 3 * K + C);
        const size_t k_or_v = vnni ? std::max(vnni_packed_bytes(HS, kn), vnni_packed_bytes(kn, HS)) : 0;
        if (packed.size() < k_or_v) packed.resize(k_or_v);
        float *sq = f.data(), *sp = sq + T, *sk = sp + T, *sv = sk + K, *work = sv + K, *ones = work + K;
        const size_t r0 = static_cast<size_t>(o);
        for (size_t i = 0; i < T; ++i) sq[i] = scales[(r0 + i) * NH3 + h] * c;  // 1/√HS folded in
        for (size_t j = 0; j < K; ++j) {
            sk[j] = scales[(r0 + j) * NH3 + NH + h];
            sv[j] = scales[(r0 + j) * NH3 + 2 * NH + h];
        }
        std::fill_n(ones, C, 1.f);
        const int8_t* q = qkv + r0 * H3 + static_cast<size_t>(h) * HS;
        // q·kᵀ as u8 × s8 (faster than s8 × s8 in oneDNN, as the dense layers' products: int8.hpp):
        // the item's q plus 128 (in u), and each key's offset 128·Σ_c qk(j,c) (after the products)
        int32_t* const ko = acc.data() + T * std::max(K, C);
        for (size_t i = 0; i < T; ++i) {
            const int8_t* __restrict const qi = q + i * H3;
            uint8_t* __restrict const ui = u.data() + i * C;
            for (size_t x = 0; x < C; ++x) ui[x] = static_cast<uint8_t>(qi[x] ^ 0x80);  // = qi[x] + 128
        }
        for (size_t j = 0; j < K; ++j) {
            const int8_t* const kj = q + H + j * H3;
            int32_t sum = 0;
            for (size_t x = 0; x < C; ++x) sum += kj[x];
            ko[j] = 128 * sum;
        }
        // The products on AVX512-VNNI by hand (int8_vnni.hpp), else on oneDNN: inside the parallel
        // region on this thread alone (matmul.hpp). The same int32 sums either way.
        if (vnni) {
            vnni_pack_transposed(packed.data(), q + H, H3, HS, kn);
            vnni_product(acc.data(), K, u.data(), C, packed.data(), t, kn, HS);
        } else {
            matmul(MatmulType::u8, true, t, kn, HS, u.data(), HS, q + H, static_cast<int>(H3), 0.f, acc.data(), kn,
                   nullptr, MatmulType::s32);
        }
        bad = !kk.softmax_rows_u8(u.data(), sp, acc.data(), ko, sq, sk, sv, t, kn, work);
        if (bad) continue;
        if (vnni) {
            vnni_pack_rows(packed.data(), q + 2 * H, H3, kn, HS);
            vnni_product(acc.data(), C, u.data(), K, packed.data(), t, HS, kn);
        } else {
            matmul(MatmulType::u8, false, t, HS, kn, u.data(), kn, q + 2 * H, static_cast<int>(H3), 0.f, acc.data(),
                   HS, nullptr, MatmulType::s32);
        }
        kk.dequantize_rows(ctx + r0 * H + static_cast<size_t>(h) * HS, acc.data(), nullptr, sp, ones, nullptr, nullptr,
                           t, HS, H, nullptr);
    } catch (...) {
        error.keep();
    }
    error.rethrow();
    if (bad) fail("int8 attention: non-finite scores (q and k scales near the float range)");
}

int int8_weight_max() { return int8_native() ? 127 : 63; }

bool int8_native() {
    static const bool native = [] {
        const std::string impl = int8_gemm_impl();
        return impl.find("vnni") != std::string::npos || impl.find("amx") != std::string::npos || matmul_avx_vnni();
    }();
    return native;
}

std::string int8_gemm_impl() { return matmul_impl(MatmulType::s8); }

}  // namespace bertbench::ops
