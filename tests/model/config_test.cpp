// BertConfig: presets, bert_config.json parsing (Google and HF keys) and one-line validation
// errors.
#include "model/config.hpp"
#include "model/convert_outputs.hpp"

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
    // layer_norm_eps: written only when not the reference's 1e-12 (google's configs have none);
    // read back, and into a Hugging Face config.json
    EXPECT_FALSE(c.to_json().contains("layer_norm_eps"));
    EXPECT_EQ(hf_config(c, true, false)["layer_norm_eps"], 1e-12);
    c.layer_norm_eps = 1e-5;
    EXPECT_EQ(c.to_json()["layer_norm_eps"], 1e-5);
    EXPECT_EQ(BertConfig::from_json(c.to_json(), "x").layer_norm_eps, 1e-5);
    EXPECT_EQ(hf_config(c, true, false)["layer_norm_eps"], 1e-5);
    c.layer_norm_eps = 1e-12;

    nlohmann::json hf = c.to_json();
    hf["model_type"] = "bert";
    hf["hidden_act"] = "gelu";
    EXPECT_EQ(BertConfig::from_json(hf, "hf").hidden_act, "gelu_erf");
    hf["hidden_act"] = "gelu_new";
    EXPECT_EQ(BertConfig::from_json(hf, "hf").hidden_act, "gelu_new");
    // google's modeling.py lower-cases the name; HF's ACT2FN keys are lower case and exact
    nlohmann::json upper = c.to_json();
    upper["hidden_act"] = "GeLU";
    EXPECT_EQ(BertConfig::from_json(upper, "google.json").hidden_act, "gelu");
    hf["hidden_act"] = "GELU";
    EXPECT_EQ(BertConfig::from_json(hf, "hf").hidden_act, "GELU");  // kept: validate() refuses it

    // HF's keys without model_type: read as google's, and said; a google file says nothing
    nlohmann::json odd = c.to_json();
    odd["hidden_act"] = "gelu";
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(BertConfig::from_json(odd, "google.json").hidden_act, "gelu");
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    odd["architectures"] = {"BertForMaskedLM"};
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(BertConfig::from_json(odd, "odd.json").hidden_act, "gelu");
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("odd.json"), std::string::npos) << said;
    EXPECT_NE(said.find("\"architectures\""), std::string::npos) << said;
    ::testing::internal::CaptureStderr();  // once per file: a command reading it again says nothing
    EXPECT_EQ(BertConfig::from_json(odd, "odd.json").hidden_act, "gelu");
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    odd["hidden_act"] = "gelu_new";  // explicit: nothing to say
    ::testing::internal::CaptureStderr();
    BertConfig::from_json(odd, "odd.json");
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(BertConfig, ValidationErrorsNameFileAndField) {
    const std::string path = temp_path("bb_config_test.json");
    struct Case {
        const char* json;
        const char* field;
        const char* expected;  // a fragment of the message
    };
    // Each case's fields are merged over a complete BERT-base config (the five sizes are
    // required, see RequiredFieldsAndUpperBounds).
    const Case cases[] = {
        {R"({"hidden_size": 100, "num_attention_heads": 12})", "hidden_size", "multiple of"},
        {R"({"hidden_act": "swish"})", "hidden_act", "\"swish\""},
        {R"({"hidden_act": "tanh"})", "hidden_act", "google's modeling.py takes it; bertbench's engine has no such"},
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
        {"12E444", "", "too large for a double"},  // found by bert_config_fuzz (uncaught throw)
        // Hugging Face configs of other architectures that would run as BERT's, silently wrong
        {R"({"position_embedding_type": "relative_key"})", "position_embedding_type", "\"absolute\""},
        {R"({"is_decoder": true})", "is_decoder", "expected false"},
        {R"({"layer_norm_eps": 0})", "layer_norm_eps", "(0, 1)"},
        {R"({"layer_norm_eps": "1e-12"})", "layer_norm_eps", "expected a number"},
    };
    for (const Case& c : cases) {
        nlohmann::json j = nlohmann::json::parse(c.json, nullptr, false);
        if (j.is_object()) {
            nlohmann::json full = BertConfig::preset("base").to_json();
            full.update(j);
            write_file_atomic(path, full.dump());
        } else {
            write_file_atomic(path, c.json);
        }
        const std::string e = error_of([&] { BertConfig::from_json_file(path); });
        ASSERT_FALSE(e.empty()) << c.json;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
        EXPECT_NE(e.find(path), std::string::npos) << e;
        EXPECT_NE(e.find(c.field), std::string::npos) << e;
        EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    }
    // Unknown keys are ignored, as in the reference; 768.0 is accepted as 768; HF's defaults pass.
    write_file_atomic(path, R"({"hidden_size": 768.0, "directionality": "bidi", "vocab_size": 99,
        "position_embedding_type": "absolute", "is_decoder": false,
        "num_hidden_layers": 2, "num_attention_heads": 12, "intermediate_size": 64})");
    EXPECT_EQ(BertConfig::from_json_file(path).hidden_size, 768);
    std::remove(path.c_str());
    EXPECT_NE(error_of([&] { BertConfig::from_json_file(path); }).find(path), std::string::npos);
}

