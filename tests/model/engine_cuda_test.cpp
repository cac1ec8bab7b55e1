// The BERT engine on the CUDA backend against the same engine on the CPU: one training step of the
// pretraining model (also with last_layer_subset) and of the SQuAD model (forward, losses, logits,
// backward's gradients), with
// the parameters and gradients in GPU memory. The dropout masks are the same bits (Philox on both
// devices); everything that sums runs in another order, so values agree to fp32 rounding:
// losses rtol 1e-4, logits atol 1e-4 + rtol 1e-3, gradients atol 1e-5 + rtol 1e-3 (a tiny model,
// sums of at most a few hundred terms). Each case runs with both attention kernels (materialized,
// fused) on both devices. Skips with the reason where the build has no CUDA backend (cmake
// -DBB_CUDA=ON) or the machine no GPU; scripts/gpu-check.sh runs it on the GPU machine.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "../ops/check.hpp"
#include "backend/backend.hpp"
#include "core/error.hpp"
#include "model/bert.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using testing::all_close;
using testing::make_params;
using testing::tiny_batch;
using testing::tiny_config;

class EngineCuda : public ::testing::TestWithParam<AttentionKernel> {
protected:
    void SetUp() override {
        if (!backend::cuda_built()) GTEST_SKIP() << "this build has no CUDA backend (cmake -DBB_CUDA=ON; docs/gpu.md)";
        try {
            gpu_ = backend::make_cuda_backend(0);
        } catch (const Error& e) {
            GTEST_SKIP() << e.what();
        }
    }
    EngineOptions options(backend::Backend* be) const {
        EngineOptions o;
        o.attention = GetParam();
        o.backend = be;
        return o;
    }
    std::unique_ptr<backend::Backend> gpu_;
};

INSTANTIATE_TEST_SUITE_P(Attention, EngineCuda,
                         ::testing::Values(AttentionKernel::materialized, AttentionKernel::fused),
                         [](const ::testing::TestParamInfo<AttentionKernel>& p) {
                             return p.param == AttentionKernel::fused ? "fused" : "materialized";
                         });

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

TEST_P(EngineCuda, PretrainingStepMatchesTheCpuEngine) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 11);
    const backend::Buffer<float> dparams(*gpu_, params);
    backend::Buffer<float> dgrads(*gpu_, params.size());
    for (const bool subset : {false, true}) {  // and the last layer on the heads' rows only
        SCOPED_TRACE(subset ? "last_layer_subset" : "every row");
        dgrads.zero();
        EngineOptions oc = options(nullptr), og = options(gpu_.get());
        oc.last_layer_subset = og.last_layer_subset = subset;
        BertPretrainer cpu(table, Plan{3, 9, 2}, oc);
        BertPretrainer gpu(table, Plan{3, 9, 2}, og);
        ASSERT_EQ(gpu.fused_attention(), GetParam() == AttentionKernel::fused);
        const std::span<const float> on_gpu(dparams.get(), params.size());
        const Losses want = cpu.forward(params, batch, true, 21, 4), got = gpu.forward(on_gpu, batch, true, 21, 4);
        EXPECT_NEAR(got.total, want.total, 1e-4 * std::abs(want.total));
        EXPECT_NEAR(got.mlm_loss, want.mlm_loss, 1e-4 * std::abs(want.mlm_loss));
        EXPECT_NEAR(got.nsp_loss, want.nsp_loss, 1e-4 * std::abs(want.nsp_loss));
        EXPECT_EQ(got.mlm_weight, want.mlm_weight);
        for (const DropoutSite site : {DropoutSite{DropoutSite::embeddings},
                                       DropoutSite{DropoutSite::attention_probs, 0},
                                       DropoutSite{DropoutSite::output, 1}}) {
            const std::span<const uint8_t> a = gpu.dropout_mask(site), b = cpu.dropout_mask(site);
            EXPECT_EQ(std::vector<uint8_t>(a.begin(), a.end()), std::vector<uint8_t>(b.begin(), b.end()))
                << "site " << site.kind << " layer " << site.layer;
        }
        EXPECT_TRUE(all_close("mlm logits", copy(gpu.mlm_logits()), copy(cpu.mlm_logits()), 1e-4, 1e-3));
        EXPECT_TRUE(all_close("nsp logits", copy(gpu.nsp_logits()), copy(cpu.nsp_logits()), 1e-4, 1e-3));
        std::vector<float> grads(params.size(), 0.f);
        cpu.backward(grads, params, batch);
        gpu.backward(std::span<float>(dgrads.get(), params.size()), on_gpu, batch);
        EXPECT_TRUE(all_close("gradients", dgrads.download(), grads, 1e-5, 1e-3));
    }
}

