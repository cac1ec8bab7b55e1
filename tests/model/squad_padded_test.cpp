// The padded-query layout of run_squad.py features (Batch::key_lengths): every max_seq_length
// position is a row that runs through the encoder, only the first K_b rows are attention keys, and
// the span loss takes its softmax over all positions. Checked here:
//  - padded_batch / append_padded_sequence build the layout and reject bad features;
//  - the attention op on T_b queries × K_b keys: central differences in double (with and without
//    dropout; atol 1e-7, rtol 1e-6), equality with the padded -10000 additive-mask computation in
//    float (atol 1e-6, rtol 1e-5), and its bf16 path against fp32 on the same bf16 operands;
//  - the SQuAD engine: finite differences in double of every tensor (sampled elements, dropout on,
//    a label on a padding row; atol 1e-8, rtol 1e-6), float vs double, real rows unchanged by the
//    padding rows, key_lengths = T_b bit-identical to no key_lengths (dropout masks included);
//  - parity with tests/tools/torch_bert.py's run_squad.py (float64, padded, -10000 key mask,
//    compute_loss over max_seq_length positions): loss, start/end logits at every position and
//    every parameter gradient; and the bf16 engine against torch's bf16 autocast.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

#include "../ops/check.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/safetensors.hpp"
#include "model/batch.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "ops/attention.hpp"
#include "ops/bf16.hpp"
#include "test_util.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::all_close;
using bertbench::testing::dot;
using bertbench::testing::error_of;
using bertbench::testing::make_params;
using bertbench::testing::numeric_grad;
using bertbench::testing::random_vector;
using bertbench::testing::rel_l2;
using bertbench::testing::tiny_config;
using Vec = std::vector<double>;

// B padded features of S positions; sequence b has keys[b] real tokens ([CLS] … [SEP] with
// segment ids 0 then 1), then id-0 segment-0 padding, as run_squad.py writes them.
Batch padded_features(const std::vector<int>& keys, int S, int vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> ids, mask, seg;
    for (int k : keys) {
        for (int i = 0; i < S; ++i) {
            const bool real = i < k;
            ids.push_back(real ? static_cast<int32_t>(1 + rng() % (vocab - 1)) : 0);
            mask.push_back(real ? 1 : 0);
            seg.push_back(real && i >= (k + 1) / 2 ? 1 : 0);
        }
    }
    return padded_batch(ids, mask, seg, S, "test features");
}

// The same sequences with their real tokens only (the unpadded, real-tokens-only layout).
Batch real_tokens_only(const Batch& p) {
    Batch b;
    b.batch_size = p.batch_size;
    b.seq_offsets = {0};
    for (int s = 0; s < p.batch_size; ++s) {
        const int o = p.seq_offsets[s], k = p.key_lengths[s];
        b.input_ids.insert(b.input_ids.end(), p.input_ids.begin() + o, p.input_ids.begin() + o + k);
        b.segment_ids.insert(b.segment_ids.end(), p.segment_ids.begin() + o, p.segment_ids.begin() + o + k);
        b.seq_offsets.push_back(b.seq_offsets.back() + k);
    }
    return b;
}