// The sizes that define a model must be in the file: a bert_config.json without them used to
// give a silent BERT-base. The error names every missing one.
TEST(BertConfig, RequiredFieldsAreNamed) {
    testing::TmpDir dir;
    const std::string path = dir.file("bert_config.json");
    write_file_atomic(path, R"({"hidden_size": 128, "num_attention_heads": 2})");
    const std::string e = error_of([&] { BertConfig::from_json_file(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("got no vocab_size, num_hidden_layers, intermediate_size"), std::string::npos)
        << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    nlohmann::json j = BertConfig::preset("tiny").to_json();
    for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers",
                            "num_attention_heads", "intermediate_size"}) {
        nlohmann::json k = j;
        k.erase(key);
        const std::string ek = error_of([&] { BertConfig::from_json(k, "cfg"); });
        EXPECT_NE(ek.find(std::string("got no ") + key), std::string::npos) << ek;
    }
    // The others keep the reference's defaults.
    for (const char* key : {"max_position_embeddings", "type_vocab_size", "hidden_act",
                            "hidden_dropout_prob", "initializer_range"})
        j.erase(key);
    const BertConfig c = BertConfig::from_json(j, "cfg");
    EXPECT_EQ(c.max_position_embeddings, 512);
    EXPECT_EQ(c.type_vocab_size, 2);
    EXPECT_EQ(c.hidden_act, "gelu");
}

// Every size has an upper bound (the issue's 27-byte {"hidden_size":1701732156} passed
// validation and wrapped size_t in the parameter table); a value past 32 bits is named too.
TEST(BertConfig, UpperBoundsNameTheField) {
    const nlohmann::json base = BertConfig::preset("tiny").to_json();
    struct Case {
        const char* field;
        int64_t value;
        const char* expected;
    };
    const Case cases[] = {
        {"hidden_size", 1701732156, "at most 65536, got 1701732156"},
        {"num_hidden_layers", 2000000000, "at most 1024, got 2000000000"},
        {"vocab_size", 1 << 30, "at most 16777216"},
        {"intermediate_size", 1 << 20, "at most 262144"},
        {"max_position_embeddings", 1 << 20, "at most 131072"},
        {"type_vocab_size", 1 << 20, "at most 65536"},
        {"num_attention_heads", 1 << 13, "at most 4096"},
        {"hidden_size", int64_t{1} << 33, "fits in 32 bits"},
    };
    for (const Case& c : cases) {
        nlohmann::json j = base;
        j[c.field] = c.value;
        if (std::string(c.field) == "num_attention_heads") j["hidden_size"] = 1 << 14;
        const std::string e = error_of([&] { BertConfig::from_json(j, "cfg").validate("cfg"); });
        EXPECT_NE(e.find(std::string("cfg: ") + c.field), std::string::npos) << e;
        EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    }
    nlohmann::json j = base;
    j["hidden_size"] = uint64_t{1} << 63;  // an unsigned JSON number
    EXPECT_NE(error_of([&] { BertConfig::from_json(j, "cfg"); }).find("fits in 32 bits"),
              std::string::npos);
    for (const char* name : {"tiny", "mini", "small", "medium", "base", "large"})
        EXPECT_NO_THROW(BertConfig::preset(name).validate(name));
}

// A value nested ~70,000 levels deep (200 KB) used to overflow the stack (the error path
// serialised it recursively). Now parsing stops at 64 levels with a one-line error, and no
// message ever carries an unbounded value.
TEST(BertConfig, DeepNestingAndHugeValuesGiveShortErrors) {
    testing::TmpDir dir;
    const std::string path = dir.file("bert_config.json");
    const std::string deep = std::string(70000, '[') + std::string(70000, ']');
    write_file_atomic(path, R"({"hidden_size": )" + deep + "}");
    std::string e = error_of([&] { BertConfig::from_json_file(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("nested deeper than 64 levels"), std::string::npos) << e.substr(0, 300);
    // 60 levels parse; the type error describes the value briefly.
    nlohmann::json j = BertConfig::preset("tiny").to_json();
    const std::string nested = std::string(60, '[') + std::string(60, ']');
    write_file_atomic(path, R"({"vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 1,
        "intermediate_size": 4, "hidden_size": )" + nested + "}");
    e = error_of([&] { BertConfig::from_json_file(path); });
    EXPECT_NE(e.find("hidden_size: expected an integer, got array"), std::string::npos) << e;
    EXPECT_LT(e.size(), 400u) << e;
    j["hidden_act"] = std::string(100000, 'x');
    e = error_of([&] { BertConfig::from_json(j, "cfg").validate("cfg"); });
    EXPECT_NE(e.find("hidden_act"), std::string::npos) << e.substr(0, 300);
    EXPECT_NE(e.find("(100000 bytes)"), std::string::npos) << e.substr(0, 300);
    EXPECT_LT(e.size(), 400u);
    j = BertConfig::preset("tiny").to_json();
    j["hidden_size"] = nlohmann::json::array();
    for (int i = 0; i < 100000; ++i) j["hidden_size"].push_back(i);
    e = error_of([&] { BertConfig::from_json(j, "cfg"); });
    EXPECT_NE(e.find("hidden_size"), std::string::npos);
    EXPECT_LT(e.size(), 400u) << e.substr(0, 300);
}

}  // namespace
}  // namespace bertbench::model
