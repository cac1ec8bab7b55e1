// Python json.dumps pieces; see py_json.hpp. repr follows CPython's float_repr_style 'short'
// (PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0)): shortest round-trip digits d1..dn with the
// decimal point after `decpt` digits; fixed notation when -4 < decpt <= 16, else d1.d2..dne±XX.
#include "core/py_json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.hpp"

namespace bertbench {

std::string py_float_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
    char buf[64];
    // Shortest round-trip digits in scientific form: "-d.ddde-XX".
    const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    BB_CHECK(r.ec == std::errc());
    const std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
    const size_t epos = s.find('e');
    BB_CHECK(epos != std::string_view::npos);
    std::string out;
    size_t i = 0;
    if (s[0] == '-') out += '-', i = 1;
    std::string digits;
    for (size_t k = i; k < epos; ++k)
        if (s[k] != '.') digits += s[k];
    int exp10 = 0;
    std::from_chars(s.data() + epos + (s[epos + 1] == '+' ? 2 : 1), s.data() + s.size(), exp10);
    const int decpt = exp10 + 1;  // value = 0.d1d2... * 10^decpt
    const int n = static_cast<int>(digits.size());
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0.";
            out.append(static_cast<size_t>(-decpt), '0');
            out += digits;
        } else if (decpt >= n) {
            out += digits;
            out.append(static_cast<size_t>(decpt - n), '0');
            out += ".0";
        } else {
            out.append(digits, 0, static_cast<size_t>(decpt));
            out += '.';
            out.append(digits, static_cast<size_t>(decpt), std::string::npos);
        }
    } else {
        out += digits[0];
        if (n > 1) out += '.', out.append(digits, 1, std::string::npos);
        const int e = decpt - 1;
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        out += eb;
    }
    return out;
}

void append_py_json_float(std::string& out, double x) {
    if (std::isnan(x)) out += "NaN";
    else if (std::isinf(x)) out += x < 0 ? "-Infinity" : "Infinity";
    else out += py_float_repr(x);
}

namespace {
void append_u16(std::string& out, unsigned v) {
    char b[8];
    std::snprintf(b, sizeof b, "\\u%04x", v);
    out += b;
}
}  // namespace

void append_py_json_string(std::string& out, std::string_view s) {
    out += '"';
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default:
                    if (c < 0x20 || c == 0x7f) append_u16(out, c);
                    else out += static_cast<char>(c);
            }
            ++i;
            continue;
        }
        // Decode one UTF-8 sequence; anything malformed becomes U+FFFD for one byte.
        char32_t cp = 0xFFFD;
        size_t len = 1;
        auto cont = [&](size_t k) { return k < s.size() && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80; };
        if ((c & 0xE0) == 0xC0 && cont(i + 1)) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu), len = 2;
        } else if ((c & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
            len = 3;
        } else if ((c & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            cp = ((c & 0x07u) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 12) |
                 ((static_cast<unsigned char>(s[i + 2]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(s[i + 3]) & 0x3Fu);
            len = 4;
        }
        if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            append_u16(out, 0xD800 + (v >> 10));
            append_u16(out, 0xDC00 + (v & 0x3FF));
        } else {
            append_u16(out, cp);
        }
        i += len;
    }
    out += '"';
}

std::string quote_py_nonfinite(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            out += c;
            if (c == '\\' && i + 1 < text.size()) out += text[++i];
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        bool quoted = false;
        for (const std::string_view token : {"NaN", "Infinity", "-Infinity"})
            if (text.substr(i, token.size()) == token) {
                out += '"';
                out += token;
                out += '"';
                i += token.size() - 1;
                quoted = true;
                break;
            }
        if (!quoted) out += c;
    }
    return out;
}

std::optional<double> py_nonfinite_value(std::string_view s) {
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    return std::nullopt;
}

}  // namespace bertbench
