// The optimizer each reference's command line gets, checked on one update of the real binary: the
// update recomputed in double here from the checkpoint's initial weights and its written m and v
// (after the first update m = (1 - b1)·g, v = (1 - b2)·g², so g itself is not needed), against the
// weights the run wrote. NVIDIA NGC TF's line: LAMBOptimizer's trust ratio on a LayerNorm tensor
// too. PerfZero/MLPerf TF2's line: Keras AdamWeightDecay with its --beta_1/--beta_2/--epsilon/
// --weight_decay_rate, resumed bit-identically. Tolerance on the weight change (numpy.isclose form):
// rtol 1e-4 (fp32 m, v and update against double), atol 1e-9 + 3 fp32 ulps of the initial weight
// (the change is a difference of fp32 weights).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/run_util.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_bertbench;
using testing::slurp;

// The tiny model, its initial weights with LayerNorm gammas and betas away from 1 and 0 (so that
// a trust ratio on them is far from 1), and a directory holding the golden records.
struct VariantWorkdir : testing::TinyRunDir {
    explicit VariantWorkdir(const std::string& name)
        : TinyRunDir("optvar_" + name, 1, 11, [](const model::ParamTable& table, std::vector<float>& params) {
              for (const auto& e : table.entries())
                  for (size_t i = 0; i < e.size; ++i) {
                      if (e.name.find("LayerNorm/gamma") != std::string::npos)
                          params[e.offset + i] = 2.0f + 0.5f * std::sin(float(i));
                      else if (e.name.find("LayerNorm/beta") != std::string::npos)
                          params[e.offset + i] = 0.3f * std::cos(float(i));
                  }
          }) {}
    std::string p(const std::string& name) const { return file(name); }
};

std::vector<float> tensor(const std::string& path, const std::string& name) {
    return io::SafetensorsReader(path).read_f32(name);
}

std::string last_checkpoint(const std::string& out) {
    const auto found = testing::matching_files(out, R"(model\.ckpt-\d+\.safetensors)");
    EXPECT_EQ(found.size(), 1u) << out;
    return found.empty() ? "" : found.back();
}

double first_learning_rate(const std::string& out) {
    const std::string log = slurp(out + "/train_log.jsonl");
    return json::parse(log.substr(0, log.find('\n')))["learning_rate"].get<double>();
}

void expect_change_close(const std::string& name, const std::vector<float>& w0, const std::vector<float>& w1,
                         const std::vector<double>& want_change) {
    ASSERT_EQ(w1.size(), want_change.size()) << name;
    size_t bad = 0, worst = 0;
    double worst_err = -1;
    for (size_t i = 0; i < w1.size(); ++i) {
        const double got = double(w1[i]) - w0[i], err = std::abs(got - want_change[i]);
        // the weights are fp32 (rounded once or twice per update): 3 ulps of the weight besides rtol
        if (!(err <= 3 * std::ldexp(std::abs(double(w0[i])), -23) + 1e-9 + 1e-4 * std::abs(want_change[i]))) {
            ++bad;
            if (err > worst_err) worst_err = err, worst = i;
        }
    }
    EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << w1.size() << " changes outside tolerance; worst index "
                       << worst << ": got " << double(w1[worst]) - w0[worst] << ", want " << want_change[worst];
}

TEST(OptimizerVariantsCli, NgcTfLineAdaptsLayerNormTensors) {
    const VariantWorkdir w("ngc");
    const std::string out = w.p("run");
    const std::string line = "pretrain --input_files_dir=" + w.p("data") + " --output_dir=" + out +
                             " --bert_config_file=" + w.p("bert_config.json") + " --init_checkpoint=" +
                             w.p("init.safetensors") +
                             " --train_batch_size=4 --num_train_steps=1 --num_warmup_steps=0"
                             " --learning_rate=1e-2 --nodo_eval --threads=1 --shuffle_buffer=0";
    const auto r = run_bertbench(line);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("NVIDIA NGC TF's LAMB: the trust ratio"), std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(out + "/config.json"))["flags"]["optimizer_variant"], "ngc_tf");
    const std::string ckpt = last_checkpoint(out);
    ASSERT_FALSE(ckpt.empty());
    const double lr = first_learning_rate(out), b1 = 0.9f, b2 = 0.999f, eps = 1e-6f;
    for (const std::string name : {"bert/encoder/layer_0/output/LayerNorm/gamma",
                                   "bert/encoder/layer_1/attention/output/LayerNorm/beta"}) {
        const std::vector<float> w0 = tensor(w.p("init.safetensors"), name), w1 = tensor(ckpt, name);
        const std::vector<float> m = tensor(ckpt, name + "/adam_m"), v = tensor(ckpt, name + "/adam_v");
        std::vector<double> u(m.size());
        double w2 = 0, u2 = 0;
        for (size_t i = 0; i < m.size(); ++i) {  // t = 1; no decay on LayerNorm tensors
            u[i] = (m[i] / (1 - b1)) / (std::sqrt(v[i] / (1 - b2)) + eps);
            w2 += double(w0[i]) * w0[i];
            u2 += u[i] * u[i];
        }
        const double ratio = std::sqrt(w2 / u2);
        EXPECT_GT(std::abs(ratio - 1), 0.1) << name << ": a ratio near 1 would not tell the variants apart";
        std::vector<double> change(u.size());
        for (size_t i = 0; i < u.size(); ++i) change[i] = -lr * ratio * u[i];
        expect_change_close(name, w0, w1, change);
    }
    // Resuming it on MLPerf's line (its LAMB without those ratios) is refused, as another optimizer is.
    std::string mlperf = line;
    mlperf.replace(mlperf.find("--input_files_dir=" + w.p("data")), 18 + w.p("data").size(),
                   "--input_file=" + w.p("data") + "/part-00000");
    mlperf.replace(mlperf.find("--num_train_steps=1"), 19, "--num_train_steps=2");
    const auto resumed = run_bertbench(mlperf);
    EXPECT_EQ(resumed.exit_code, 1) << resumed.out;
    EXPECT_NE(resumed.out.find("the optimizer variant (set by the command line's script): expected \"ngc_tf\""), std::string::npos) << resumed.out;
}

