// bertbench squad under mpirun: 2 ranks x 4 sequences fine-tune like 1 process x 8 on the same
// features in the same order (dropout off, clip after the all-reduce): every step's loss and the
// final model's logits agree to fp32 reduction-order noise; rank 0 alone predicts and writes.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../cli/run_util.hpp"
#include "../test_util.hpp"
#include "core/fs.hpp"
#include "mpi_util.hpp"

namespace {

using bertbench::read_file;
using bertbench::write_file_atomic;
using nlohmann::json;
using namespace bertbench::testing;

TEST(DistSquad, SlowTwoRanksMatchOneProcess) {
    if (const std::string why = mpirun_missing(); !why.empty()) GTEST_SKIP() << why;
    const TmpDir tmp("bb_dist_squad");
    // BERT-tiny without dropout (masks are drawn per local sequence: with dropout the ranks
    // would legitimately differ from one process).
    const std::string config = tmp.file("bert_config.json");
    write_file_atomic(config, json{{"vocab_size", 30522}, {"hidden_size", 128},
                                   {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                                   {"intermediate_size", 512}, {"hidden_act", "gelu"},
                                   {"hidden_dropout_prob", 0.0},
                                   {"attention_probs_dropout_prob", 0.0},
                                   {"max_position_embeddings", 512}, {"type_vocab_size", 2},
                                   {"initializer_range", 0.02}}
                                  .dump());
    const std::string args =
        " squad --vocab_file=" + golden("vocab.txt") + " --bert_config_file=" + config +
        " --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json") +
        " --do_predict --predict_file=" + golden("squad_pipeline/dataset-v1.1.json") +
        " --max_seq_length=64 --max_query_length=24 --doc_stride=32 --train_batch_size=8"
        " --num_train_epochs=2 --learning_rate=1e-3 --seed=3 --threads=1"
        " --clip_by_global_norm_after_gradient_allreduce --output_dir=";
    const std::string one = tmp.file("one"), two = tmp.file("two");
    const RunResult r1 = run_bertbench(args + one);
    ASSERT_EQ(r1.exit_code, 0) << r1.out;
    const MpiRunResult r2 = run_mpi(2, bertbench_path() + args + two, 300);
    ASSERT_EQ(r2.exit_code, 0) << r2.out;

    const std::vector<json> a = read_jsonl(one + "/train_log.jsonl");
    const std::vector<json> b = read_jsonl(two + "/train_log.jsonl");  // rank 0's, global figures
    ASSERT_EQ(a.size(), 17u);  // int(69 / 8 * 2)
    ASSERT_EQ(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const double x = a[i]["loss"].get<double>(), y = b[i]["loss"].get<double>();
        EXPECT_NEAR(y, x, 1e-5 * std::abs(x)) << "step " << i + 1;
        EXPECT_EQ(b[i]["samples"], a[i]["samples"]);
    }
    // The final weights, through the logits of every eval feature (rank 0 predicted once).
    const std::vector<json> la = read_jsonl(one + "/raw_results.jsonl");
    const std::vector<json> lb = read_jsonl(two + "/raw_results.jsonl");
    ASSERT_EQ(la.size(), lb.size());
    double worst = 0;
    for (size_t i = 0; i < la.size(); ++i)
        for (const char* k : {"start_logits", "end_logits"})
            for (size_t j = 0; j < la[i][k].size(); ++j)
                worst = std::max(worst, std::abs(la[i][k][j].get<double>() - lb[i][k][j].get<double>()));
    EXPECT_LT(worst, 1e-3) << "largest logit difference";
    EXPECT_EQ(count_of(r2.out, "\"exact_match\""), 1u) << r2.out;  // the metric printed once
    // the training file's warnings (facts of the file) once, as one process says them
    EXPECT_GT(count_of(r1.out, "Could not find answer"), 0u) << r1.out;
    EXPECT_EQ(count_of(r2.out, "Could not find answer"), count_of(r1.out, "Could not find answer")) << r2.out;
}

}  // namespace
