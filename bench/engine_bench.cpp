// Times the BERT engine: training step (forward + backward, no optimizer) and inference forward,
// seq/s and model GFLOP/s (forward_flops; training = 3x forward). Full-length sequences (all `seq`
// tokens real), max_predictions 20 per sequence as MLPerf seq-128 data. Prints one JSON line per
// (model, batch, mode). Usage: engine_bench [model=base] [batch=8] [seq=128] [iters=5] [mode=both]
// (iters = 0: a single step including first-touch costs, e.g. to read peak RSS).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/sysinfo.hpp"
#include "model/bert.hpp"

using namespace bertbench;
using namespace bertbench::model;

namespace {

Batch make_batch(const BertConfig& c, int B, int T, int P, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Batch b;
    b.batch_size = B;
    b.seq_offsets.push_back(0);
    for (int s = 0; s < B; ++s) {
        b.seq_offsets.push_back(b.seq_offsets.back() + T);
        for (int t = 0; t < T; ++t) {
            b.input_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.segment_ids.push_back(t < T / 2 ? 0 : 1);
        }
        for (int p = 0; p < P; ++p) {
            b.masked_index.push_back(s * T + 1 + (p * 6) % (T - 1));
            b.masked_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.masked_weights.push_back(1.f);
            b.masked_seq.push_back(s);
        }
        b.next_sentence_labels.push_back(static_cast<int32_t>(rng() % 2));
    }
    return b;
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
    const std::string name = argc > 1 ? argv[1] : "base";
    const int B = argc > 2 ? std::atoi(argv[2]) : 8;
    const int T = argc > 3 ? std::atoi(argv[3]) : 128;
    const int iters = argc > 4 ? std::atoi(argv[4]) : 5;
    const std::string mode = argc > 5 ? argv[5] : "both";
    const int P = 20;
    const BertConfig cfg = BertConfig::preset(name);
    const ParamTable table(cfg, Heads::pretraining);
    std::vector<float> params(table.total_floats()), grads(table.total_floats());
    table.initialize(params, 1);
    BertPretrainer model(table, Plan{B, T, P});
    const Batch batch = make_batch(cfg, B, T, P, 2);
    const double flops = forward_flops(cfg, batch);
    for (const char* m : {"train", "infer"}) {
        if (mode != "both" && mode != m) continue;
        const bool train = std::string(m) == "train";
        std::vector<double> times;
        for (int it = 0; it < iters + 1; ++it) {  // first iteration = warm-up, excluded
            const double t0 = now();
            model.forward(params, batch, train, 7, static_cast<uint64_t>(it));
            if (train) model.backward(grads, params, batch);
            times.push_back(now() - t0);
        }
        if (iters > 0) times.erase(times.begin());  // iters = 0: one step, warm-up included
        std::sort(times.begin(), times.end());
        const double med = times[times.size() / 2];
        const double f = train ? 3 * flops : flops;
        std::printf("{\"model\":\"%s\",\"mode\":\"%s\",\"batch\":%d,\"seq\":%d,\"threads\":%d,"
                    "\"median_s\":%.4f,\"min_s\":%.4f,\"max_s\":%.4f,\"seq_per_s\":%.2f,"
                    "\"gflops\":%.1f,\"arena_mib\":%.0f,\"peak_rss_mib\":%.0f,\"cpu\":\"%s\"}\n",
                    name.c_str(), m, B, T, omp_get_max_threads(), med, times.front(),
                    times.back(), B / med, f / med * 1e-9, model.arena_bytes() / 1048576.0,
                    sysinfo::peak_rss_mb(), sysinfo::cpu_model().c_str());
        std::fflush(stdout);
    }
    return 0;
}