TEST(SquadPadded, BatchFromFeatures) {
    const Batch b = padded_features({3, 5, 1}, 5, 30, 1);
    EXPECT_EQ(b.batch_size, 3);
    EXPECT_EQ(b.seq_offsets, (std::vector<int32_t>{0, 5, 10, 15}));
    EXPECT_EQ(b.key_lengths, (std::vector<int32_t>{3, 5, 1}));
    EXPECT_EQ(b.num_tokens(), 15);
    EXPECT_EQ(b.input_ids[3], 0);  // padding kept as a row
    const std::vector<int32_t> ids = {101, 7, 102, 0}, seg = {0, 0, 0, 0};
    EXPECT_NE(error_of([&] { padded_batch(ids, std::vector<int32_t>{1, 0, 1, 0}, seg, 4, "f.tf_record"); })
                  .find("f.tf_record: feature 0: input_mask[2] = 1, expected ones followed by zeros"),
              std::string::npos);
    EXPECT_NE(error_of([&] { padded_batch(ids, std::vector<int32_t>{0, 0, 0, 0}, seg, 4, "f"); })
                  .find("input_mask has no 1"),
              std::string::npos);
    EXPECT_NE(error_of([&] { padded_batch(ids, std::vector<int32_t>{1, 1, 2, 0}, seg, 4, "f"); })
                  .find("input_mask[2] = 2"),
              std::string::npos);
    EXPECT_NE(error_of([&] { padded_batch(ids, std::vector<int32_t>{1, 1, 1}, seg, 4, "f"); })
                  .find("expected the same multiple of max_seq_length = 4"),
              std::string::npos);
    EXPECT_NE(error_of([&] { padded_batch(ids, std::vector<int32_t>{1, 1, 1, 1}, seg, 3, "f"); })
                  .find("max_seq_length = 3"),
              std::string::npos);
    Batch unpadded = real_tokens_only(b);
    const std::string e = error_of([&] {
        append_padded_sequence(unpadded, ids, std::vector<int32_t>{1, 1, 1, 0}, seg, "x");
    });
    EXPECT_NE(e.find("appended to a batch of 3 unpadded sequences"), std::string::npos) << e;
    EXPECT_EQ(unpadded.num_tokens(), 9);  // unchanged
    EXPECT_EQ(padded_batch({}, {}, {}, 4, "f").seq_offsets, (std::vector<int32_t>{0}));
}

// Attention with T_b = 7, 13, 1, 13 query rows and K_b = 3, 13, 1, 6 keys; NH 3 heads of HS 4.
struct AttnCase {
    std::vector<int32_t> offsets = {0, 7, 20, 21, 34};
    std::vector<int32_t> keys = {3, 13, 1, 6};
    int B = 4, N = 34, NH = 3, HS = 4, H = 12;
    std::vector<size_t> pofs = std::vector<size_t>(5);
    size_t np = 0;
    ops::AttentionShape shape;
    AttnCase() {
        np = ops::attention_prob_offsets(pofs.data(), offsets.data(), B, NH, keys.data());
        shape = ops::AttentionShape{offsets.data(), pofs.data(), B, NH, HS, keys.data()};
    }
};

class SquadPaddedAttention : public ::testing::TestWithParam<bool> {};

TEST_P(SquadPaddedAttention, FiniteDifferences) {
    const bool with_dropout = GetParam();
    const AttnCase a;
    EXPECT_EQ(a.np, size_t(3 * (7 * 3 + 13 * 13 + 1 * 1 + 13 * 6)));
    const ops::DropoutStream drop{42, 7, 3, 0.8};
    const int N = a.N, H = a.H;
    Vec q = random_vector(N * H, 1), k = random_vector(N * H, 2), v = random_vector(N * H, 3);
    const Vec r = random_vector(N * H, 4);
    Vec ctx(N * H), probs(a.np), pd(a.np);
    std::vector<uint8_t> mask(a.np);
    auto loss = [&] {
        ops::attention_forward(ctx.data(), probs.data(), pd.data(), mask.data(), q.data(), k.data(),
                               v.data(), a.shape, with_dropout ? &drop : nullptr);
        return dot(ctx, r);
    };
    loss();
    Vec dq(N * H, 9.0), dk(N * H, 9.0), dv(N * H, 9.0), dprobs(a.np);  // 9: overwritten
    ops::attention_backward(dq.data(), dk.data(), dv.data(), dprobs.data(), r.data(), q.data(),
                            k.data(), v.data(), probs.data(), with_dropout ? mask.data() : nullptr,
                            0.8, a.shape);
    const Vec ndq = numeric_grad(q, loss), ndk = numeric_grad(k, loss), ndv = numeric_grad(v, loss);
    EXPECT_TRUE(all_close("dq", dq, ndq, 1e-7, 1e-6));
    EXPECT_TRUE(all_close("dk", dk, ndk, 1e-7, 1e-6));
    EXPECT_TRUE(all_close("dv", dv, ndv, 1e-7, 1e-6));
    // Rows past K_b are no keys: exactly zero dk, dv; but every query row has a gradient.
    for (int b = 0; b < a.B; ++b)
        for (int i = a.offsets[b]; i < a.offsets[b + 1]; ++i) {
            double nk = 0, nq = 0;
            for (int c = 0; c < H; ++c) {
                nk += std::abs(dk[i * H + c]) + std::abs(dv[i * H + c]);
                nq += std::abs(dq[i * H + c]);
            }
            if (i - a.offsets[b] >= a.keys[b]) {
                EXPECT_EQ(nk, 0.0) << "row " << i;
            } else {
                EXPECT_GT(nk, 0.0) << "row " << i;
            }
            if (a.keys[b] > 1) {
                EXPECT_GT(nq, 0.0) << "row " << i;
            }
        }
    if (with_dropout) {
        size_t kept = 0;
        for (uint8_t m : mask) kept += m;
        EXPECT_GT(kept, a.np / 2);
        EXPECT_LT(kept, a.np);
    }
}
INSTANTIATE_TEST_SUITE_P(Dropout, SquadPaddedAttention, ::testing::Bool());

