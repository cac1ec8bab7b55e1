// Whole-model checks of the BERT engine on a tiny odd config (V 37, H 12, 3 heads, I 13, 2 layers)
// with mixed sequence lengths (5, 9, 3): finite differences in double of every parameter tensor
// (sampled elements) for the pretraining and SQuAD heads, with dropout on; accumulation (+=);
// determinism (same seed ⇒ same bits); dropout masks independent of the thread count; float vs
// double agreement; plan errors. FD tolerance: atol 1e-8, rtol 1e-6 (central differences, eps 1e-6).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../ops/check.hpp"
#include "core/error.hpp"
#include "model/bert.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using bertbench::testing::all_close;
using bertbench::testing::make_params;
using bertbench::testing::tiny_batch;
using bertbench::testing::tiny_config;

// Up to `per_tensor` deterministic element indices of every tensor (all of small ones).
std::vector<std::pair<std::string, size_t>> sample_elements(const ParamTable& table, size_t per_tensor) {
    std::vector<std::pair<std::string, size_t>> out;
    for (const ParamInfo& p : table.entries()) {
        if (p.size <= per_tensor) {
            for (size_t i = 0; i < p.size; ++i) out.emplace_back(p.name, p.offset + i);
        } else {
            for (size_t k = 0; k < per_tensor; ++k) out.emplace_back(p.name, p.offset + (k * 7919 + 13) % p.size);
        }
    }
    return out;
}

void fd_check_pretrainer(const std::string& hidden_act, bool training) {
    BertConfig c = tiny_config();
    c.hidden_act = hidden_act;
    const ParamTable table(c, Heads::pretraining);
    const Batch batch = tiny_batch();
    BertPretrainerF64 model(table, Plan{4, 11, 3});
    std::vector<double> params = make_params<double>(table, 5);
    auto loss = [&] { return model.forward(params, batch, training, 1234, 7).total; };
    loss();
    if (training) {
        const auto m = model.dropout_mask({model::DropoutSite::attention_probs, 1});
        EXPECT_EQ(m.size(), size_t(3 * (25 + 81 + 9)));
    }
    std::vector<double> grads(params.size(), 0.5);  // backward accumulates onto 0.5
    model.backward(grads, params, batch);
    std::vector<double> got, want;
    std::vector<std::string> names;
    for (const auto& [name, i] : sample_elements(table, 12)) {
        const double keep = params[i];
        params[i] = keep + 1e-6;
        const double fp = loss();
        params[i] = keep - 1e-6;
        const double fm = loss();
        params[i] = keep;
        got.push_back(grads[i] - 0.5);
        want.push_back((fp - fm) / 2e-6);
        names.push_back(name);
    }
    const auto r = all_close("pretrainer grads", got, want, 1e-8, 1e-6);
    EXPECT_TRUE(r);
    if (!r)  // name the tensors that fail
        for (size_t k = 0; k < got.size(); ++k)
            if (std::abs(got[k] - want[k]) > 1e-8 + 1e-6 * std::abs(want[k]))
                ADD_FAILURE() << names[k] << ": got " << got[k] << " want " << want[k];
    // the gradient is not trivially zero
    double norm = 0;
    for (double g : got) norm += g * g;
    EXPECT_GT(norm, 1e-4);
}

TEST(BertFd, PretrainerTanhGeluWithDropout) { fd_check_pretrainer("gelu", true); }
TEST(BertFd, PretrainerErfGeluNoDropout) { fd_check_pretrainer("gelu_erf", false); }

