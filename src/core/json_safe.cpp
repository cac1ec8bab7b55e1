// Bounded-depth JSON parsing (nlohmann's parser callback sees each container open with its
// depth and stops the parse past the limit) and bounded value descriptions for messages.
#include "core/json_safe.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace bertbench::json_safe {
namespace {

struct TooDeep {};  // thrown from the parser callback; caught in parse()

void put_quoted(std::string& out, std::string_view s, size_t budget) {
    out += '"';
    size_t i = 0;
    for (; i < s.size() && out.size() < budget; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        // a well-formed UTF-8 character above the C1 controls as it is (a file name in any script)
        const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 1;
        const bool c1_control = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0;
        if (n > 1 && i + n <= s.size() && !c1_control && invalid_utf8_at(s.substr(i, n)) == std::string_view::npos) {
            out += s.substr(i, n);
            i += n - 1;
            continue;
        }
        out += (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? static_cast<char>(c) : '?';
    }
    out += '"';
    if (i < s.size()) out += fmt::format("... ({} bytes)", s.size());
}

void put(std::string& out, const nlohmann::json& v, size_t budget, int depth) {
    if (v.is_string()) {
        put_quoted(out, v.get_ref<const std::string&>(), budget);
        return;
    }
    if (!v.is_structured()) {  // number, bool, null (a number's dump is short)
        out += v.is_discarded() ? std::string("<invalid>") : v.dump();
        return;
    }
    const bool object = v.is_object();
    if (depth >= 3 || v.empty()) {
        out += v.empty() ? (object ? "{}" : "[]")
                         : fmt::format("{} of {}", object ? "{...}" : "[...]", v.size());
        return;
    }
    out += object ? '{' : '[';
    size_t n = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++n) {
        if (n > 0) out += ", ";
        if (out.size() >= budget) {
            out += fmt::format("... ({} in all)", v.size());
            break;
        }
        if (object) {
            put_quoted(out, it.key(), budget);
            out += ": ";
        }
        put(out, it.value(), budget, depth + 1);
    }
    out += object ? '}' : ']';
}

}  // namespace

namespace {

template <class Json>
Json parse_as(std::string_view text, const std::string& where, const std::string& what,
              int max_depth) {
    const typename Json::parser_callback_t limit = [max_depth](int depth,
                                                               typename Json::parse_event_t ev,
                                                               Json&) {
        // `depth` counts the containers already open around this one.
        if ((ev == Json::parse_event_t::object_start || ev == Json::parse_event_t::array_start) &&
            depth >= max_depth)
            throw TooDeep{};
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), limit);
    } catch (const TooDeep&) {
        fail("{}: expected {}, got JSON nested deeper than {} levels", where, what, max_depth);
    } catch (const nlohmann::json::parse_error& e) {
        // nlohmann's reason ("invalid string: ill-formed UTF-8 byte", "unexpected '}'; ..."),
        // without its "last read" echo of the input's bytes
        const std::string full = e.what();
        const size_t from = full.find(" - "), to = full.find("; last read:");
        const std::string reason = from != std::string::npos && to != std::string::npos && to > from
                                       ? ": " + full.substr(from + 3, to - from - 3)
                                       : std::string();
        fail("{}: expected {}, got text that is not valid JSON (syntax error at byte {}{})", where,
             what, e.byte, reason);
    } catch (const nlohmann::json::out_of_range&) {  // 1e400: reported as out_of_range 406
        fail("{}: expected {}, got a number too large for a double", where, what);
    } catch (const nlohmann::json::exception&) {
        fail("{}: expected {}, got text that is not valid JSON", where, what);
    }
}

}  // namespace

nlohmann::json parse(std::string_view text, const std::string& where, const std::string& what,
                     int max_depth) {
    return parse_as<nlohmann::json>(text, where, what, max_depth);
}

nlohmann::ordered_json parse_ordered(std::string_view text, const std::string& where,
                                     const std::string& what, int max_depth) {
    return parse_as<nlohmann::ordered_json>(text, where, what, max_depth);
}

std::string brief(const nlohmann::json& value, size_t max_chars) {
    std::string out;
    put(out, value, max_chars, 0);
    return out;
}

size_t invalid_utf8_at(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (n == 0 || i + n > s.size()) return i;
        uint32_t cp = n == 1 ? c : c & (0x7f >> n);
        for (size_t k = 1; k < n; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc >> 6) != 0x2) return i;
            cp = (cp << 6) | (cc & 0x3f);
        }
        static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += n;
    }
    return std::string_view::npos;
}

std::string printable(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return out;
}

std::string quoted(std::string_view s, size_t max_chars) {
    std::string out;
    put_quoted(out, s, max_chars);
    return out;
}

std::string valid_utf8(std::string_view s) {
    std::string out;
    for (size_t bad; (bad = invalid_utf8_at(s)) != std::string_view::npos; s.remove_prefix(bad + 1))
        out.append(s.substr(0, bad)).append("\xEF\xBF\xBD");
    return out.append(s);
}

}  // namespace bertbench::json_safe
