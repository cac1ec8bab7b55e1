// Backend conformance of the optimizer's ops (ops/optimizer.hpp): per-chunk Σx², accumulation,
// scaling, LAMB (MLPerf's and NGC TF's adaptation), AdamW and Keras Adam, on every backend this build has, against double-precision references
// of the formulas (docs/training.md) at odd sizes: tensors of 1, 37 and 1000 floats and one cut
// into three chunks, with and without weight decay. Tolerances as backend_ops_test.cpp: the
// elementwise updates atol 1e-6, rtol 1e-5; Σx² (double sums) rtol 1e-12; scaling exact.
#include <algorithm>

#include "backend_ops_util.hpp"

namespace bertbench::backend {

// Tensors of 1, 37, 1000 and 2·1024 + 5 floats (the last cut into chunks of 1024), laid out with
// 3 floats of padding after each; decay on all but the 37-float one.
class BackendOpsOptim : public BackendOps {
protected:
    void SetUp() override {
        BackendOps::SetUp();
        if (IsSkipped()) return;
        const size_t sizes[] = {1, 37, 1000, 2 * 1024 + 5};
        size_t at = 0;
        for (size_t t = 0; t < 4; ++t) {
            first.push_back(chunks.size());
            decay.push_back(t == 1 ? 0 : 1);
            for (size_t b = 0; b < sizes[t]; b += 1024)
                chunks.push_back({t, at + b, at + std::min(sizes[t], b + 1024)});
            at += sizes[t] + 3;
        }
        first.push_back(chunks.size());
        total = at;
        d_chunks = put(chunks);
        d_first = put(first);
        d_decay = put(decay);
        table = {d_chunks->get(), chunks.size(), d_first->get(), d_decay->get(), decay.size()};
    }
    std::vector<ops::ParamChunk> chunks;
    std::vector<size_t> first;
    std::vector<uint8_t> decay;
    size_t total = 0;
    std::unique_ptr<Buffer<ops::ParamChunk>> d_chunks;
    std::unique_ptr<Buffer<size_t>> d_first;
    std::unique_ptr<Buffer<uint8_t>> d_decay;
    ops::ChunkTable table;
};

namespace {

INSTANTIATE_TEST_SUITE_P(All, BackendOpsOptim, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(BackendOpsOptim, ChunkSumSquares) {
    REQUIRE_OP(chunk_sum_squares);
    const std::vector<float> x = rand_f(total, 11);
    const auto dx = put(x);
    Buffer<double> partial(be(), chunks.size());
    BB_OP(be(), chunk_sum_squares)(partial.get(), dx->get(), table);
    const std::vector<double> got = partial.download();
    for (size_t c = 0; c < chunks.size(); ++c) {
        double want = 0;
        for (size_t i = chunks[c].begin; i < chunks[c].end; ++i) want += double(x[i]) * x[i];
        EXPECT_NEAR(got[c], want, 1e-12 * want) << "chunk " << c;
    }
}

TEST_P(BackendOpsOptim, ChunkAccumulateLeavesPaddingAlone) {
    REQUIRE_OP(chunk_accumulate);
    const std::vector<float> acc0 = rand_f(total, 12), g = rand_f(total, 13);
    const auto dacc = put(acc0), dg = put(g);
    BB_OP(be(), chunk_accumulate)(dacc->get(), dg->get(), table, 0.75f, 3.0f);
    const std::vector<float> got = dacc->download();
    std::vector<double> want = wide(acc0);
    for (const ops::ParamChunk& c : chunks)
        for (size_t i = c.begin; i < c.end; ++i) want[i] += double(g[i]) * 0.75 / 3.0;
    EXPECT_TRUE(all_close("chunk_accumulate", got, want, kAtol, kRtol));
}

TEST_P(BackendOpsOptim, ScaleValuesIsExactAndFindsNonFinite) {
    REQUIRE_OP(scale_values);
    for (const bool inject : {false, true}) {
        std::vector<float> x = rand_f(1001, 14);
        if (inject) x[777] = std::numeric_limits<float>::infinity();
        const auto dx = put(x);
        Buffer<int32_t> flag(be(), 1);
        BB_OP(be(), scale_values)(dx->get(), x.size(), 0.125f, flag.get());
        const std::vector<float> got = dx->download();
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], x[i] * 0.125f) << i;
        EXPECT_EQ(flag.download()[0], inject ? 1 : 0);
    }
}

// The reference's formulas in double on the same fp32 inputs and constants.
struct Moments {
    double m, v;
};
template <typename K>
Moments moments(double m, double v, double g, const K& k) {
    return {m * k.b1 + g * k.one_minus_b1, v * k.b2 + g * g * k.one_minus_b2};
}

// One LAMB update against the double reference; adapt empty: the table's default (adaptation
// where decay), else the per-tensor adaptation flags (NGC TF's LAMB: every tensor).
void check_lamb(Backend& b, ops::ChunkTable table, const std::vector<ops::ParamChunk>& chunks,
                const std::vector<size_t>& first, const std::vector<uint8_t>& decay,
                const std::vector<uint8_t>& adapt, size_t total) {
    const auto put_b = [&](const auto& v) { return std::make_unique<Buffer<typename std::decay_t<decltype(v)>::value_type>>(b, v); };
    const std::unique_ptr<Buffer<uint8_t>> d_adapt = adapt.empty() ? nullptr : put_b(adapt);
    table.adapt = d_adapt ? d_adapt->get() : nullptr;
    const std::vector<uint8_t>& adapted = adapt.empty() ? decay : adapt;
    const std::vector<float> w0 = rand_f(total, 15), m0 = rand_f(total, 16, 1e-2), g = rand_f(total, 18);
    std::vector<float> v0 = rand_f(total, 17, 1e-3);
    for (float& v : v0) v = std::abs(v);
    const ops::LambConstants k{0.9f, 0.999f, 0.1f, 0.001f, 0.19f, 0.001999f, 1e-6f, 0.01f};
    const float lr = 1e-3f, gs = 0.5f;
    const auto dw = put_b(w0), dm = put_b(m0), dv = put_b(v0), dg = put_b(g);
    Buffer<double> partials(b, 2 * chunks.size());
    Buffer<float> ratios(b, decay.size());
    BB_OP(b, lamb_update)(dw->get(), dm->get(), dv->get(), dg->get(), table, gs, lr, k, partials.get(),
                          ratios.get());
    std::vector<double> w = wide(w0), m = wide(m0), v = wide(v0), r(decay.size(), 1.0);
    for (size_t t = 0; t < decay.size(); ++t) {
        const size_t bt = chunks[first[t]].begin, e = chunks[first[t + 1] - 1].end;
        std::vector<double> u(e - bt);
        double w2 = 0, u2 = 0;
        for (size_t i = bt; i < e; ++i) {
            const Moments mv = moments(m[i], v[i], double(g[i]) * gs, k);
            m[i] = mv.m;
            v[i] = mv.v;
            u[i - bt] = (mv.m / k.bc1) / (std::sqrt(mv.v / k.bc2) + k.eps) + (decay[t] ? k.wd * w[i] : 0.0);
            w2 += w[i] * w[i];
            u2 += u[i - bt] * u[i - bt];
        }
        if (adapted[t] && w2 > 0 && u2 > 0) r[t] = std::sqrt(w2) / std::sqrt(u2);
        for (size_t i = bt; i < e; ++i) w[i] -= r[t] * lr * u[i - bt];
    }
    EXPECT_TRUE(all_close("lamb w", dw->download(), w, kAtol, kRtol));
    EXPECT_TRUE(all_close("lamb m", dm->download(), m, kAtol, kRtol));
    EXPECT_TRUE(all_close("lamb v", dv->download(), v, kAtol, kRtol));
    EXPECT_TRUE(all_close("lamb trust ratios", ratios.download(), r, kAtol, kRtol));
    // the padding between tensors is neither read nor written
    const std::vector<float> wg = dw->download();
    for (size_t t = 0; t + 1 < first.size(); ++t) {
        const size_t e = chunks[first[t + 1] - 1].end;
        EXPECT_EQ(wg[e], w0[e]) << "padding after tensor " << t;
    }
}

TEST_P(BackendOpsOptim, Lamb) {
    REQUIRE_OP(lamb_update);
    check_lamb(be(), table, chunks, first, decay, {}, total);
}

// NGC TF's LAMB: the trust ratio on every tensor, the 37-float one (no decay) included; and the
// other way round, a tensor with decay but no adaptation (u keeps wd·w, r = 1).
TEST_P(BackendOpsOptim, LambAdaptationApartFromDecay) {
    REQUIRE_OP(lamb_update);
    check_lamb(be(), table, chunks, first, decay, {1, 1, 1, 1}, total);
    check_lamb(be(), table, chunks, first, decay, {1, 0, 0, 1}, total);
}

TEST_P(BackendOpsOptim, AdamW) {
    REQUIRE_OP(adamw_update);
    const std::vector<float> w0 = rand_f(total, 19), m0 = rand_f(total, 20, 1e-2), g = rand_f(total, 22);
    std::vector<float> v0 = rand_f(total, 21, 1e-3);
    for (float& v : v0) v = std::abs(v);
    const ops::AdamConstants k{0.9f, 0.999f, 0.1f, 0.001f, 1e-6f, 0.01f};
    const float lr = 2e-3f, gs = 1.5f;
    const auto dw = put(w0), dm = put(m0), dv = put(v0), dg = put(g);
    BB_OP(be(), adamw_update)(dw->get(), dm->get(), dv->get(), dg->get(), table, gs, lr, k);
    std::vector<double> w = wide(w0), m = wide(m0), v = wide(v0);
    for (const ops::ParamChunk& c : chunks)
        for (size_t i = c.begin; i < c.end; ++i) {
            const Moments mv = moments(m[i], v[i], double(g[i]) * gs, k);
            m[i] = mv.m;
            v[i] = mv.v;
            w[i] -= lr * (mv.m / (std::sqrt(mv.v) + k.eps) + (decay[c.tensor] ? k.wd * w[i] : 0.0));
        }
    EXPECT_TRUE(all_close("adamw w", dw->download(), w, kAtol, kRtol));
    EXPECT_TRUE(all_close("adamw m", dm->download(), m, kAtol, kRtol));
    EXPECT_TRUE(all_close("adamw v", dv->download(), v, kAtol, kRtol));
}

// MLPerf TF2's AdamWeightDecay: w -= lr·wd·w where decay, then Keras Adam with alpha; with wd = 0
// no tensor decays.
TEST_P(BackendOpsOptim, KerasAdam) {
    REQUIRE_OP(keras_adam_update);
    for (const float wd : {0.01f, 0.0f}) {
        const std::vector<float> w0 = rand_f(total, 23), m0 = rand_f(total, 24, 1e-2), g = rand_f(total, 26);
        std::vector<float> v0 = rand_f(total, 25, 1e-3);
        for (float& v : v0) v = std::abs(v);
        const ops::KerasAdamConstants k{0.1f, 0.001f, 1e-6f, wd, 6.2e-4f};
        const float lr = 2e-3f, gs = 1.5f;
        const auto dw = put(w0), dm = put(m0), dv = put(v0), dg = put(g);
        BB_OP(be(), keras_adam_update)(dw->get(), dm->get(), dv->get(), dg->get(), table, gs, lr, k);
        std::vector<double> w = wide(w0), m = wide(m0), v = wide(v0);
        for (const ops::ParamChunk& c : chunks)
            for (size_t i = c.begin; i < c.end; ++i) {
                const double gi = double(g[i]) * gs;
                if (decay[c.tensor]) w[i] -= double(lr) * k.wd * w[i];
                m[i] = (1 - k.one_minus_b1) * m[i] + k.one_minus_b1 * gi;
                v[i] = (1 - k.one_minus_b2) * v[i] + k.one_minus_b2 * gi * gi;
                w[i] -= k.alpha * m[i] / (std::sqrt(v[i]) + k.eps);
            }
        EXPECT_TRUE(all_close("keras adam w", dw->download(), w, kAtol, kRtol)) << "wd " << wd;
        EXPECT_TRUE(all_close("keras adam m", dm->download(), m, kAtol, kRtol)) << "wd " << wd;
        EXPECT_TRUE(all_close("keras adam v", dv->download(), v, kAtol, kRtol)) << "wd " << wd;
        const std::vector<float> wg = dw->download();
        for (size_t t = 0; t + 1 < first.size(); ++t) {
            const size_t e = chunks[first[t + 1] - 1].end;
            EXPECT_EQ(wg[e], w0[e]) << "padding after tensor " << t;
        }
    }
}

}  // namespace
}  // namespace bertbench::backend