// Every row of every sequence against the reference's padded computation in float: scores over
// all T_b positions + (1 − input_mask)·(−10000), softmax, times v (modeling.py attention_layer).
TEST(SquadPadded, AttentionEqualsAdditiveKeyMask) {
    const AttnCase a;
    const int H = a.H, HS = a.HS;
    const Vec qd = random_vector(a.N * H, 1, 3.0), kd = random_vector(a.N * H, 2, 3.0),
              vd = random_vector(a.N * H, 3);
    std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
    std::vector<float> ctx(a.N * H), probs(a.np), pd(a.np);
    ops::attention_forward<float>(ctx.data(), probs.data(), pd.data(), nullptr, q.data(), k.data(),
                                  v.data(), a.shape, nullptr);
    std::vector<float> want(a.N * H);
    for (int b = 0; b < a.B; ++b) {
        const int o = a.offsets[b], t = a.offsets[b + 1] - o, kn = a.keys[b];
        for (int h = 0; h < a.NH; ++h)
            for (int i = 0; i < t; ++i) {
                std::vector<float> s(t);
                float m = -1e30f;
                for (int j = 0; j < t; ++j) {
                    float d = 0;
                    for (int c = 0; c < HS; ++c) d += q[(o + i) * H + h * HS + c] * k[(o + j) * H + h * HS + c];
                    s[j] = d / std::sqrt(float(HS)) + (j < kn ? 0.f : -10000.f);
                    m = std::max(m, s[j]);
                }
                float sum = 0;
                for (int j = 0; j < t; ++j) sum += (s[j] = std::exp(s[j] - m));
                for (int c = 0; c < HS; ++c) {
                    float acc = 0;
                    for (int j = 0; j < t; ++j) acc += s[j] / sum * v[(o + j) * H + h * HS + c];
                    want[(o + i) * H + h * HS + c] = acc;
                }
            }
    }
    EXPECT_TRUE(all_close("ctx padded-query vs additive key mask", ctx, want, 1e-6, 1e-5));
}

