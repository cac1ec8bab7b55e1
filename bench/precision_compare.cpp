// bf16 against fp32 inference on real data: one checkpoint, the same eval batches through an fp32
// and a bf16 engine; prints (JSON) the masked-LM accuracy of each, how often the argmax agrees, and
// the per-logit differences |bf16 − fp32| of the MLM logits (max, mean, 99th percentile, and
// relative to the logits' RMS). Measures; asserts nothing (docs/engine.md, "Mixed precision").
// Usage: precision_compare CHECKPOINT EVAL_TFRECORD [batches=32] [batch=32] [seq=128] [pred=20]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/aligned.hpp"
#include "core/error.hpp"
#include "data/pretrain_reader.hpp"
#include "model/bert.hpp"
#include "model/checkpoint.hpp"

using namespace bertbench;

int main(int argc, char** argv) try {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s CHECKPOINT EVAL_TFRECORD [batches=32] [batch=32] [seq=128] [pred=20]\n", argv[0]);
        return 2;
    }
    const std::string ckpt = argv[1], data = argv[2];
    const int batches = argc > 3 ? std::atoi(argv[3]) : 32, B = argc > 4 ? std::atoi(argv[4]) : 32;
    const int T = argc > 5 ? std::atoi(argv[5]) : 128, P = argc > 6 ? std::atoi(argv[6]) : 20;
    model::BertConfig config;
    if (!model::checkpoint_config(ckpt, &config)) fail("{}: carries no bert_config", ckpt);
    const model::ParamTable table(config, model::Heads::pretraining);
    AlignedVector<float> params(table.total_floats(), 0.0f);
    model::load_init_checkpoint(ckpt, table, params);
    const model::Plan plan{B, T, P, true};
    model::BertPretrainer f32(table, plan, model::EngineOptions{ops::Precision::fp32});
    model::BertPretrainer b16(table, plan, model::EngineOptions{ops::Precision::bf16});

    data::PretrainReaderConfig rc;
    rc.files = {data};
    rc.max_seq_length = T;
    rc.max_predictions_per_seq = P;
    rc.batch_size = B;
    rc.training = false;
    data::PretrainReader reader(rc);
    model::Batch batch;
    double correct32 = 0, correct16 = 0, weight = 0, agree = 0, rows = 0, sum_abs = 0, sum_sq = 0,
           max_abs = 0;
    std::vector<float> diffs;
    for (int i = 0; i < batches && reader.next(batch); ++i) {
        const model::Losses a = f32.forward(params, batch, false, 0, 0);
        const model::Losses b = b16.forward(params, batch, false, 0, 0);
        correct32 += a.mlm_correct;
        correct16 += b.mlm_correct;
        weight += a.mlm_weight;
        const auto za = f32.mlm_logits(), zb = b16.mlm_logits();
        const size_t V = static_cast<size_t>(config.vocab_size);
        for (size_t r = 0; r < za.size() / V; ++r) {
            const float* x = za.data() + r * V;
            const float* y = zb.data() + r * V;
            agree += std::max_element(x, x + V) - x == std::max_element(y, y + V) - y;
            ++rows;
            for (size_t v = 0; v < V; ++v) {
                const double d = std::abs(double(y[v]) - x[v]);
                sum_abs += d;
                sum_sq += double(x[v]) * x[v];
                max_abs = std::max(max_abs, d);
                if (v % 16 == 0) diffs.push_back(static_cast<float>(d));  // a sample for the p99
            }
        }
    }
    if (rows == 0) fail("{}: no eval batch of {} sequences", data, B);
    std::sort(diffs.begin(), diffs.end());
    const double n = rows * config.vocab_size;
    const nlohmann::json out = {
        {"checkpoint", ckpt},
        {"masked_positions", rows},
        {"masked_lm_accuracy_fp32", correct32 / weight},
        {"masked_lm_accuracy_bf16", correct16 / weight},
        {"accuracy_difference_pp", 100 * (correct16 - correct32) / weight},
        {"argmax_agreement", agree / rows},
        {"logit_abs_diff_max", max_abs},
        {"logit_abs_diff_mean", sum_abs / n},
        {"logit_abs_diff_p99", diffs[static_cast<size_t>(0.99 * (diffs.size() - 1))]},
        {"logit_rms_fp32", std::sqrt(sum_sq / n)},
        {"bf16_gemm", ops::bf16_gemm_impl()}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "precision_compare: %s\n", e.what());
    return 1;
}
