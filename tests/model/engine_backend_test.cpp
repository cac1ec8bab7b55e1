// The engine on a backend (model/engine_ops.hpp): a backend given in EngineOptions is the one the
// engine runs on (its ops are called, its memory holds the arena), and a backend the engine cannot
// run on is refused at construction in one line naming what it lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "model/bert.hpp"
#include "tiny_model.hpp"

namespace bertbench::model {
namespace {

using testing::make_params;
using testing::tiny_batch;
using testing::tiny_config;

// The CPU backend with its memory counted, or with one op taken out, or claiming device memory.
class Probe final : public backend::Backend {
public:
    explicit Probe(bool without_layernorm = false, bool host = true)
        : cpu_(backend::make_cpu_backend()), host_(host) {
        ops_ = cpu_->ops();
        if (without_layernorm) ops_.layernorm_forward = nullptr;
    }
    const char* name() const override { return "probe"; }
    std::string describe() const override { return "the CPU backend, counted"; }
    void* alloc(size_t bytes) override {
        allocated += bytes;
        return cpu_->alloc(bytes);
    }
    void release(void* p) noexcept override { cpu_->release(p); }
    void upload(void* d, const void* h, size_t n) override { cpu_->upload(d, h, n); }
    void download(void* h, const void* s, size_t n) override { cpu_->download(h, s, n); }
    void zero(void* d, size_t n) override { cpu_->zero(d, n); }
    void synchronize() override {}
    bool host_memory() const override { return host_; }
    size_t allocated = 0;

private:
    std::unique_ptr<backend::Backend> cpu_;
    bool host_;
};

std::string construction_error(backend::Backend& be) {
    EngineOptions o;
    o.backend = &be;
    try {
        BertPretrainer model(ParamTable(tiny_config(), Heads::pretraining), Plan{3, 9, 2}, o);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(EngineBackend, RunsOnTheBackendItIsGivenWithTheSameBits) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 5);
    Probe probe;
    EngineOptions o;
    o.backend = &probe;
    BertPretrainer on_probe(table, Plan{3, 9, 2}, o);
    BertPretrainer own(table, Plan{3, 9, 2});
    EXPECT_GE(probe.allocated, on_probe.arena_bytes() - on_probe.arena_bytes() / 8)
        << "the arena is the backend's memory";
    const Losses a = on_probe.forward(params, batch, true, 7, 3), b = own.forward(params, batch, true, 7, 3);
    EXPECT_EQ(a.total, b.total);
    std::vector<float> ga(params.size()), gb(params.size());
    on_probe.backward(ga, params, batch);
    own.backward(gb, params, batch);
    EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float))) << "the same gradient bits";
}

// A plan whose activations cannot fit the machine's memory (EngineOptions::memory_bytes) is
// refused with std::bad_alloc (the commands' "out of memory" line) before the engine allocates
// anything: with a batch of 10^9 sequences it once zeroed buffer after buffer for a minute.
TEST(EngineBackend, APlanLargerThanTheMemoryIsRefusedBeforeItAllocates) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const BertConfig& c = table.config();
    const Plan plan{64, 16, 4};
    // its lower bound: a float per token and hidden unit for each layer's saved input
    const size_t bound = size_t{64} * 16 * c.hidden_size * 4 * (c.num_hidden_layers + 1);
    Probe be;
    EngineOptions o;
    o.backend = &be;
    o.memory_bytes = bound - 1;
    EXPECT_THROW(BertPretrainer refused(table, plan, o), std::bad_alloc);
    EXPECT_EQ(be.allocated, 0u);
    o.memory_bytes = bound * 100;  // the whole arena is a few times the bound
    EXPECT_NO_THROW(BertPretrainer fits(table, plan, o));
    EXPECT_GT(be.allocated, bound);
}

TEST(EngineBackend, ABackendLackingAnOpIsRefusedNamingIt) {
    Probe without(true);
    const std::string e = construction_error(without);
    EXPECT_NE(e.find("[backend probe] lacks the op layernorm_forward"), std::string::npos) << e;
}

// A backend whose memory is not the host's: the results come back as copies, equal to the engine's.
TEST(EngineBackend, ResultsOfADeviceMemoryBackendAreHostCopies) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 5);
    Probe device(false, false);
    EngineOptions o;
    o.backend = &device;
    BertPretrainer on_device(table, Plan{3, 9, 2}, o);
    BertPretrainer own(table, Plan{3, 9, 2});
    on_device.forward(params, batch, true, 7, 3);
    own.forward(params, batch, true, 7, 3);
    const std::span<const float> a = on_device.mlm_logits(), b = own.mlm_logits();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(std::vector<float>(a.begin(), a.end()), std::vector<float>(b.begin(), b.end()));
    const std::span<const uint8_t> ma = on_device.dropout_mask({DropoutSite::output, 1});
    const std::span<const uint8_t> mb = own.dropout_mask({DropoutSite::output, 1});
    EXPECT_EQ(std::vector<uint8_t>(ma.begin(), ma.end()), std::vector<uint8_t>(mb.begin(), mb.end()));
    Probe device64(false, false);
    EngineOptions o64;
    o64.backend = &device64;
    try {
        BertPretrainerF64 f64(table, Plan{3, 9, 2}, o64);
        ADD_FAILURE() << "the double engine took a device-memory backend";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the double engine runs on host memory only"), std::string::npos)
            << e.what();
    }
}

// The backward hands every tensor's range to the hook exactly once, as it becomes final: the
// pooler's and heads' first (all but the tied word embeddings), then the layers from the top, then
// the embeddings'; and each gradient is final when its range is handed over.
TEST(EngineBackend, BackwardHandsEachFinishedTensorToTheHookOnce) {
    const ParamTable table(tiny_config(), Heads::pretraining);
    const Batch batch = tiny_batch();
    const std::vector<float> params = make_params<float>(table, 5);
    BertPretrainer model(table, Plan{3, 9, 2});
    model.forward(params, batch, true, 7, 3);
    std::vector<float> grads(params.size()), at_hook(params.size());
    std::vector<std::pair<size_t, size_t>> seen;
    model.set_backward_hook([&](std::span<const ParamRange> ready) {
        for (const ParamRange& r : ready) {
            seen.emplace_back(r.begin, r.end);
            std::copy(grads.begin() + r.begin, grads.begin() + r.end, at_hook.begin() + r.begin);
        }
    });
    model.backward(grads, params, batch);
    std::vector<std::pair<size_t, size_t>> want;
    for (const ParamInfo& p : table.entries()) want.emplace_back(p.offset, p.offset + p.size);
    std::vector<std::pair<size_t, size_t>> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, want) << "every tensor once";
    const ParamInfo& word = table.at("bert/embeddings/word_embeddings");
    const ParamInfo& top = table.at("bert/encoder/layer_1/output/LayerNorm/beta");
    const ParamInfo& bottom = table.at("bert/encoder/layer_0/attention/self/query/kernel");
    const auto pos = [&](const ParamInfo& p) {
        return std::find(seen.begin(), seen.end(), std::make_pair(p.offset, p.offset + p.size)) -
               seen.begin();
    };
    EXPECT_LT(pos(table.at("cls/predictions/output_bias")), pos(top));
    EXPECT_LT(pos(top), pos(bottom));
    EXPECT_LT(pos(bottom), pos(word));
    EXPECT_EQ(at_hook, grads) << "a gradient changed after its range was handed over";
}

}  // namespace
}  // namespace bertbench::model