// The bf16 path (AttentionBf16) against the fp32 path fed the same bf16-rounded q, k, v, dctx,
// with dropout: both multiply identical operands except that the bf16 path also rounds P' and
// s·dS, so they agree to those roundings (relative L2 ≤ 4e-3 per output; the probabilities, from
// identical products, to fp32 accumulation noise: atol 1e-6, rtol 1e-5), and stay well apart from
// fp32 on the unrounded operands. Rows past K_b get exactly zero dk, dv on both paths.
TEST(SquadPadded, AttentionBf16MatchesFp32OnRoundedOperands) {
    const AttnCase a;
    const size_t nh = static_cast<size_t>(a.N) * a.H;
    const ops::DropoutStream drop{5, 1, 2, 0.9};
    std::vector<float> x[4];
    for (int i = 0; i < 4; ++i) {
        const Vec d = random_vector(nh, 10 + i, 2.0);
        x[i].assign(d.begin(), d.end());
    }
    std::vector<ops::bf16> xb[4];
    std::vector<float> xr[4];
    for (int i = 0; i < 4; ++i) {
        xb[i].resize(nh);
        ops::to_bf16(xb[i].data(), x[i].data(), nh);
        for (float f : x[i]) xr[i].push_back(ops::round_bf16(f));
    }
    struct Out {
        std::vector<float> ctx, probs, dq, dk, dv;
    };
    const auto run = [&](const std::vector<float>* in, const ops::AttentionBf16* lp) {
        Out o{std::vector<float>(nh), std::vector<float>(a.np), std::vector<float>(nh),
              std::vector<float>(nh), std::vector<float>(nh)};
        std::vector<float> scratch(a.np), dprobs(a.np);
        std::vector<uint8_t> mask(a.np);
        ops::attention_forward<float>(o.ctx.data(), o.probs.data(), scratch.data(), mask.data(),
                                      in[0].data(), in[1].data(), in[2].data(), a.shape, &drop, lp);
        ops::attention_backward<float>(o.dq.data(), o.dk.data(), o.dv.data(), dprobs.data(),
                                       in[3].data(), in[0].data(), in[1].data(), in[2].data(),
                                       o.probs.data(), mask.data(), 0.9f, a.shape, lp);
        return o;
    };
    const ops::AttentionBf16 lp{xb[0].data(), xb[1].data(), xb[2].data(), xb[3].data()};
    const Out h = run(x, &lp), r = run(xr, nullptr), f = run(x, nullptr);
    EXPECT_TRUE(all_close("probs bf16 vs fp32 on rounded", h.probs, r.probs, 1e-6, 1e-5));
    const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>> outs[] = {
        {"ctx", {&h.ctx, &r.ctx}}, {"dq", {&h.dq, &r.dq}}, {"dk", {&h.dk, &r.dk}}, {"dv", {&h.dv, &r.dv}}};
    for (const auto& [name, pr] : outs) {
        const double e = rel_l2(*pr.first, *pr.second);
        EXPECT_LT(e, 4e-3) << name;
        EXPECT_GT(e, 0.0) << name << ": the bf16 path did not run";
    }
    std::printf("[bf16 attention] relative L2 vs fp32 on rounded operands: ctx %.2e dq %.2e dk "
                "%.2e dv %.2e; vs fp32 on unrounded: dq %.2e\n",
                rel_l2(h.ctx, r.ctx), rel_l2(h.dq, r.dq), rel_l2(h.dk, r.dk), rel_l2(h.dv, r.dv),
                rel_l2(h.dq, f.dq));
    for (int b = 0; b < a.B; ++b)
        for (int i = a.offsets[b] + a.keys[b]; i < a.offsets[b + 1]; ++i)
            for (int c = 0; c < a.H; ++c) {
                ASSERT_EQ(h.dk[i * a.H + c], 0.f);
                ASSERT_EQ(h.dv[i * a.H + c], 0.f);
            }
}

// Whole engine, double, dropout on: every tensor (sampled elements) by central differences, on
// padded features of 9 positions with 5, 9, 3 real tokens; one start label on a padding row.
TEST(SquadPadded, EngineFiniteDifferences) {
    const ParamTable table(tiny_config(), Heads::squad);
    const Batch batch = padded_features({5, 9, 3}, 9, 37, 3);
    BertSquadF64 model(table, Plan{3, 9, 0});
    std::vector<double> params = make_params<double>(table, 9);
    const std::vector<int32_t> start = {1, 4, 7}, end = {3, 8, 2};
    auto loss = [&] { return model.forward(params, batch, start, end, true, 77, 3).total; };
    loss();
    std::vector<double> grads(params.size(), 0.0);
    model.backward(grads, params, batch, 2.0);
    std::vector<double> got, want;
    std::vector<std::string> names;
    for (const ParamInfo& p : table.entries()) {
        for (size_t k = 0; k < std::min<size_t>(p.size, 8); ++k) {
            const size_t i = p.offset + (k * 7919 + 13) % p.size;
            const double keep = params[i];
            params[i] = keep + 1e-6;
            const double fp = loss();
            params[i] = keep - 1e-6;
            const double fm = loss();
            params[i] = keep;
            got.push_back(grads[i] / 2.0);
            want.push_back((fp - fm) / 2e-6);
            names.push_back(p.name);
        }
    }
    const auto r = all_close("padded squad grads", got, want, 1e-8, 1e-6);
    EXPECT_TRUE(r);
    if (!r)
        for (size_t k = 0; k < got.size(); ++k)
            if (std::abs(got[k] - want[k]) > 1e-8 + 1e-6 * std::abs(want[k]))
                ADD_FAILURE() << names[k] << ": got " << got[k] << " want " << want[k];
    double norm = 0;
    for (double g : got) norm += g * g;
    EXPECT_GT(norm, 1e-4);
    EXPECT_EQ(model.start_logits().size(), size_t(27));
    EXPECT_EQ(model.end_logits().size(), size_t(27));
}

