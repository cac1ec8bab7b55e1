// The fused attention (ops/flash_attention.hpp) against the materialized kernel (ops/attention.hpp):
// forward ctx and dq/dk/dv on odd lengths (1, 7, 33, 129, 200), several heads, key_lengths, with and
// without dropout (the same stream: any difference in which elements drop would show as O(1)
// errors), small odd tiles (many partial tiles) and the default tiles; bits independent of the
// thread count; bf16 operands; and finite differences in double.
// Tolerances (isclose form): double 1e-12/1e-10; fp32 atol 2e-6, rtol 2e-5 (summation order and
// the online softmax's rescaling); bf16 vs the materialized bf16 kernel atol 2e-3, rtol 2e-2 (both
// round their P and dS operands to bf16, at different points); FD atol 1e-8, rtol 1e-6.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "ops/attention.hpp"
#include "ops/flash_attention.hpp"

namespace bertbench::ops {
namespace {

using bertbench::testing::all_close;
using bertbench::testing::random_vector;

struct FlashCase {
    std::vector<int32_t> offsets, key_lengths;
    std::vector<size_t> pofs;
    int NH = 0, HS = 0;
    AttentionShape shape() const {
        return {offsets.data(), pofs.data(), static_cast<int>(offsets.size()) - 1, NH, HS,
                key_lengths.empty() ? nullptr : key_lengths.data()};
    }
    int N() const { return offsets.back(); }
    size_t nh() const { return static_cast<size_t>(N()) * NH * HS; }
};

FlashCase make_case(const std::vector<int>& lengths, const std::vector<int>& keys, int NH, int HS) {
    FlashCase c;
    c.NH = NH;
    c.HS = HS;
    c.offsets.push_back(0);
    for (int t : lengths) c.offsets.push_back(c.offsets.back() + t);
    c.key_lengths.assign(keys.begin(), keys.end());
    c.pofs.resize(lengths.size() + 1);
    attention_prob_offsets(c.pofs.data(), c.offsets.data(), static_cast<int>(lengths.size()), NH,
                           c.key_lengths.empty() ? nullptr : c.key_lengths.data());
    return c;
}

template <typename T>
std::vector<T> rnd(size_t n, uint64_t seed, double scale) {
    const std::vector<double> d = random_vector(n, seed, scale);
    return std::vector<T>(d.begin(), d.end());
}

template <typename T>
struct Result {
    std::vector<T> ctx, dq, dk, dv;
};

struct Inputs {
    std::vector<float> q, k, v, dctx;
    std::vector<bf16> qb, kb, vb, dctxb;
};

Inputs make_inputs(const FlashCase& c, uint64_t seed) {
    Inputs in;
    const size_t n = c.nh();
    // scale 2: scores q·k/√HS of a few units, so the softmax is far from uniform
    in.q = rnd<float>(n, seed, 2.0);
    in.k = rnd<float>(n, seed + 1, 2.0);
    in.v = rnd<float>(n, seed + 2, 1.0);
    in.dctx = rnd<float>(n, seed + 3, 1.0);
    for (auto* p : {&in.q, &in.k, &in.v, &in.dctx}) {
        std::vector<bf16> b(n);
        to_bf16(b.data(), p->data(), n);
        if (p == &in.q) in.qb = b;
        if (p == &in.k) in.kb = b;
        if (p == &in.v) in.vb = b;
        if (p == &in.dctx) in.dctxb = b;
    }
    return in;
}

Result<float> run_materialized(const FlashCase& c, const Inputs& in, const DropoutStream* drop,
                               bool bf) {
    const AttentionShape s = c.shape();
    const size_t np = c.pofs.back(), n = c.nh();
    Result<float> r;
    r.ctx.assign(n, 0.f);
    r.dq.assign(n, 0.f);
    r.dk.assign(n, 0.f);
    r.dv.assign(n, 0.f);
    std::vector<float> probs(np), scratch(np);
    std::vector<uint8_t> mask(np);
    const AttentionBf16 ab{in.qb.data(), in.kb.data(), in.vb.data(), in.dctxb.data()};
    attention_forward(r.ctx.data(), probs.data(), scratch.data(), mask.data(), in.q.data(),
                      in.k.data(), in.v.data(), s, drop, bf ? &ab : nullptr);
    attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), scratch.data(), in.dctx.data(),
                       in.q.data(), in.k.data(), in.v.data(), probs.data(),
                       drop ? mask.data() : nullptr, drop ? static_cast<float>(drop->keep_prob) : 1.f, s,
                       bf ? &ab : nullptr);
    return r;
}

