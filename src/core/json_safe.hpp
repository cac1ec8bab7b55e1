// JSON from outside the program (bert_config.json, JSON carried in checkpoint metadata strings,
// file headers): parsing with bounded nesting, and bounded descriptions of values for messages.
// nlohmann's parser builds the tree without recursion, but dump(), comparisons and our own code
// walk it recursively: a value nested ~70,000 levels deep (200 KB of "[") overflows the stack.
// So every untrusted text goes through parse() here, and messages use brief(), never dump().
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace bertbench::json_safe {

inline constexpr int kMaxDepth = 64;  // our formats need at most 4 levels

// Parses `text`. Error "<where>: expected <what>, got text that is not valid JSON (syntax error
// at byte N)" or "<where>: expected <what>, got JSON nested deeper than <max_depth> levels".
// Containers nested up to `max_depth` deep are accepted ({"a": [1]} has depth 2).
nlohmann::json parse(std::string_view text, const std::string& where, const std::string& what,
                     int max_depth = kMaxDepth);
// The same, objects keeping their keys in the text's order (a repeated key: its first place, its
// last value, as Python's json).
nlohmann::ordered_json parse_ordered(std::string_view text, const std::string& where,
                                     const std::string& what, int max_depth = kMaxDepth);

// A short, one-line rendering of any value for an error message: scalars as JSON, strings quoted
// with control characters, quotes, backslashes and bytes that are not UTF-8 as '?' (any script's
// letters kept), containers up to 3 levels; at most about `max_chars` long
// ("..." marks what was cut). Never recursive beyond 3 levels, never longer than the budget.
std::string brief(const nlohmann::json& value, size_t max_chars = 80);
// `s` quoted as brief() quotes strings, cut to about `max_chars`: "gelu", "aaaa..." (5000 bytes).
std::string quoted(std::string_view s, size_t max_chars = 60);
// `s` with every byte outside printable ASCII as '?' (names from files, in one-line summaries).
std::string printable(std::string_view s);
// The index of the first byte of `s` that is not part of well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, at most U+10FFFF), or npos.
size_t invalid_utf8_at(std::string_view s);
// `s` with each byte that is not part of well-formed UTF-8 replaced by U+FFFD (a file name that
// JSON cannot carry as it is, in a record of what was read).
std::string valid_utf8(std::string_view s);

}  // namespace bertbench::json_safe