TEST(SquadPadded, FloatMatchesDouble) {
    const ParamTable table(tiny_config(), Heads::squad);
    const Batch batch = padded_features({5, 9, 3}, 9, 37, 4);
    BertSquad f32(table, Plan{3, 9, 0});
    BertSquadF64 f64(table, Plan{3, 9, 0});
    const auto pf = make_params<float>(table, 3);
    const std::vector<double> pd(pf.begin(), pf.end());
    const std::vector<int32_t> start = {0, 8, 4}, end = {6, 8, 4};
    const double a = f32.forward(pf, batch, start, end, true, 1, 2).total;
    const double b = f64.forward(pd, batch, start, end, true, 1, 2).total;
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b));
    std::vector<float> gf(pf.size(), 0.f);
    std::vector<double> gd(pd.size(), 0.0);
    f32.backward(gf, pf, batch);
    f64.backward(gd, pd, batch);
    EXPECT_TRUE(all_close("float vs double grads", gf, gd, 1e-5, 1e-3));
    EXPECT_TRUE(all_close("float vs double start logits", f32.start_logits(), f64.start_logits(), 1e-5, 1e-4));
}

// Padding rows are queries only: the real rows' logits equal those of the real-tokens-only layout
// (fp32 rounding: atol 1e-5, rtol 1e-4), while the loss differs (its softmax also spans the
// padding positions). With every key_lengths[b] = T_b the result is bit-identical to a batch
// without key_lengths, dropout masks included (the unpadded mode is unchanged).
TEST(SquadPadded, RealRowsUnchangedAndFullKeysEqualUnpadded) {
    BertConfig c = tiny_config();
    c.hidden_dropout_prob = 0;
    c.attention_probs_dropout_prob = 0;
    const ParamTable table(c, Heads::squad);
    const Batch padded = padded_features({5, 9, 3}, 9, 37, 5);
    const Batch real = real_tokens_only(padded);
    const auto p = make_params<float>(table, 6);
    const std::vector<int32_t> start = {1, 4, 0}, end = {3, 8, 2};
    BertSquad e(table, Plan{3, 9, 0});
    const double lp = e.forward(p, padded, start, end, false, 0, 0).total;
    const std::vector<float> sp(e.start_logits().begin(), e.start_logits().end());
    const std::vector<float> ep(e.end_logits().begin(), e.end_logits().end());
    const double lr = e.forward(p, real, start, end, false, 0, 0).total;
    std::vector<float> sr_got, er_got;
    for (int b = 0; b < 3; ++b)
        for (int i = 0; i < padded.key_lengths[b]; ++i) {
            sr_got.push_back(sp[padded.seq_offsets[b] + i]);
            er_got.push_back(ep[padded.seq_offsets[b] + i]);
        }
    EXPECT_TRUE(all_close("start logits of real rows", sr_got, e.start_logits(), 1e-5, 1e-4));
    EXPECT_TRUE(all_close("end logits of real rows", er_got, e.end_logits(), 1e-5, 1e-4));
    EXPECT_GT(std::abs(lp - lr), 1e-3) << "padding positions did not enter the softmax";

    const ParamTable td(tiny_config(), Heads::squad);  // dropout on
    const auto pd = make_params<float>(td, 7);
    BertSquad d(td, Plan{3, 9, 0});
    Batch full = real;
    full.key_lengths = {5, 9, 3};
    std::vector<float> g1(pd.size(), 0.f), g2(pd.size(), 0.f);
    const double l1 = d.forward(pd, real, start, end, true, 11, 2).total;
    d.backward(g1, pd, real);
    BertSquad d2(td, Plan{3, 9, 0});
    const double l2v = d2.forward(pd, full, start, end, true, 11, 2).total;
    d2.backward(g2, pd, full);
    EXPECT_EQ(l1, l2v);
    EXPECT_EQ(g1, g2);
}