TEST(BertFd, SquadHeadWithDropout) {
    const ParamTable table(tiny_config(), Heads::squad);
    const Batch batch = tiny_batch();
    BertSquadF64 model(table, Plan{3, 9, 0});
    std::vector<double> params = make_params<double>(table, 9);
    const std::vector<int32_t> start = {1, 4, 0}, end = {3, 8, 2};
    auto loss = [&] { return model.forward(params, batch, start, end, true, 77, 3).total; };
    loss();
    std::vector<double> grads(params.size(), 0.0);
    model.backward(grads, params, batch, 2.0);  // loss_scale multiplies the gradient
    std::vector<double> got, want;
    for (const auto& [name, i] : sample_elements(table, 8)) {
        const double keep = params[i];
        params[i] = keep + 1e-6;
        const double fp = loss();
        params[i] = keep - 1e-6;
        const double fm = loss();
        params[i] = keep;
        got.push_back(grads[i] / 2.0);
        want.push_back((fp - fm) / 2e-6);
    }
    EXPECT_TRUE(all_close("squad grads", got, want, 1e-8, 1e-6));
    EXPECT_EQ(model.start_logits().size(), size_t(17));
}

TEST(BertEngine, FloatMatchesDouble) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    BertPretrainer f32(table, Plan{3, 9, 2});
    BertPretrainerF64 f64(table, Plan{3, 9, 2});
    const auto pf = make_params<float>(table, 3);
    const std::vector<double> pd(pf.begin(), pf.end());
    const Losses a = f32.forward(pf, batch, true, 1, 2), b = f64.forward(pd, batch, true, 1, 2);
    EXPECT_NEAR(a.total, b.total, 1e-5 * std::abs(b.total));
    EXPECT_NEAR(a.mlm_loss, b.mlm_loss, 1e-5 * std::abs(b.mlm_loss));
    EXPECT_EQ(a.mlm_weight, 4.0);
    EXPECT_EQ(a.nsp_count, 3);
    std::vector<float> gf(pf.size(), 0.f);
    std::vector<double> gd(pd.size(), 0.0);
    f32.backward(gf, pf, batch);
    f64.backward(gd, pd, batch);
    EXPECT_TRUE(all_close("float vs double grads", gf, gd, 1e-5, 1e-3));
    EXPECT_TRUE(all_close("float vs double logits", f32.mlm_logits(), f64.mlm_logits(), 1e-5, 1e-4));
}

TEST(BertEngine, SameSeedSameBitsAndThreadCountIndependentMasks) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    BertPretrainer model(table, Plan{3, 9, 2});
    const auto p = make_params<float>(table, 3);
    auto run = [&](uint64_t seed, std::vector<float>& g) {
        const Losses l = model.forward(p, batch, true, seed, 11);
        g.assign(p.size(), 0.f);
        model.backward(g, p, batch);
        return l;
    };
    std::vector<float> g1, g2, g3;
    const Losses a = run(5, g1), b = run(5, g2), c = run(6, g3);
    EXPECT_EQ(a.total, b.total);  // bit-identical
    EXPECT_EQ(g1, g2);
    EXPECT_NE(a.total, c.total);  // another seed, other masks
    const std::vector<uint8_t> m2(model.dropout_mask({model::DropoutSite::output, 0}).begin(),
                                  model.dropout_mask({model::DropoutSite::output, 0}).end());
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const Losses d = model.forward(p, batch, true, 6, 11);
    const std::vector<uint8_t> m1(model.dropout_mask({model::DropoutSite::output, 0}).begin(),
                                  model.dropout_mask({model::DropoutSite::output, 0}).end());
    omp_set_num_threads(saved);
    EXPECT_EQ(m1, m2);
    EXPECT_NEAR(d.total, c.total, 1e-5);
    // inference: no masks
    model.forward(p, batch, false, 6, 11);
    EXPECT_TRUE(model.dropout_mask({model::DropoutSite::embeddings}).empty());
}

