// Python's json.dumps text for the pieces bertbench writes where a reference script's output must
// be reproduced byte for byte: repr() of a float (shortest round-trip digits, '.0' on integral
// values, exponent form when the decimal point is below -4 or above 16 places), ensure_ascii string
// escapes (\uXXXX in lower-case hex, surrogate pairs above U+FFFF), and Infinity/NaN as json.dumps
// writes them. Also a JSON parse whose nesting depth is bounded (a deep file cannot exhaust the stack).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace bertbench {

// repr(x) of a Python float ("0.1", "1.0", "1e-05", "1.5e+16", "-0.0", "inf", "nan").
std::string py_float_repr(double x);
// json.dumps(x) of a float: repr, except Infinity / -Infinity / NaN.
void append_py_json_float(std::string& out, double x);
// json.dumps(s) with ensure_ascii=True of a UTF-8 string, quotes included. Invalid UTF-8 bytes are
// written as U+FFFD (never produced from text that came from a JSON parser).
void append_py_json_string(std::string& out, std::string_view utf8);

// nlohmann::json::parse of `text` with at most `max_depth` nested arrays/objects; Error naming
// `where` with the byte offset for invalid JSON or deeper nesting.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& where, int max_depth = 64);

}  // namespace bertbench