TEST(SquadPadded, BadKeyLengthsAreErrorsAndLabelsOutsideAddNoLoss) {
    const ParamTable table(tiny_config(), Heads::squad);
    const auto p = make_params<float>(table, 3);
    BertSquad e(table, Plan{3, 9, 0});
    Batch b = padded_features({5, 9, 3}, 9, 37, 3);
    const std::vector<int32_t> ok = {0, 0, 0};
    b.key_lengths = {5, 10, 3};
    EXPECT_NE(error_of([&] { e.forward(p, b, ok, ok, false, 0, 0); })
                  .find("key_lengths[1] = 10, expected 1..9"),
              std::string::npos);
    b.key_lengths = {5, 0, 3};
    EXPECT_NE(error_of([&] { e.forward(p, b, ok, ok, false, 0, 0); }).find("key_lengths[1] = 0"),
              std::string::npos);
    b.key_lengths = {5, 9};
    EXPECT_NE(error_of([&] { e.forward(p, b, ok, ok, false, 0, 0); })
                  .find("key_lengths has 2 entries, expected batch_size = 3"),
              std::string::npos);
    b.key_lengths = {5, 9, 3};
    // a label outside its sequence (run_squad.py's for an answer of whitespace alone) is
    // tf.one_hot's zero row: no loss
    const std::vector<int32_t> outside = {-1, 9, 99};
    EXPECT_EQ(e.forward(p, b, outside, outside, false, 0, 0).total, 0.0);
    const std::vector<int32_t> pad = {8, 0, 8};  // padding rows are valid labels
    EXPECT_GT(e.forward(p, b, pad, ok, false, 0, 0).total, 0.0);
}

TEST(SquadPadded, ForwardFlopsCountKeys) {
    const BertConfig c = tiny_config();
    const Batch b = padded_features({5, 9, 3}, 9, 37, 3);
    Batch full = b;
    full.key_lengths.clear();
    // attention: 4·T·K·H per sequence and layer instead of 4·T²·H
    const double diff = 2 * 4.0 * 9 * ((9 - 5) + (9 - 9) + (9 - 3)) * 12;
    EXPECT_DOUBLE_EQ(forward_flops(c, full) - forward_flops(c, b), diff);
}

// ---------------------------------------------------------------------------------------------
// Parity with tests/tools/torch_bert.py's SQuAD model (run_squad.py on padded features).

struct ParityCase {
    std::vector<int> keys;
    int S = 0;
    std::vector<int32_t> start, end;
    bool dropout = true;
    uint64_t seed = 1;
    ops::Precision precision = ops::Precision::fp32;
};

// Odd sizes: H 96, 3 heads (head size 32), I 200, vocab 1000, 2 layers.
BertConfig squad_odd_config() {
    BertConfig c;
    c.vocab_size = 1000;
    c.hidden_size = 96;
    c.num_attention_heads = 3;
    c.intermediate_size = 200;
    c.num_hidden_layers = 2;
    c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.1f;
    c.attention_probs_dropout_prob = 0.15f;
    return c;
}

