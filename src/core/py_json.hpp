// Python's json.dumps text for the pieces bertbench writes where a reference script's output must
// be reproduced byte for byte: repr() of a float (shortest round-trip digits, '.0' on integral
// values, exponent form when the decimal point is below -4 or above 16 places), ensure_ascii string
// escapes (\uXXXX in lower-case hex, surrogate pairs above U+FFFF), and Infinity/NaN as json.dumps
// writes them. (Parsing untrusted JSON: core/json_safe.hpp.)
#pragma once

#include <optional>
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

// Reading what Python's json writes: its bare NaN, Infinity and -Infinity (not JSON) quoted where
// they stand outside strings, so that a JSON parser takes the text; py_nonfinite_value then turns
// such a string back into the float (nullopt for any other string).
std::string quote_py_nonfinite(std::string_view text);
std::optional<double> py_nonfinite_value(std::string_view s);

}  // namespace bertbench