Result<float> run_fused(const FlashCase& c, const Inputs& in, const DropoutStream* drop, bool bf,
                        FlashTiles tiles) {
    const AttentionShape s = c.shape();
    const size_t n = c.nh();
    Result<float> r;
    r.ctx.assign(n, 7.f);  // outputs are overwritten: start from garbage
    r.dq.assign(n, 7.f);
    r.dk.assign(n, 7.f);
    r.dv.assign(n, 7.f);
    std::vector<float> lse(static_cast<size_t>(c.N()) * c.NH);
    const FlashBf16 fb{in.qb.data(), in.kb.data(), in.vb.data(), in.dctxb.data()};
    flash_attention_forward(r.ctx.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s, drop,
                            bf ? &fb : nullptr, tiles);
    // bf16: the fp32 q, k, v are not read (the bf16 engine shares them between layers)
    flash_attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), in.dctx.data(),
                             bf ? nullptr : in.q.data(), bf ? nullptr : in.k.data(),
                             bf ? nullptr : in.v.data(), r.ctx.data(), lse.data(), s,
                             drop, bf ? &fb : nullptr, tiles);
    return r;
}

void expect_close(const Result<float>& got, const Result<float>& want, double atol, double rtol,
                  const std::string& what) {
    EXPECT_TRUE(all_close(what + " ctx", got.ctx, want.ctx, atol, rtol));
    EXPECT_TRUE(all_close(what + " dq", got.dq, want.dq, atol, rtol));
    EXPECT_TRUE(all_close(what + " dk", got.dk, want.dk, atol, rtol));
    EXPECT_TRUE(all_close(what + " dv", got.dv, want.dv, atol, rtol));
}

struct FlashShape {
    std::vector<int> lengths, keys;
    int NH, HS;
};

const std::vector<FlashShape>& shapes() {
    static const std::vector<FlashShape> s = {
        {{1}, {}, 1, 4},         {{7, 1, 33}, {}, 3, 5},
        {{129, 200}, {}, 2, 16}, {{33, 7, 129}, {20, 7, 1}, 3, 8},  // padded features: K_b < T_b
        {{200}, {131}, 2, 64},
    };
    return s;
}

const std::vector<FlashTiles>& tile_choices() {
    static const std::vector<FlashTiles> t = {{5, 7}, {1, 1}, {64, 128}, {300, 300}};
    return t;
}

TEST(FlashAttention, Fp32MatchesMaterialized) {
    for (const FlashShape& sh : shapes()) {
        const FlashCase c = make_case(sh.lengths, sh.keys, sh.NH, sh.HS);
        const Inputs in = make_inputs(c, 11);
        for (int d = 0; d < 2; ++d) {
            const DropoutStream stream{99, 3, 4, 0.7};
            const DropoutStream* drop = d ? &stream : nullptr;
            const Result<float> want = run_materialized(c, in, drop, false);
            for (const FlashTiles& t : tile_choices()) {
                if (t.q == 1 && c.N() > 100) continue;  // 1×1 tiles: only the small shapes
                const std::string what = "T0=" + std::to_string(sh.lengths[0]) + " NH=" +
                                         std::to_string(sh.NH) + " drop=" + std::to_string(d) +
                                         " tiles " + std::to_string(t.q) + "x" + std::to_string(t.k);
                expect_close(run_fused(c, in, drop, false, t), want, 2e-6, 2e-5, what);
            }
        }
    }
}