void run_squad_parity(const ParityCase& c) {
    if (const std::string p = testing::torch_python_problem(); !p.empty())
        GTEST_SKIP() << "parity skipped: " << p;
    const BertConfig cfg = squad_odd_config();
    const ParamTable table(cfg, Heads::squad);
    std::vector<float> params(table.total_floats());
    table.initialize(params, c.seed);
    std::mt19937_64 rng(c.seed);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    for (const ParamInfo& p : table.entries()) {  // away from the initialisation's symmetric point
        auto v = table.view(std::span<float>(params), p.name);
        const bool affine = p.name.ends_with("gamma") || p.name.ends_with("beta") || p.name.ends_with("bias");
        for (float& x : v) x = affine ? x + u(rng) : x * 5.0f;
    }
    const Batch batch = padded_features(c.keys, c.S, cfg.vocab_size, c.seed + 100);
    const bool bf16 = c.precision == ops::Precision::bf16;
    BertSquad engine(table, Plan{batch.batch_size, c.S, 0}, EngineOptions{c.precision});
    const SpanLosses losses = engine.forward(params, batch, c.start, c.end, c.dropout, 1234, 7);
    std::vector<float> grads(table.total_floats(), 0.0f);
    engine.backward(grads, params, batch);

    bertbench::testing::TmpDir dir("bb_squad_parity");
    const std::string in = dir.file("in.safetensors"), out = dir.file("out.safetensors");
    {
        io::SafetensorsWriter w(in);
        w.set_metadata("bert_config", cfg.to_json().dump());
        w.set_metadata("head", "squad");
        for (const ParamInfo& p : table.entries())
            w.add(p.name, io::DType::F32, p.shape, params.data() + p.offset, p.size * 4);
        const int64_t B = batch.batch_size, N = batch.num_tokens();
        w.add_i32("batch/seq_offsets", {B + 1}, batch.seq_offsets);
        w.add_i32("batch/input_ids", {N}, batch.input_ids);
        w.add_i32("batch/segment_ids", {N}, batch.segment_ids);
        w.add_i32("batch/key_lengths", {B}, batch.key_lengths);
        w.add_i32("batch/start_positions", {B}, c.start);
        w.add_i32("batch/end_positions", {B}, c.end);
        if (c.dropout) {
            for (const auto& [site, s] : testing::dropout_sites(cfg.num_hidden_layers)) {
                const std::span<const uint8_t> m = engine.dropout_mask(site);
                ASSERT_FALSE(m.empty()) << "engine exported no dropout mask for " << s;
                w.add_copy("dropout/" + s, io::DType::U8, {static_cast<int64_t>(m.size())},
                           m.data(), m.size());
            }
        }
        w.write();
    }
    const testing::TorchBertRun run = testing::run_torch_bert(
        "--input " + in + " --output " + out + (bf16 ? " --dtype bf16_autocast" : ""), dir.file("python.log"));
    if (run.skipped()) GTEST_SKIP() << run.output;
    ASSERT_EQ(run.status, 0) << run.command << "\n" << run.output;

    const io::SafetensorsReader ref(out);
    const std::vector<float> got_loss = {float(losses.total)};
    const std::vector<float> want_loss = ref.read_f32("loss/total");
    const std::vector<float> want_start = ref.read_f32("start_logits"), want_end = ref.read_f32("end_logits");
    ASSERT_EQ(want_start.size(), static_cast<size_t>(batch.num_tokens()));
    if (bf16) {
        // bf16 keeps 8 significant bits: each tensor as a whole, ‖got − want‖₂/‖want‖₂ ≤ 3e-2
        // (as Parity.Bf16MatchesPyTorchAutocast). Three gradients are zero in exact arithmetic,
        // so both sides hold rounding noise only, small against the real gradients: the key
        // biases' (softmax ignores a constant per row), the span bias's and the last LayerNorm
        // beta's (Σ over a sequence's rows of softmax − one-hot is 0, and the logits are linear
        // in the last layer's output).
        double largest = 0, worst = 0;
        std::string worst_name;
        for (const ParamInfo& p : table.entries()) {
            const std::vector<float> g = ref.read_f32("grad/" + p.name);
            double n = 0;
            for (float x : g) n += double(x) * x;
            largest = std::max(largest, std::sqrt(n));
        }
        const auto check = [&](const std::string& name, std::span<const float> got, std::span<const float> want) {
            const std::string last_beta = "grad/bert/encoder/layer_" +
                                          std::to_string(cfg.num_hidden_layers - 1) +
                                          "/output/LayerNorm/beta";
            if (name.ends_with("attention/self/key/bias") || name == "grad/cls/squad/output_bias" ||
                name == last_beta) {
                double ng = 0, nw = 0;
                for (float x : got) ng += double(x) * x;
                for (float x : want) nw += double(x) * x;
                EXPECT_LE(std::sqrt(ng), 1e-2 * largest) << name;
                EXPECT_LE(std::sqrt(nw), 1e-2 * largest) << name;
                return;
            }
            if (name.starts_with("grad/bert/pooler/")) {  // not in the span model's graph
                EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return x == 0; })) << name;
                return;
            }
            const double e = rel_l2(got, want);
            EXPECT_LE(e, 3e-2) << name << ": ‖got − want‖/‖want‖ = " << e;
            if (!(e <= worst)) worst = e, worst_name = name;
        };
        check("loss", got_loss, want_loss);
        check("start_logits", engine.start_logits(), want_start);
        check("end_logits", engine.end_logits(), want_end);
        for (const ParamInfo& p : table.entries())
            check("grad/" + p.name, table.view(std::span<const float>(grads), p.name), ref.read_f32("grad/" + p.name));
        std::printf("[squad parity bf16] loss: engine %.6f, torch autocast %.6f; worst relative L2 "
                    "%.4f (%s), tolerance 0.030\n",
                    got_loss[0], want_loss[0], worst, worst_name.c_str());
        return;
    }
    // fp32 engine vs float64 reference: loss atol 1e-5 + rtol 1e-5; logits atol 1e-5 + rtol 1e-4
    // (every position, padding included); gradients atol 2e-6 + rtol 2e-5 (as Parity.*).
    EXPECT_TRUE(all_close("loss", got_loss, want_loss, 1e-5, 1e-5));
    EXPECT_TRUE(all_close("start_logits", engine.start_logits(), want_start, 1e-5, 1e-4));
    EXPECT_TRUE(all_close("end_logits", engine.end_logits(), want_end, 1e-5, 1e-4));
    double max_grad = 0;
    for (const ParamInfo& p : table.entries()) {
        const std::vector<float> want = ref.read_f32("grad/" + p.name);
        EXPECT_TRUE(all_close("grad/" + p.name, table.view(std::span<const float>(grads), p.name), want, 2e-6, 2e-5));
        for (float x : want) max_grad = std::max(max_grad, double(std::abs(x)));
    }
    std::printf("[squad parity] loss: engine %.7f, torch float64 %.7f; largest |grad| %.3g\n",
                got_loss[0], want_loss[0], max_grad);
    EXPECT_GT(max_grad, 1000 * 2e-6);  // gradients well above atol
    // The padding rows' logits are not a constant: they carry information the reference ranks.
    EXPECT_NE(want_start[static_cast<size_t>(c.S - 1)], want_start[static_cast<size_t>(c.S - 2)]);
}

// The reference's softmax over all 37 positions, padding rows as queries, odd key lengths, the
// engine's dropout masks replayed; one start and one end label on a padding row (the reference's
// one-hot may point anywhere in [0, max_seq_length)).
TEST(SquadParity, PaddedFeaturesMatchPyTorch) {
    ParityCase c;
    c.keys = {5, 37, 12, 23};
    c.S = 37;
    c.start = {1, 20, 0, 30};
    c.end = {20, 36, 11, 22};
    c.seed = 2;
    run_squad_parity(c);
}

TEST(SquadParity, PaddedFeaturesBf16MatchPyTorchAutocast) {
    ParityCase c;
    c.keys = {5, 37, 12, 23};
    c.S = 37;
    c.start = {1, 20, 0, 30};
    c.end = {20, 36, 11, 22};
    c.seed = 3;
    c.precision = ops::Precision::bf16;
    run_squad_parity(c);
}

}  // namespace
}  // namespace bertbench::model