std::string perfzero_adamw(const VariantWorkdir& w, const std::string& out) {
    return "pretrain --input_files=" + w.p("data") + "/part-00000 --model_dir=" + out + " --bert_config_file=" +
           w.p("bert_config.json") + " --init_checkpoint=" + w.p("init.safetensors") +
           " --train_batch_size=4 --num_accumulation_steps=1 --num_steps_per_epoch=4 --num_train_epochs=1"
           " --warmup_steps=0 --learning_rate=1e-3 --optimizer_type=adamw --beta_1=0.8 --beta_2=0.99"
           " --epsilon=1e-5 --weight_decay_rate=0.1 --nodo_eval --threads=1 --shuffle_buffer=0";
}

TEST(OptimizerVariantsCli, PerfZeroLineRunsKerasAdamWeightDecayWithItsFlags) {
    const VariantWorkdir w("perfzero");
    const std::string out = w.p("run");
    const auto r = run_bertbench(perfzero_adamw(w, out) + " --stop_steps=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("no effect with --optimizer=adamw"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("PerfZero/MLPerf TF2's AdamWeightDecay: Keras Adam"), std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(out + "/config.json"))["flags"]["optimizer_variant"], "keras");
    const std::string ckpt = last_checkpoint(out);
    ASSERT_FALSE(ckpt.empty());
    const double lr = first_learning_rate(out), b1 = 0.8f, b2 = 0.99f, eps = 1e-5f, wd = 0.1f;
    const double alpha = lr * std::sqrt(1 - b2) / (1 - b1);  // t = 1
    for (const auto& [name, decay] : std::vector<std::pair<std::string, bool>>{
             {"bert/encoder/layer_0/attention/self/query/kernel", true},
             {"bert/encoder/layer_0/output/LayerNorm/gamma", false},
             {"bert/encoder/layer_1/intermediate/dense/bias", false}}) {
        const std::vector<float> w0 = tensor(w.p("init.safetensors"), name), w1 = tensor(ckpt, name);
        const std::vector<float> m = tensor(ckpt, name + "/adam_m"), v = tensor(ckpt, name + "/adam_v");
        std::vector<double> change(m.size());
        size_t checked = 0;
        for (size_t i = 0; i < m.size(); ++i) {
            const double decayed = decay ? double(w0[i]) * (1 - lr * wd) : double(w0[i]);
            change[i] = decayed - alpha * m[i] / (std::sqrt(double(v[i])) + eps) - w0[i];
            // the betas are the flags': v / m² = (1 - b2) / (1 - b1)² whatever g was
            if (std::abs(m[i]) > 1e-6f) {
                EXPECT_NEAR(double(v[i]) / (double(m[i]) * m[i]), (1 - b2) / ((1 - b1) * (1 - b1)), 1e-3)
                    << name << " [" << i << "]";
                ++checked;
            }
        }
        EXPECT_GT(checked, 0u) << name;
        expect_change_close(name, w0, w1, change);
    }
}

// Stopped after 2 of 4 updates and run again, the run ends on the bits of an uninterrupted one:
// the checkpoint carries m, v and the update count that Keras's bias correction needs.
TEST(OptimizerVariantsCli, PerfZeroKerasAdamResumesBitIdentically) {
    const VariantWorkdir w("perfzero_resume");
    const auto whole = run_bertbench(perfzero_adamw(w, w.p("whole")));
    ASSERT_EQ(whole.exit_code, 0) << whole.out;
    const auto first = run_bertbench(perfzero_adamw(w, w.p("split")) + " --stop_steps=2");
    ASSERT_EQ(first.exit_code, 0) << first.out;
    const auto second = run_bertbench(perfzero_adamw(w, w.p("split")));
    ASSERT_EQ(second.exit_code, 0) << second.out;
    EXPECT_NE(second.out.find("resuming from"), std::string::npos) << second.out;
    const io::SafetensorsReader a(w.p("whole/model.ckpt-4.safetensors")), b(w.p("split/model.ckpt-4.safetensors"));
    size_t compared = 0;
    for (const auto& t : a.tensors()) {
        if (t.name.rfind("bert/", 0) != 0 && t.name.rfind("cls/", 0) != 0) continue;  // weights, m, v
        ASSERT_NE(b.find(t.name), nullptr) << t.name;
        const auto x = a.bytes(t), y = b.bytes(b.at(t.name));
        ASSERT_EQ(x.size(), y.size()) << t.name;
        EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << t.name;
        ++compared;
    }
    EXPECT_GT(compared, 10u);
}

}  // namespace
}  // namespace bertbench