// Dropout drops the same elements: with keep 0.5 and v = e_j patterns the contributions of single
// elements are visible, so a mask mismatch anywhere is an O(1) error in ctx.
TEST(FlashAttention, DropoutDropsTheSameElements) {
    const FlashCase c = make_case({37, 9}, {}, 2, 8);
    Inputs in = make_inputs(c, 5);
    const DropoutStream stream{7, 1, 13, 0.5};
    const Result<float> want = run_materialized(c, in, &stream, false);
    const Result<float> nodrop = run_materialized(c, in, nullptr, false);
    const Result<float> got = run_fused(c, in, &stream, false, {4, 6});
    expect_close(got, want, 2e-6, 2e-5, "keep 0.5");
    EXPECT_FALSE(all_close("dropout has an effect", want.ctx, nodrop.ctx, 1e-3, 1e-3));
    // a different stream gives a different ctx (the test could fail)
    const DropoutStream other{7, 2, 13, 0.5};
    EXPECT_FALSE(all_close("other step", run_fused(c, in, &other, false, {4, 6}).ctx, want.ctx, 1e-3, 1e-3));
}

// ‖got − want‖ / ‖want‖
double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
    double e = 0, w = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        e += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        w += double(want[i]) * want[i];
    }
    return std::sqrt(e / (w > 0 ? w : 1));
}

// bf16 operands: both kernels round P' and dS to bf16 (at different points: the fused kernel
// rounds unnormalised tiles, and its D = dctx·ctx holds the forward's rounding of P' where the
// materialized kernel's Σ dP·P does not), so each is compared with the fp32 result: the fused
// kernel's relative L2 error must stay within 1.5× the materialized kernel's + 1e-3, and every
// element within the bf16 tolerance atol 2e-2, rtol 2e-2 of the materialized bf16 result.
TEST(FlashAttention, Bf16AsAccurateAsMaterializedBf16) {
    for (const FlashShape& sh : shapes()) {
        const FlashCase c = make_case(sh.lengths, sh.keys, sh.NH, sh.HS);
        const Inputs in = make_inputs(c, 21);
        for (int d = 0; d < 2; ++d) {
            const DropoutStream stream{5, 8, 1, 0.9};
            const DropoutStream* drop = d ? &stream : nullptr;
            const Result<float> exact = run_materialized(c, in, drop, false);
            const Result<float> want = run_materialized(c, in, drop, true);
            for (const FlashTiles& t : {FlashTiles{5, 7}, FlashTiles{}}) {
                const std::string what = "bf16 T0=" + std::to_string(sh.lengths[0]) +
                                         " drop=" + std::to_string(d) + " tiles " +
                                         std::to_string(t.q) + "x" + std::to_string(t.k);
                const Result<float> got = run_fused(c, in, drop, true, t);
                expect_close(got, want, 2e-2, 2e-2, what);
                for (const auto& [name, g, w, x] :
                     {std::tuple{"ctx", &got.ctx, &want.ctx, &exact.ctx},
                      std::tuple{"dq", &got.dq, &want.dq, &exact.dq},
                      std::tuple{"dk", &got.dk, &want.dk, &exact.dk},
                      std::tuple{"dv", &got.dv, &want.dv, &exact.dv}}) {
                    const double ef = rel_l2(*g, *x), em = rel_l2(*w, *x);
                    EXPECT_LE(ef, 1.5 * em + 1e-3) << what << " " << name << ": fused " << ef
                                                   << " vs materialized " << em;
                }
            }
        }
    }
}

TEST(FlashAttention, BitsIndependentOfThreadCount) {
    const FlashCase c = make_case({129, 33, 200, 7}, {100, 33, 150, 7}, 4, 16);
    const Inputs in = make_inputs(c, 3);
    const DropoutStream stream{1, 2, 3, 0.8};
    for (bool bf : {false, true}) {
        const int before = omp_get_max_threads();
        omp_set_num_threads(1);
        const Result<float> one = run_fused(c, in, &stream, bf, {});
        omp_set_num_threads(2);
        const Result<float> two = run_fused(c, in, &stream, bf, {});
        omp_set_num_threads(before);
        for (const auto& [a, b] : {std::pair{&one.ctx, &two.ctx}, std::pair{&one.dq, &two.dq},
                                   std::pair{&one.dk, &two.dk}, std::pair{&one.dv, &two.dv}})
            EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size() * sizeof(float)), 0) << "bf16 " << bf;
    }
}