TEST(BertEngine, PlanAndSiteErrors) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    BertPretrainer model(table, Plan{2, 9, 2});
    EXPECT_GT(model.arena_bytes(), size_t(0));
    const auto p = make_params<float>(table, 3);
    try {
        model.forward(p, tiny_batch(), false, 0, 0);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("batch larger than planned"), std::string::npos) << e.what();
    }
    Batch one = tiny_batch();
    one.batch_size = 1;
    one.seq_offsets = {0, 5};
    one.input_ids.resize(5);
    one.segment_ids.resize(5);
    one.masked_index = {1};
    one.masked_ids = {4};
    one.masked_weights = {1.f};
    one.masked_seq = {0};
    one.next_sentence_labels = {1};
    model.forward(p, one, true, 0, 0);
    EXPECT_EQ(model.dropout_mask({model::DropoutSite::embeddings}).size(), size_t(5 * 12));
    EXPECT_THROW(model.dropout_mask({model::DropoutSite::output, 9}), Error);
    one.input_ids[2] = 37;
    EXPECT_THROW(model.forward(p, one, true, 0, 0), Error);
    EXPECT_THROW(BertPretrainer(table, Plan{2, 17, 2}), Error);  // > max_position_embeddings
}

// An inference engine packs its weights once; after weights_changed(), or given another buffer,
// it packs again: its results equal a fresh engine's on the new weights, bit for bit.
TEST(BertEngine, ForwardOnlyPackedWeightsFollowTheParameters) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const Plan plan{3, 9, 2, /*forward_only=*/true};
    BertPretrainer e(table, plan);
    std::vector<float> p = make_params<float>(table, 3);
    const double before = e.forward(p, batch, false, 0, 0).total;
    for (float& x : p) x *= 1.5f;
    e.weights_changed();
    const double after = e.forward(p, batch, false, 0, 0).total;
    EXPECT_NE(before, after);
    EXPECT_EQ(after, BertPretrainer(table, plan).forward(p, batch, false, 0, 0).total);
    const std::vector<float> q = make_params<float>(table, 3);  // another buffer, the old values
    EXPECT_EQ(e.forward(q, batch, false, 0, 0).total, before);
}

// A forward-only plan (inference) computes the same results as a full engine in less memory, and
// refuses training. Its GEMMs read packed weights (ops::PackedWeights) through other oneDNN kernels
// than the training engine's sgemm, so the two agree to fp32 rounding, not bit for bit.
TEST(BertEngine, ForwardOnlyPlanSameResultsLessMemory) {
    BertConfig c = tiny_config();
    c.num_hidden_layers = 4;  // > 2, so the ping-pong of the layer outputs is exercised
    const ParamTable table(c, Heads::pretraining);
    const Batch batch = tiny_batch();
    // Room for 128 sequences, so that activations, not the packed copy of these tiny weights
    // (each padded to oneDNN's 16×64 blocks), decide the comparison.
    BertPretrainer full(table, Plan{128, 9, 2});
    BertPretrainer fwd(table, Plan{128, 9, 2, /*forward_only=*/true});
    EXPECT_LT(fwd.arena_bytes() * 2, full.arena_bytes());
    const auto p = make_params<float>(table, 3);
    const Losses a = full.forward(p, batch, false, 0, 0), b = fwd.forward(p, batch, false, 0, 0);
    EXPECT_NEAR(a.total, b.total, 1e-5 * std::abs(a.total));
    EXPECT_EQ(a.mlm_correct, b.mlm_correct);
    const auto close = [](std::span<const float> x, std::span<const float> y) {
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!(std::abs(x[i] - y[i]) <= 1e-5f * (1.f + std::abs(x[i])))) return false;
        return true;
    };
    EXPECT_TRUE(close(full.mlm_logits(), fwd.mlm_logits()));
    EXPECT_TRUE(close(full.sequence_output(), fwd.sequence_output()));
    EXPECT_TRUE(close(full.pooled_output(), fwd.pooled_output()));
    EXPECT_THROW(fwd.forward(p, batch, true, 0, 0), Error);
    std::vector<float> g(p.size(), 0.f);
    EXPECT_THROW(fwd.backward(g, p, batch), Error);
    const ParamTable squad_table(c, Heads::squad);
    BertSquad squad(squad_table, Plan{3, 9, 0, true});
    std::vector<float> sp(squad_table.total_floats());
    squad_table.initialize(sp, 1);
    squad.forward(sp, batch, {}, {}, false, 0, 0);
    EXPECT_EQ(squad.start_logits().size(), size_t(17));
    EXPECT_THROW(squad.backward(sp, sp, batch), Error);
}

