// int8 dense layers (int8.hpp): quantization, the packed int8 kernels, the blocked product.
#include "ops/int8.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include <omp.h>

#include "core/error.hpp"
#include "ops/bf16.hpp"
#include "ops/kernels.hpp"

namespace bertbench::ops {

namespace {

// Rows of the product computed and dequantized together by one thread, while their int32 block
// (kBlockBytes at most, and as many bytes of floats when the output is staged) is still in the
// core's caches. 128 KiB to 768 KiB run within a few per cent of each other (ops_micro's
// BM_DenseInference, BERT-base shapes, Zen 4); 3 MiB blocks were slower in the engine (bench
// --profile, BERT-base b32, on a busy host).
constexpr size_t kBlockBytes = size_t(768) << 10;

[[noreturn]] void nonfinite_activation() {
    fail("int8: a non-finite activation (NaN or Inf) cannot be quantized; the fp32 engine would "
         "carry it to the outputs (hint: run --dtype=fp32 to see where it starts)");
}

}  // namespace

void quantize_rows(int8_t* q, float* scale, const float* x, int N, int C) {
    int bad = 0;
    const Kernels& k = kernels();
#pragma omp parallel for schedule(static) reduction(|| : bad) if (worth_parallel(static_cast<size_t>(N) * C))
    for (int i = 0; i < N; ++i)
        bad = bad || !k.quantize_row_s8(q + static_cast<size_t>(i) * C, scale + i, x + static_cast<size_t>(i) * C, C, 127);
    if (bad) nonfinite_activation();
}

void quantize_columns(int8_t* q, float* scale, const float* w, int K, int N, int qmax) {
    std::vector<float> m(static_cast<size_t>(N), 0.f);
    for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) m[j] = std::max(m[j], std::fabs(w[static_cast<size_t>(k) * N + j]));
    std::vector<float> r(static_cast<size_t>(N));
    for (int j = 0; j < N; ++j) {
        if (!std::isfinite(m[j]))
            fail("int8: column {} of a {}x{} weight holds a non-finite value; it cannot be "
                 "quantized", j, K, N);
        scale[j] = m[j] / static_cast<float>(qmax);
        r[j] = m[j] > 0.f ? static_cast<float>(qmax) / m[j] : 0.f;
    }
    for (int k = 0; k < K; ++k)
        for (int j = 0; j < N; ++j) {
            const size_t at = static_cast<size_t>(k) * N + j;
            q[at] = static_cast<int8_t>(static_cast<int>(std::nearbyint(w[at] * r[j])));
        }
}

void Int8Weights::add(size_t offset, int K, int N) {
    if (index_.count(offset)) return;
    index_[offset] = entries_.size();
    entries_.push_back(Entry{offset, scales_.size(), K, N});
    scales_.resize(scales_.size() + static_cast<size_t>(N));
    packed_.add(offset, K, N, false);
}

void Int8Weights::quantize(const float* params) {
    // PackedWeights::pack reads every kernel at its offset of one buffer: a sparse int8 image of
    // the parameters, filled only where kernels are.
    size_t end = 0;
    for (const Entry& e : entries_) end = std::max(end, e.offset + static_cast<size_t>(e.K) * e.N);
    q_.assign(end, 0);
    const int qmax = int8_weight_max();
    for (const Entry& e : entries_)
        quantize_columns(q_.data() + e.offset, scales_.data() + e.scale_at, params + e.offset, e.K, e.N, qmax);
    packed_.pack(q_.data());
    q_ = {};
}

Int8Matrix Int8Weights::at(size_t offset) const {
    const auto it = index_.find(offset);
    if (it == index_.end()) return {};
    return {packed_.at(offset), scales_.data() + entries_[it->second].scale_at};
}

void linear_forward_int8(void* y, MatmulType y_type, int8_t* yq, float* yscale, const int8_t* xq, const float* xscale,
                         const Int8Matrix& w, const float* b, int N, int IN, int OUT,
                         const Activation* act) {
    BB_CHECK(w.packed && w.scale && (yq ? yscale != nullptr : y != nullptr));
    BB_CHECK(y_type == MatmulType::f32 || y_type == MatmulType::bf16);
    if (N <= 0) return;
    // Blocks of at most kBlockBytes of int32, a multiple of the thread count of them (even work).
    const int threads = omp_get_max_threads();
    const size_t bytes = static_cast<size_t>(N) * OUT * 4;
    int blocks = static_cast<int>(std::min<size_t>((bytes + kBlockBytes - 1) / kBlockBytes, static_cast<size_t>(N)));
    blocks = std::min(N, (blocks + threads - 1) / threads * threads);
    const int rows = (N + blocks - 1) / blocks;
    blocks = (N + rows - 1) / rows;
    const Kernels& k = kernels();
    std::exception_ptr error;  // the first thrown in the region, rethrown after it
    int bad = 0;
#pragma omp parallel reduction(|| : bad)
    {
        // Each thread's block buffers, kept between calls (grown, never shrunk): a forward makes six
        // calls per layer, and fresh ~1.5 MB buffers would be zeroed and page-faulted every time.
        thread_local AlignedVector<int32_t> acc;
        thread_local AlignedVector<float> v;
        const size_t block = static_cast<size_t>(rows) * OUT;
        const bool staged = yq || y_type == MatmulType::bf16;  // the block's float values, then converted
        if (acc.size() < block) acc.resize(block);
        if (staged && v.size() < block) v.resize(block);
#pragma omp for schedule(static)
        for (int blk = 0; blk < blocks; ++blk) try {
            const int r0 = blk * rows, m = std::min(rows, N - r0);
            const size_t at = static_cast<size_t>(r0) * OUT, n = static_cast<size_t>(m) * OUT;
            // Inside the parallel region the product runs on this thread alone (matmul.hpp).
            matmul(MatmulType::s8, false, m, OUT, IN, xq + static_cast<size_t>(r0) * IN, IN, w.packed, -1, 0.f,
                   acc.data(), OUT, nullptr, MatmulType::s32);
            float* out = staged ? v.data() : static_cast<float*>(y) + at;
            k.dequantize_rows(out, acc.data(), xscale + r0, w.scale, b, m, OUT);
            // over the whole block at once: each kernel call may open an (inactive, nested) OpenMP
            // region, a cost to pay once per block rather than per row
            if (act) k.activation_forward(*act, out, out, n, nullptr);
            if (yq) {
                for (int i = 0; i < m; ++i)
                    bad = bad || !k.quantize_row_s8(yq + at + static_cast<size_t>(i) * OUT, yscale + r0 + i,
                                                    out + static_cast<size_t>(i) * OUT, OUT, 127);
            } else if (staged) {
                to_bf16_serial(static_cast<bf16*>(y) + at, out, n);
            }
        } catch (...) {
#pragma omp critical(bb_int8_error)
            if (!error) error = std::current_exception();
        }
    }
    if (error) std::rethrow_exception(error);
    if (bad) nonfinite_activation();
}

int int8_weight_max() { return int8_native() ? 127 : 63; }

bool int8_native() {
    static const bool native = [] {
        const std::string impl = int8_gemm_impl();
        return impl.find("vnni") != std::string::npos || impl.find("amx") != std::string::npos;
    }();
    return native;
}

std::string int8_gemm_impl() { return matmul_impl(MatmulType::s8); }

}  // namespace bertbench::ops
