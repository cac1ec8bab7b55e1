// json_safe: parsing with a nesting limit (errors name the input, never crash on 70,000 levels)
// and brief(), whose output stays short whatever the value.
#include "core/json_safe.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

using testing::error_of;

std::string nested(int depth, const std::string& inner = "1") {
    return std::string(depth, '[') + inner + std::string(depth, ']');
}

TEST(JsonSafe, ParseLimitsNesting) {
    EXPECT_EQ(json_safe::parse(R"({"a": [1, {"b": 2}]})", "f", "x")["a"][1]["b"], 2);
    EXPECT_NO_THROW(json_safe::parse(nested(64), "f", "x"));
    EXPECT_NO_THROW(json_safe::parse("{\"a\":" + nested(63) + "}", "f", "x"));
    for (const std::string& text : {nested(65), "{\"a\":" + nested(64) + "}", nested(70000)}) {
        const std::string e = error_of([&] { json_safe::parse(text, "cfg.json", "a config"); });
        EXPECT_EQ(e, "cfg.json: expected a config, got JSON nested deeper than 64 levels")
            << e.substr(0, 200);
    }
    EXPECT_NO_THROW(json_safe::parse(nested(3), "f", "x", 3));
    EXPECT_THROW(json_safe::parse(nested(4), "f", "x", 3), Error);
    // Brackets inside strings are not nesting.
    EXPECT_NO_THROW(json_safe::parse("\"" + std::string(1000, '[') + "\"", "f", "x"));
}

TEST(JsonSafe, ParseErrorsAreOneLineWithTheByte) {
    const std::string e = error_of([] { json_safe::parse("{\"a\": tru}", "f.json", "JSON"); });
    EXPECT_NE(
        e.find("f.json: expected JSON, got text that is not valid JSON (syntax error at byte"),
        std::string::npos)
        << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
    // A long bad token is not echoed.
    const std::string long_token = "{\"a\": " + std::string(100000, 'x') + "}";
    EXPECT_LT(error_of([&] { json_safe::parse(long_token, "f", "x"); }).size(), 200u);
    EXPECT_THROW(json_safe::parse("", "f", "x"), Error);
    // Found by bert_config_fuzz: a number beyond double range is nlohmann's out_of_range, not a
    // parse_error, and escaped as an uncaught exception.
    for (const char* big : {"12E444", "{\"hidden_size\": -1e400}", "[1e999]"}) {
        const std::string eb = error_of([&] { json_safe::parse(big, "f.json", "JSON"); });
        EXPECT_EQ(eb, "f.json: expected JSON, got a number too large for a double") << big;
    }
    // The parser's reason is said (not the bytes it last read): invalid UTF-8, a lone surrogate
    // escape (Python's json takes one; nlohmann does not).
    EXPECT_NE(error_of([] { json_safe::parse("{\"a\": \"\xff\"}", "f", "x"); })
                  .find("(syntax error at byte 8: invalid string: ill-formed UTF-8 byte)"),
              std::string::npos);
    EXPECT_NE(error_of([] { json_safe::parse(R"({"a": "b\ud800ar"})", "f", "x"); })
                  .find("invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF)"),
              std::string::npos);
}

TEST(JsonSafe, BriefIsShort) {
    EXPECT_EQ(json_safe::brief(nlohmann::json(5)), "5");
    EXPECT_EQ(json_safe::brief(nlohmann::json("gelu")), "\"gelu\"");
    EXPECT_EQ(json_safe::brief(nlohmann::json::parse(R"({"a": [1, 2], "b": null})")),
              R"({"a": [1, 2], "b": null})");
    EXPECT_EQ(json_safe::brief(nlohmann::json::parse(nested(5))), "[[[[...] of 1]]]");
    EXPECT_EQ(json_safe::quoted("a\nb\"c"), "\"a?b?c\"");
    // letters of any script kept; a C1 control, a stray or cut UTF-8 byte, an overlong form: '?'
    EXPECT_EQ(json_safe::quoted("tr\xc3\xa4 \xe6\x97\xa5 \xf0\x9f\x98\x80"), "\"tr\xc3\xa4 \xe6\x97\xa5 \xf0\x9f\x98\x80" "\"");
    EXPECT_EQ(json_safe::quoted("a\xc2\x85" "b\xff" "c\xe6\x97"), "\"a??b?c??\"");
    EXPECT_EQ(json_safe::quoted("\xc0\xaf"), "\"??\"");
    const std::string s = json_safe::brief(nlohmann::json(std::string(100000, 'y')));
    EXPECT_LT(s.size(), 120u);
    EXPECT_NE(s.find("(100000 bytes)"), std::string::npos) << s;
    nlohmann::json big = nlohmann::json::array();
    for (int i = 0; i < 100000; ++i) big.push_back({{"k", std::string(50, 'z')}});
    const std::string b = json_safe::brief(big);
    EXPECT_LT(b.size(), 200u) << b;
    EXPECT_NE(b.find("(100000 in all)"), std::string::npos) << b;
    nlohmann::json deep = 0;
    for (int i = 0; i < 70000; ++i) deep = nlohmann::json::array({std::move(deep)});
    EXPECT_EQ(json_safe::brief(deep), "[[[[...] of 1]]]");
}

}  // namespace
}  // namespace bertbench