TEST(FlashAttention, RowsThatAreNoKeyGetZeroDkDv) {
    const FlashCase c = make_case({9}, {4}, 2, 3);
    const Inputs in = make_inputs(c, 8);
    const Result<float> r = run_fused(c, in, nullptr, false, {2, 3});
    for (int i = 0; i < 9; ++i)
        for (int j = 0; j < 6; ++j) {
            const float dk = r.dk[static_cast<size_t>(i) * 6 + j];
            if (i >= 4) EXPECT_EQ(dk, 0.f) << i;
            else EXPECT_NE(dk, 0.f) << i;
        }
}

TEST(FlashAttention, BadTilesAreAnError) {
    const FlashCase c = make_case({3}, {}, 1, 2);
    const Inputs in = make_inputs(c, 1);
    std::vector<float> ctx(c.nh()), lse(3);
    EXPECT_ANY_THROW(flash_attention_forward(ctx.data(), lse.data(), in.q.data(), in.k.data(),
                                             in.v.data(), c.shape(), nullptr, nullptr, {0, 4}));
}

// double: equal to the materialized kernel to rounding, and its backward equals finite differences
// of its own forward (loss = Σ r·ctx), with dropout and key_lengths.
TEST(FlashAttention, DoubleMatchesMaterializedAndFiniteDifferences) {
    const FlashCase c = make_case({1, 7, 13}, {1, 5, 13}, 2, 3);
    const size_t n = c.nh(), np = c.pofs.back();
    std::vector<double> q = random_vector(n, 1), k = random_vector(n, 2), v = random_vector(n, 3);
    const std::vector<double> r = random_vector(n, 4);
    const DropoutStream stream{3, 4, 5, 0.75};
    const AttentionShape s = c.shape();
    const FlashTiles tiles{4, 5};
    std::vector<double> ctx(n), lse(static_cast<size_t>(c.N()) * c.NH);
    auto loss = [&] {
        flash_attention_forward(ctx.data(), lse.data(), q.data(), k.data(), v.data(), s, &stream,
                                nullptr, tiles);
        return bertbench::testing::dot(ctx, r);
    };
    loss();
    std::vector<double> dq(n), dk(n), dv(n);
    flash_attention_backward(dq.data(), dk.data(), dv.data(), r.data(), q.data(), k.data(), v.data(),
                             ctx.data(), lse.data(), s, &stream, nullptr, tiles);
    // vs the materialized kernel in double
    std::vector<double> mctx(n), probs(np), scratch(np), mq(n), mk(n), mv(n);
    std::vector<uint8_t> mask(np);
    attention_forward(mctx.data(), probs.data(), scratch.data(), mask.data(), q.data(), k.data(),
                      v.data(), s, &stream);
    attention_backward(mq.data(), mk.data(), mv.data(), scratch.data(), r.data(), q.data(), k.data(),
                       v.data(), probs.data(), mask.data(), 0.75, s);
    EXPECT_TRUE(all_close("ctx vs materialized", ctx, mctx, 1e-12, 1e-10));
    EXPECT_TRUE(all_close("dq vs materialized", dq, mq, 1e-12, 1e-10));
    EXPECT_TRUE(all_close("dk vs materialized", dk, mk, 1e-12, 1e-10));
    EXPECT_TRUE(all_close("dv vs materialized", dv, mv, 1e-12, 1e-10));
    EXPECT_TRUE(all_close("dq fd", dq, bertbench::testing::numeric_grad(q, loss), 1e-8, 1e-6));
    EXPECT_TRUE(all_close("dk fd", dk, bertbench::testing::numeric_grad(k, loss), 1e-8, 1e-6));
    EXPECT_TRUE(all_close("dv fd", dv, bertbench::testing::numeric_grad(v, loss), 1e-8, 1e-6));
}

}  // namespace
}  // namespace bertbench::ops