// bf16 GEMM operands on both devices (the same roundings of the same fp32 values); the GPU's
// products differ in summation order and where the CPU rounds the attention probabilities to
// bf16: losses rtol 1e-2, logits and gradients atol 1e-2 + rtol 5e-2.
TEST_P(EngineCuda, Bf16PretrainingStepMatchesTheCpuEngine) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 13);
    const backend::Buffer<float> dparams(*gpu_, params);
    backend::Buffer<float> dgrads(*gpu_, std::vector<float>(params.size(), 0.f));
    EngineOptions oc = options(nullptr), og = options(gpu_.get());
    oc.precision = og.precision = ops::Precision::bf16;
    BertPretrainer cpu(table, Plan{3, 9, 2}, oc);
    BertPretrainer gpu(table, Plan{3, 9, 2}, og);
    const std::span<const float> on_gpu(dparams.get(), params.size());
    const Losses want = cpu.forward(params, batch, true, 21, 4), got = gpu.forward(on_gpu, batch, true, 21, 4);
    EXPECT_NEAR(got.total, want.total, 1e-2 * std::abs(want.total));
    EXPECT_TRUE(all_close("bf16 mlm logits", copy(gpu.mlm_logits()), copy(cpu.mlm_logits()), 1e-2, 5e-2));
    std::vector<float> grads(params.size(), 0.f);
    cpu.backward(grads, params, batch);
    gpu.backward(std::span<float>(dgrads.get(), params.size()), on_gpu, batch);
    EXPECT_TRUE(all_close("bf16 gradients", dgrads.download(), grads, 1e-2, 5e-2));
}

TEST_P(EngineCuda, SquadStepMatchesTheCpuEngine) {
    const ParamTable table(tiny_config(), Heads::squad);
    Batch batch = tiny_batch();
    batch.key_lengths = {4, 9, 2};  // padded features: the padding rows are queries
    const std::vector<int32_t> start = {1, 0, 2}, end = {3, 8, 2};
    const std::vector<float> params = make_params<float>(table, 12);
    const backend::Buffer<float> dparams(*gpu_, params);
    backend::Buffer<float> dgrads(*gpu_, std::vector<float>(params.size(), 0.f));
    BertSquad cpu(table, Plan{3, 9, 0}, options(nullptr));
    BertSquad gpu(table, Plan{3, 9, 0}, options(gpu_.get()));
    const std::span<const float> on_gpu(dparams.get(), params.size());
    const SpanLosses want = cpu.forward(params, batch, start, end, true, 5, 9);
    const SpanLosses got = gpu.forward(on_gpu, batch, start, end, true, 5, 9);
    EXPECT_NEAR(got.total, want.total, 1e-4 * std::abs(want.total));
    EXPECT_TRUE(all_close("start logits", copy(gpu.start_logits()), copy(cpu.start_logits()), 1e-4, 1e-3));
    EXPECT_TRUE(all_close("end logits", copy(gpu.end_logits()), copy(cpu.end_logits()), 1e-4, 1e-3));
    std::vector<float> grads(params.size(), 0.f);
    cpu.backward(grads, params, batch);
    gpu.backward(std::span<float>(dgrads.get(), params.size()), on_gpu, batch);
    EXPECT_TRUE(all_close("gradients", dgrads.download(), grads, 1e-5, 1e-3));
}

}  // namespace
}  // namespace bertbench::model
