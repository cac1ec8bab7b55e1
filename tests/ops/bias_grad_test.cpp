// The bias gradient summed by dy's producer (ops/bias_grad.hpp): GELU and dropout backward with a
// BiasGrad. db against a double sum of the unfused op's output and against bias_backward, within
// what fp32 summation allows (1e-6 · Σ|values| per column); the op's own outputs (fp32 dx, bf16
// dxb) bit-identical to the unfused call's; no fp32 dx at all (a bf16 engine's call) gives the
// same db and dxb bits; the same db bits with 1 and 2 threads. Shapes: a few rows (serial), rows past one 64-row chunk with a
// partial last chunk and rows longer than the 2048-value segment (parallel), odd C.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "check.hpp"
#include "ops/activation.hpp"
#include "ops/dropout.hpp"
#include "ops/gemm.hpp"

namespace bertbench::ops {
namespace {

using testing::rand_f;
using testing::same_bits;

struct BiasShape {
    int N, C;
};
const BiasShape kShapes[] = {{5, 37}, {301, 129}, {70, 2053}};

// One producer call: op(dx, dxb, bg) computes dx (may be null) from fixed inputs.
using Op = std::function<void(float* dx, bf16* dxb, const BiasGrad<float>* bg)>;

void check_producer(const std::string& name, const BiasShape& sh, const Op& op) {
    const size_t n = static_cast<size_t>(sh.N) * sh.C;
    const std::string what = name + " " + std::to_string(sh.N) + "x" + std::to_string(sh.C);
    // unfused: fp32 dx, then the bias gradient by bias_backward, the bf16 copy by to_bf16
    std::vector<float> dx0(n), db0(sh.C, 0.25f);
    op(dx0.data(), nullptr, nullptr);
    bias_backward(db0.data(), dx0.data(), sh.N, sh.C);
    std::vector<bf16> dxb0(n);
    to_bf16(dxb0.data(), dx0.data(), n);
    std::vector<double> want(sh.C, 0.25), mag(sh.C, 0.25);
    for (int r = 0; r < sh.N; ++r)
        for (int c = 0; c < sh.C; ++c) {
            const float v = dx0[static_cast<size_t>(r) * sh.C + c];
            want[c] += v;
            mag[c] += std::abs(v);
        }
    const auto close = [&](const std::string& which, const std::vector<float>& got, const auto& ref) {
        int bad = 0;
        for (int c = 0; c < sh.C; ++c)
            if (!(std::abs(got[c] - ref[c]) <= 1e-6 * mag[c]) && bad++ == 0)
                ADD_FAILURE() << what << " db vs " << which << ": column " << c << " got " << got[c]
                              << " want " << ref[c] << " (sum of |values| " << mag[c] << ")";
        EXPECT_EQ(bad, 0) << what << " db vs " << which << ": columns not close";
    };

    std::vector<float> part(bias_grad_part_size(sh.N, sh.C), -7.f);
    const auto fused = [&](bool fp32_out, int threads, std::vector<float>& dx, std::vector<bf16>& dxb,
                           std::vector<float>& db) {
        dx.assign(n, -3.f);
        dxb.assign(n, bf16{0xdead});
        db.assign(sh.C, 0.25f);
        const BiasGrad<float> bg{db.data(), part.data(), sh.C};
        const int had = omp_get_max_threads();
        omp_set_num_threads(threads);
        op(fp32_out ? dx.data() : nullptr, dxb.data(), &bg);
        omp_set_num_threads(had);
    };
    std::vector<float> dx, db, dx1, db1, dx2, db2;
    std::vector<bf16> dxb, dxb1, dxb2;
    fused(true, 2, dx, dxb, db);
    EXPECT_TRUE(same_bits(dx, dx0)) << what << ": fp32 dx changed by summing the bias gradient";
    EXPECT_TRUE(same_bits(dxb, dxb0)) << what << ": bf16 dx is not to_bf16 of dx";
    close("double", db, want);
    close("bias_backward", db, db0);

    fused(false, 2, dx1, dxb1, db1);  // no fp32 dx: what a bf16 engine asks for
    EXPECT_TRUE(same_bits(dxb1, dxb0)) << what << ": bf16 dx without fp32 dx";
    EXPECT_TRUE(same_bits(db1, db)) << what << ": db without fp32 dx";
    EXPECT_TRUE(std::all_of(dx1.begin(), dx1.end(), [](float v) { return v == -3.f; }))
        << what << ": wrote to an fp32 dx it was not given";

    fused(true, 1, dx2, dxb2, db2);
    EXPECT_TRUE(same_bits(db2, db)) << what << ": db differs between 1 and 2 threads";
    EXPECT_TRUE(same_bits(dx2, dx0)) << what << ": dx with 1 thread";
}

TEST(BiasGrad, GeluBackwardSumsItsOutput) {
    for (const BiasShape& sh : kShapes) {
        const size_t n = static_cast<size_t>(sh.N) * sh.C;
        const std::vector<float> x = rand_f(n, 3 * n, 2.0), dy = rand_f(n, 3 * n + 1, 1.0);
        for (const Activation a : {Activation::gelu_tanh, Activation::gelu_erf}) {
            // in place when dx is given, as the engine runs it (dx aliases dy)
            check_producer("gelu " + std::to_string(static_cast<int>(a)), sh,
                           [&](float* dx, bf16* dxb, const BiasGrad<float>* bg) {
                               std::vector<float> io = dy;
                               activation_backward(a, dx ? io.data() : nullptr, io.data(), x.data(), n,
                                                   dxb, bg);
                               if (dx) std::copy(io.begin(), io.end(), dx);
                           });
        }
    }
}

TEST(BiasGrad, DropoutBackwardSumsItsOutput) {
    for (const BiasShape& sh : kShapes) {
        const size_t n = static_cast<size_t>(sh.N) * sh.C;
        const std::vector<float> dy = rand_f(n, 5 * n, 1.0);
        std::vector<uint8_t> mask(n);
        dropout_fill_mask_parallel(mask.data(), DropoutStream{11, 4, 2, 0.9}, n);
        for (const bool masked : {true, false})
            check_producer(std::string("dropout ") + (masked ? "masked" : "no mask"), sh,
                           [&](float* dx, bf16* dxb, const BiasGrad<float>* bg) {
                               dropout_backward(dx, dy.data(), masked ? mask.data() : nullptr, 0.9f, n,
                                                dxb, bg);
                           });
    }
}

}  // namespace
}  // namespace bertbench::ops