TEST(BertEngine, ForwardFlops) {
    const BertConfig c = tiny_config();
    const Batch b = tiny_batch();
    // layers: 2·N·(4H² + 2HI) + 4·ΣT²·H ; heads: pooler 2BH², NSP 2B·2H, MLM 2PH² + 2PHV
    const double want = 2 * (2.0 * 17 * (4 * 144 + 2 * 12 * 13) + 4.0 * (25 + 81 + 9) * 12) +
                        2.0 * 3 * 144 + 2.0 * 3 * 2 * 12 + 2.0 * 5 * 144 + 2.0 * 5 * 12 * 37;
    EXPECT_DOUBLE_EQ(forward_flops(c, b), want);
}

}  // namespace
}  // namespace bertbench::model

namespace bertbench::model {
namespace {

// Large enough that every op takes its parallel path (N·H ≥ 32K) and the sgemm threads its GEMMs.
// Finding (docs/engine.md): our own kernels do not depend on the thread count (fixed work split,
// reductions in a fixed order); a threaded sgemm may split K differently per thread count (OpenBLAS
// did on some backward shapes; oneDNN gives equal bits here). Asserted: same dropout masks, losses
// and gradients equal to float rounding (atol 1e-6, rtol 1e-4); bit equality is reported.
TEST(BertEngine, ThreadCountChangesOnlyRoundingSlow) {  // ~3 s on a loaded 2-vCPU host
    BertConfig c;
    c.vocab_size = 1001;
    c.hidden_size = 96;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 3;
    c.intermediate_size = 200;
    c.max_position_embeddings = 128;
    const ParamTable table(c, Heads::pretraining);
    Batch b;
    b.batch_size = 6;
    b.seq_offsets = {0};
    for (int s = 0; s < 6; ++s) {
        const int t = 64 + 9 * s;
        for (int i = 0; i < t; ++i) {
            b.input_ids.push_back((i * 37 + s * 101) % 1001);
            b.segment_ids.push_back(i >= t / 2);
        }
        for (int p = 0; p < 5; ++p) {
            b.masked_index.push_back(b.seq_offsets.back() + 1 + p * 11);
            b.masked_ids.push_back((p * 97 + s) % 1001);
            b.masked_weights.push_back(1.f);
            b.masked_seq.push_back(s);
        }
        b.seq_offsets.push_back(b.seq_offsets.back() + t);
        b.next_sentence_labels.push_back(s % 2);
    }
    std::vector<float> p(table.total_floats());
    table.initialize(p, 3);
    BertPretrainer model(table, Plan{6, 128, 5});
    auto run = [&](int threads, std::vector<float>& g) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        const Losses l = model.forward(p, b, true, 9, 4);
        g.assign(p.size(), 0.f);
        model.backward(g, p, b);
        omp_set_num_threads(saved);
        return l;
    };
    std::vector<float> g1, g2;
    const Losses one = run(1, g1), two = run(2, g2);
    EXPECT_NEAR(one.total, two.total, 1e-6 * std::abs(one.total));
    EXPECT_TRUE(all_close("grads 1 vs 2 threads", g2, g1, 1e-6, 1e-4));
    size_t diff = 0;
    for (size_t i = 0; i < g1.size(); ++i) diff += g1[i] != g2[i];
    std::printf("[ info ] 1 vs 2 threads: loss bits %s, %zu of %zu gradient elements differ\n",
                one.total == two.total ? "equal" : "differ", diff, g1.size());
}

}  // namespace
}  // namespace bertbench::model
