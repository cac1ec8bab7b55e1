// BertConfig: presets, bert_config.json parsing (Google and HF keys) and one-line validation
// errors.
#include "model/config.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "test_util.hpp"
#include "core/fs.hpp"

namespace bertbench::model {
namespace {

using testing::error_of;

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(getpid())))
        .string();
}


TEST(BertConfig, Presets) {
    struct Row {
        const char* name;
        int L, H, A, I;
    };
    for (const Row& r : {Row{"tiny", 2, 128, 2, 512}, Row{"mini", 4, 256, 4, 1024},
                         Row{"small", 4, 512, 8, 2048}, Row{"medium", 8, 512, 8, 2048},
                         Row{"base", 12, 768, 12, 3072}, Row{"large", 24, 1024, 16, 4096}}) {
        const BertConfig c = BertConfig::preset(r.name);
        EXPECT_EQ(c.num_hidden_layers, r.L) << r.name;
        EXPECT_EQ(c.hidden_size, r.H) << r.name;
        EXPECT_EQ(c.num_attention_heads, r.A) << r.name;
        EXPECT_EQ(c.intermediate_size, r.I) << r.name;
        EXPECT_EQ(c.vocab_size, 30522) << r.name;
        EXPECT_EQ(c.head_size() * c.num_attention_heads, c.hidden_size);
        EXPECT_NO_THROW(c.validate(r.name));
    }
    const std::string e = error_of([] { BertConfig::preset("huge"); });
    EXPECT_NE(e.find("\"huge\""), std::string::npos) << e;
    EXPECT_NE(e.find("tiny"), std::string::npos) << e;
}

TEST(BertConfig, ReadsGoogleConfigFromGolden) {
    const char* shared = std::getenv("BB_SHARED_DIR");
    if (shared == nullptr) GTEST_SKIP() << "BB_SHARED_DIR not set";
    const BertConfig c = BertConfig::from_json_file(
        std::string(shared) + "/golden/tf_checkpoint/keras_bert_tiny/bert_config.json");
    EXPECT_EQ(c.hidden_size, 4);
    EXPECT_EQ(c.num_hidden_layers, 2);
    EXPECT_EQ(c.num_attention_heads, 4);
    EXPECT_EQ(c.intermediate_size, 16);
    EXPECT_EQ(c.max_position_embeddings, 16);
    EXPECT_EQ(c.vocab_size, 15);
    EXPECT_EQ(c.hidden_act, "gelu");  // Google "gelu" = tanh form, kept as is
    EXPECT_FLOAT_EQ(c.hidden_dropout_prob, 0.1f);
}

TEST(BertConfig, JsonRoundTripAndHfGelu) {
    BertConfig c = BertConfig::preset("mini");
    c.vocab_size = 1000;
    c.hidden_act = "relu";
    const BertConfig back = BertConfig::from_json(c.to_json(), "x");
    EXPECT_EQ(back.to_json(), c.to_json());

    nlohmann::json hf = c.to_json();
    hf["model_type"] = "bert";
    hf["hidden_act"] = "gelu";
    EXPECT_EQ(BertConfig::from_json(hf, "hf").hidden_act, "gelu_erf");
    hf["hidden_act"] = "gelu_new";
    EXPECT_EQ(BertConfig::from_json(hf, "hf").hidden_act, "gelu_new");
}

TEST(BertConfig, ValidationErrorsNameFileAndField) {
    const std::string path = temp_path("bb_config_test.json");
    struct Case {
        const char* json;
        const char* field;
        const char* expected;  // a fragment of the message
    };
    const Case cases[] = {
        {R"({"hidden_size": 100, "num_attention_heads": 12})", "hidden_size", "multiple of"},
        {R"({"hidden_act": "swish"})", "hidden_act", "\"swish\""},
        {R"({"num_hidden_layers": 0})", "num_hidden_layers", "positive"},
        {R"({"vocab_size": -5})", "vocab_size", "got -5"},
        {R"({"hidden_dropout_prob": 1.5})", "hidden_dropout_prob", "[0, 1)"},
        {R"({"attention_probs_dropout_prob": -0.1})", "attention_probs_dropout_prob", "[0, 1)"},
        {R"({"hidden_size": "768"})", "hidden_size", "expected an integer"},
        {R"({"intermediate_size": 3072.5})", "intermediate_size", "expected an integer"},
        {R"({"hidden_act": 3})", "hidden_act", "expected a string"},
        {R"({"initializer_range": 0})", "initializer_range", "positive"},
        {R"([1, 2])", "", "JSON object"},
        {R"({"hidden_size": )", "", "not valid JSON"},
    };
    for (const Case& c : cases) {
        write_file_atomic(path, c.json);
        const std::string e = error_of([&] { BertConfig::from_json_file(path); });
        ASSERT_FALSE(e.empty()) << c.json;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
        EXPECT_NE(e.find(path), std::string::npos) << e;
        EXPECT_NE(e.find(c.field), std::string::npos) << e;
        EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    }
    // Unknown keys are ignored, as in the reference; 768.0 is accepted as 768.
    write_file_atomic(path, R"({"hidden_size": 768.0, "directionality": "bidi"})");
    EXPECT_EQ(BertConfig::from_json_file(path).hidden_size, 768);
    std::remove(path.c_str());
    EXPECT_NE(error_of([&] { BertConfig::from_json_file(path); }).find(path), std::string::npos);
}

}  // namespace
}  // namespace bertbench::model
