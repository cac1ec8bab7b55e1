// ParamTable: names and shapes against real Google BERT checkpoints (golden listing.json), counts,
// alignment, decay flags, and the statistics of the reference truncated-normal initialisation.
#include "model/param_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace bertbench::model {
namespace {

using Listing = std::map<std::string, std::vector<int64_t>>;

// The tensors of one checkpoint in golden/tf_checkpoint/listing.json, without optimizer slots
// and global_step.
Listing golden_listing(const std::string& set) {
    const char* shared = std::getenv("BB_SHARED_DIR");
    if (shared == nullptr) return {};
    const auto j = nlohmann::json::parse(
        read_file(std::string(shared) + "/golden/tf_checkpoint/listing.json"));
    Listing out;
    for (const auto& t : j.at(set).at("tensors")) {
        const std::string name = t.at("name");
        if (name.ends_with("/adam_m") || name.ends_with("/adam_v") || name == "global_step")
            continue;
        out[name] = t.at("shape").get<std::vector<int64_t>>();
    }
    return out;
}

Listing table_listing(const ParamTable& t) {
    Listing out;
    for (const ParamInfo& p : t.entries()) out[p.name] = p.shape;
    return out;
}

TEST(ParamTable, MatchesGoogleChineseBaseCheckpoint) {
    const Listing want = golden_listing("google_bert_chinese_base_index");
    if (want.empty()) GTEST_SKIP() << "BB_SHARED_DIR not set";
    ASSERT_EQ(want.size(), 206u);
    BertConfig c = BertConfig::preset("base");
    c.vocab_size = 21128;
    const ParamTable table(c, Heads::pretraining);
    EXPECT_EQ(table_listing(table), want);
}

TEST(ParamTable, MatchesKerasBertTinyCheckpoint) {
    const Listing want = golden_listing("keras_bert_tiny");
    if (want.empty()) GTEST_SKIP() << "BB_SHARED_DIR not set";
    const BertConfig c =
        BertConfig::from_json_file(std::string(std::getenv("BB_SHARED_DIR")) +
                                   "/golden/tf_checkpoint/keras_bert_tiny/bert_config.json");
    const ParamTable table(c, Heads::pretraining);
    EXPECT_EQ(table_listing(table), want);
}

// Closed-form parameter count of BERT (independent of the table's construction).
size_t closed_form(const BertConfig& c, Heads heads) {
    const size_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
    size_t n = (V + c.type_vocab_size + c.max_position_embeddings) * H + 2 * H;
    n += c.num_hidden_layers * (4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H);
    n += H * H + H;  // pooler
    if (heads == Heads::pretraining) n += (H * H + H) + 2 * H + V + 2 * H + 2;
    if (heads == Heads::squad) n += 2 * H + 2;
    return n;
}

TEST(ParamTable, CountsLayoutAndDecayFlags) {
    const BertConfig large = BertConfig::preset("large");
    const ParamTable t(large, Heads::pretraining);
    EXPECT_EQ(t.entries().size(), 398u);
    EXPECT_EQ(t.num_parameters(), closed_form(large, Heads::pretraining));
    EXPECT_EQ(ParamTable(large, Heads::none).entries().size(), 398u - 7u);
    EXPECT_EQ(ParamTable(large, Heads::squad).entries().size(), 398u - 7u + 2u);
    EXPECT_EQ(ParamTable(large, Heads::squad).num_parameters(), closed_form(large, Heads::squad));

    size_t end = 0;
    for (const ParamInfo& p : t.entries()) {
        EXPECT_EQ(p.offset % 16, 0u) << p.name;
        EXPECT_GE(p.offset, end) << p.name;  // no overlap
        end = p.offset + p.size;
        const bool excluded = p.name.find("LayerNorm") != std::string::npos ||
                              p.name.find("bias") != std::string::npos;
        EXPECT_EQ(p.decay, !excluded) << p.name;
        // MLPerf TF2 decays the one LayerNorm its names keep as "LayerNorm": the masked-LM head's
        EXPECT_EQ(p.decayed_in_tf2, p.name.rfind("cls/predictions/transform/LayerNorm/", 0) == 0) << p.name;
    }
    EXPECT_GE(t.total_floats(), end);
    EXPECT_LT(t.total_floats(), end + 16);
    EXPECT_FALSE(t.at("cls/predictions/output_bias").decay);
    EXPECT_TRUE(t.at("cls/seq_relationship/output_weights").decay);
    EXPECT_TRUE(t.at("bert/embeddings/word_embeddings").decay);
    EXPECT_EQ(t.at("cls/seq_relationship/output_weights").shape, (std::vector<int64_t>{2, 1024}));
    EXPECT_EQ(t.at("bert/encoder/layer_23/intermediate/dense/kernel").shape,
              (std::vector<int64_t>{1024, 4096}));
    EXPECT_EQ(t.at("bert/encoder/layer_23/output/dense/kernel").shape,
              (std::vector<int64_t>{4096, 1024}));
    EXPECT_EQ(t.find("bert/encoder/layer_24/output/dense/kernel"), nullptr);
    EXPECT_THROW(t.at("nope"), Error);

    const ParamTable tiny(BertConfig::preset("tiny"), Heads::pretraining);
    std::vector<float> buf(tiny.total_floats());
    const auto v = tiny.view(std::span<float>(buf), "cls/seq_relationship/output_bias");
    EXPECT_EQ(v.size(), 2u);
    EXPECT_EQ(v.data(), buf.data() + tiny.at("cls/seq_relationship/output_bias").offset);
}

TEST(ParamTable, InitialisationStatistics) {
    BertConfig c = BertConfig::preset("mini");
    c.vocab_size = 5000;
    const ParamTable t(c, Heads::pretraining);
    std::vector<float> buf(t.total_floats(), 123.0f);
    t.initialize(buf, 42);
    const double sigma = c.initializer_range;
    // Truncated at 2 sigma: std = sigma * sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))) = 0.87962 sigma;
    // P(|z| > 1 | |z| <= 2) = (0.95450 - 0.68269) / 0.95450 = 0.28477.
    const double want_std = sigma * 0.879626, want_tail = 0.284766;
    size_t n_normal = 0;
    for (const ParamInfo& p : t.entries()) {
        const std::span<const float> x(buf.data() + p.offset, p.size);
        if (p.name.ends_with("gamma")) {
            for (float v : x) ASSERT_EQ(v, 1.0f) << p.name;
        } else if (p.name.ends_with("beta") || p.name.ends_with("bias")) {
            for (float v : x) ASSERT_EQ(v, 0.0f) << p.name;
        } else {
            double sum = 0, sq = 0, maxabs = 0;
            size_t tail = 0;
            for (float v : x) {
                sum += v;
                sq += double(v) * v;
                maxabs = std::max(maxabs, std::abs(double(v)));
                tail += std::abs(v) > sigma;
            }
            const double n = double(p.size), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
            // Tolerances: 5 standard errors of each statistic for n samples.
            EXPECT_LT(std::abs(mean), 5 * want_std / std::sqrt(n)) << p.name;
            EXPECT_NEAR(sd, want_std, 5 * want_std * 0.6 / std::sqrt(n)) << p.name;
            EXPECT_LE(maxabs, 2 * sigma * (1 + 1e-6)) << p.name;
            EXPECT_NEAR(tail / n, want_tail, 5 * std::sqrt(want_tail * (1 - want_tail) / n))
                << p.name;
            n_normal += p.size;
        }
        // Alignment padding is zeroed.
        const size_t next = &p == &t.entries().back() ? t.total_floats() : (&p + 1)->offset;
        for (size_t i = p.offset + p.size; i < next; ++i) ASSERT_EQ(buf[i], 0.0f) << p.name;
    }
    EXPECT_GT(n_normal, t.num_parameters() * 9 / 10);

    // Deterministic by seed, independent of the heads present, different for another seed.
    std::vector<float> again(t.total_floats()), other(t.total_floats());
    t.initialize(again, 42);
    EXPECT_EQ(again, buf);
    t.initialize(other, 43);
    EXPECT_NE(other, buf);
    const ParamTable squad(c, Heads::squad);
    std::vector<float> sq(squad.total_floats());
    squad.initialize(sq, 42);
    for (const char* name : {"bert/embeddings/word_embeddings", "bert/pooler/dense/kernel",
                             "bert/encoder/layer_3/output/dense/kernel"}) {
        const auto a = t.view(std::span<const float>(buf), name);
        const auto b = squad.view(std::span<const float>(sq), name);
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << name;
    }
}

TEST(ParamTable, RejectsInvalidConfig) {
    BertConfig c = BertConfig::preset("tiny");
    c.num_attention_heads = 3;
    EXPECT_THROW(ParamTable(c, Heads::pretraining), Error);
}

// Sizes within the config's bounds can still describe more parameters than the machine holds:
// the table says so in one line naming the part that dominates, before anything is allocated
// (the num_hidden_layers 2e9 looped 2e9 times and grew to gigabytes first).
TEST(ParamTable, RejectsModelLargerThanMemory) {
    BertConfig c = BertConfig::preset("base");
    c.num_hidden_layers = kMaxLayers;
    c.hidden_size = kMaxHiddenSize;
    c.num_attention_heads = 16;
    c.intermediate_size = kMaxIntermediateSize;  // 1024 x (4 x 2^32 + 2 x 2^34) floats: 192 TiB
    std::string e;
    try {
        ParamTable t(c, Heads::pretraining);
    } catch (const Error& err) {
        e = err.what();
    }
    EXPECT_NE(e.find("more than this machine's"), std::string::npos) << e;
    EXPECT_NE(e.find("num_hidden_layers 1024"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    c = BertConfig::preset("base");
    c.vocab_size = kMaxVocabSize;
    c.hidden_size = kMaxHiddenSize;  // 2^24 x 2^16 floats: 4 TiB of word embeddings
    c.num_attention_heads = 16;
    c.num_hidden_layers = 1;
    c.intermediate_size = 4;
    e.clear();
    try {
        ParamTable t(c, Heads::none);
    } catch (const Error& err) {
        e = err.what();
    }
    EXPECT_NE(e.find("word embeddings: vocab_size 16777216 x hidden_size 65536"),
              std::string::npos)
        << e;
    // BERT-large fits any machine this runs on (1.3 GB).
    EXPECT_NO_THROW(ParamTable(BertConfig::preset("large"), Heads::pretraining));
}

}  // namespace
}  // namespace bertbench::model
