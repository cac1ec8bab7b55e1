#include "core/flags.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>

#include "core/error.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"

namespace bertbench {
namespace {

// `--output_dir --learning_rate=1e-3`: a forgotten value, not a directory named like a flag.
std::string flag_after_flag(const std::string& name, const char* next) {
    return fmt::format("flag --{} needs a value, got the flag {} after it (expected --{}=VALUE, which may start with --)",
                       name, next, name);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

template <typename T>
std::string show(T v) {
    if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, std::string>) {
        return "\"" + v + "\"";
    } else {
        return fmt::format("{}", v);
    }
}

}  // namespace

bool parse_bool(const std::string& text, const std::string& what) {
    const std::string t = lower(text);
    if (t == "true" || t == "1" || t == "yes" || t == "t" || t == "y") return true;
    if (t == "false" || t == "0" || t == "no" || t == "f" || t == "n") return false;
    fail("{}: expected a boolean (true/false), got \"{}\"", what, text);
}

bool python_int_decimal(std::string_view text, std::string* decimal) {
    const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    while (!text.empty() && space(text.front())) text.remove_prefix(1);
    while (!text.empty() && space(text.back())) text.remove_suffix(1);
    bool negative = false;
    int base = 10;
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
        negative = text[0] == '-';
        text.remove_prefix(1);
    } else if (text.size() > 2 && text[0] == '0' &&
               (text[1] == 'x' || text[1] == 'o')) {
        // absl's IntegerParser (lower-case prefixes only: "0X1f" is int("0X1f", 10), an error);
        // int(text, base) allows "0x_1f"
        base = text[1] == 'o' ? 8 : 16;
        text.remove_prefix(2);
        if (text.front() == '_') text.remove_prefix(1);
    }
    // The digits, '_' only between two of them; then base -> decimal, one digit at a time.
    std::vector<int> value{0};  // decimal digits, least significant first
    bool digit_before = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '_') {
            if (!digit_before || i + 1 == text.size() || text[i + 1] == '_') return false;
            continue;
        }
        int d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        if (d < 0 || d >= base) return false;
        digit_before = true;
        int carry = d;
        for (int& v : value) {
            const int x = v * base + carry;
            v = x % 10;
            carry = x / 10;
        }
        for (; carry > 0; carry /= 10) value.push_back(carry % 10);
    }
    if (!digit_before) return false;
    while (value.size() > 1 && value.back() == 0) value.pop_back();
    decimal->assign(negative && !(value.size() == 1 && value[0] == 0) ? "-" : "");
    for (auto it = value.rbegin(); it != value.rend(); ++it)
        decimal->push_back(static_cast<char>('0' + *it));
    return true;
}

bool python_float(std::string_view text, double* value) {
    const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
    while (!text.empty() && space(text.front())) text.remove_prefix(1);
    while (!text.empty() && space(text.back())) text.remove_suffix(1);
    std::string plain;  // the text without its underscores, for strtod
    size_t i = 0;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) plain.push_back(text[i++]);
    const std::string word = lower(std::string(text.substr(i)));
    if (word == "inf" || word == "infinity" || word == "nan") {
        plain += word;
    } else {
        // digits with '_' only between two of them; returns how many digits it took
        const auto digits = [&] {
            size_t n = 0;
            while (i < text.size()) {
                const char c = text[i];
                if (c >= '0' && c <= '9') {
                    plain.push_back(c);
                    ++n;
                } else if (c != '_' || n == 0 || i + 1 == text.size() || text[i + 1] < '0' || text[i + 1] > '9') {
                    break;
                }
                ++i;
            }
            return n;
        };
        size_t mantissa = digits();
        if (i < text.size() && text[i] == '.') {
            plain.push_back(text[i++]);
            mantissa += digits();
        }
        if (mantissa == 0) return false;
        if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
            plain.push_back(text[i++]);
            if (i < text.size() && (text[i] == '+' || text[i] == '-')) plain.push_back(text[i++]);
            if (digits() == 0) return false;
        }
        if (i != text.size()) return false;
    }
    *value = std::strtod(plain.c_str(), nullptr);  // ERANGE: ±inf or the rounded tiny value, as float()
    return true;
}

std::vector<std::string> split_list(const std::string& text, const std::string& flag) {
    if (!text.empty() && (text.front() == ',' || text.back() == ',' || text.find(",,") != std::string::npos))
        fail("--{}: expected values separated by commas, got an empty item in \"{}\"", flag, text);
    return split_commas(text);
}

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(',', start);
        if (end == std::string::npos) end = text.size();
        if (end > start) out.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

Flags::Flags(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void Flags::add_flag(const std::string& name, Target target, const std::string& help) {
    BB_CHECK(find(name) == nullptr);
    Flag f{name, help, "", target, false, false, false, "", ""};
    std::visit([&](auto* p) { f.default_text = show(*p); }, target);
    flags_.push_back(std::move(f));
}

void Flags::add(const std::string& n, std::string* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, bool* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, int* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, int64_t* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, uint64_t* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, double* v, const std::string& h) { add_flag(n, v, h); }
void Flags::allow_infinity(const std::string& n) {
    Flag* f = find(n);
    BB_CHECK(f != nullptr && std::holds_alternative<double*>(f->target));
    f->infinity_ok = true;
}

void Flags::allow_nan(const std::string& n) {
    Flag* f = find(n);
    BB_CHECK(f != nullptr && std::holds_alternative<double*>(f->target));
    f->nan_ok = true;
}

void Flags::allow_positional(const std::string& usage) {
    positional_allowed_ = true;
    positional_usage_ = usage;
}

Flags::Flag* Flags::find(const std::string& name) {
    for (auto& f : flags_)
        if (f.name == name) return &f;
    return nullptr;
}

const Flags::Ignored* Flags::find_ignored(const std::string& name) const {
    for (const auto& g : ignored_)
        if (g.name == name) return &g;
    return nullptr;
}

bool Flags::known_name(const std::string& name) const {
    for (const auto& f : flags_)
        if (f.name == name) return true;
    for (const auto& [a, c] : aliases_)
        if (a == name) return true;
    return find_ignored(name) != nullptr;
}

void Flags::alias(const std::string& alias_name, const std::string& canonical,
                  const std::string& note) {
    BB_CHECK(!known_name(alias_name));
    BB_CHECK(find(canonical) != nullptr);
    aliases_.emplace_back(alias_name, canonical);
    if (!note.empty()) alias_notes_.emplace_back(alias_name, note);
}

void Flags::add_ignored(const std::string& name, bool takes_value, const std::string& why) {
    BB_CHECK(!known_name(name));
    ignored_.push_back({name, why, takes_value});
}

void Flags::add_hint(const std::string& name, const std::string& hint) {
    hints_.emplace_back(name, hint);
}

bool Flags::is_set(const std::string& name) const {
    for (const auto& f : flags_)
        if (f.name == name) return f.set;
    BB_CHECK(false && "is_set of an unregistered flag");
    return false;
}

std::string Flags::spelling(const std::string& name) const {
    for (const auto& f : flags_)
        if (f.name == name) return f.set && !f.set_as.empty() ? f.set_as : f.name;
    BB_CHECK(false && "spelling of an unregistered flag");
    return name;
}

std::string Flags::ignored_text() const {
    std::string out;
    for (const auto& g : ignored_given_) out += (out.empty() ? "" : ", ") + g;
    return out;
}

std::string Flags::ignored_given(const std::string& name) const {
    for (const auto& g : ignored_given_)
        if (g == "--" + name || g == "--no" + name || g.rfind("--" + name + "=", 0) == 0) return g;
    return "";
}

std::string Flags::suggestion(const std::string& name) const {
    // A unique prefix of one flag: argparse's abbreviation (NVIDIA's PyTorch scripts accept
    // --train_batch=8); absl, whose meaning bertbench's flags have, does not.
    std::string only;
    int prefixed = 0;
    const auto prefix_of = [&](const std::string& cand) {
        if (name.size() >= 3 && cand.size() > name.size() && cand.compare(0, name.size(), name) == 0)
            ++prefixed, only = cand;
    };
    for (const auto& f : flags_) prefix_of(f.name);
    for (const auto& [a, c] : aliases_) prefix_of(a);
    if (prefixed == 1)
        return " (did you mean --" + only + "? flags are not abbreviated here, as absl's are not)";
    std::string best;
    size_t best_d = std::string::npos;
    const auto consider = [&](const std::string& cand) {
        const size_t d = edit_distance(name, cand);
        if (d < best_d) best_d = d, best = cand;
    };
    for (const auto& f : flags_) {
        consider(f.name);
        if (std::holds_alternative<bool*>(f.target)) consider("no" + f.name);
    }
    for (const auto& [a, c] : aliases_) consider(a);
    if (best.empty() || best_d > std::max<size_t>(3, name.size() / 3)) return "";
    return " (did you mean --" + best + "?)";
}

void Flags::assign(Flag& flag, const std::string& text, const std::string& spelled) {
    const std::string what = "flag --" + spelled;
    if (flag.set && flag.set_as != spelled && flag.set_text != text)
        fail("flag --{}={}: names the same setting as --{}={} given before, with another value "
             "(expected one of them)", spelled, text, flag.set_as, flag.set_text);
    // absl and argparse take the last silently; a line built from a template plus overrides
    // counts on it, a pasted brace expansion (--input_file={a,b}) loses all but one file
    if (flag.set && flag.set_text != text)
        log::warn("flag --{} given again: --{}={} replaces --{}={} (the last counts, as absl and argparse "
                  "take it; a list of files is one comma-separated value)",
                  flag.name, spelled, text, flag.set_as, flag.set_text);
    std::visit(
        [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::string>) {
                // No flag takes a URL: the references' gs:// paths (TF's gfile) are refused here
                // rather than read or written as a local "gs:" directory.
                const size_t colon = text.find("://");
                if (colon != std::string::npos && colon > 0 && std::isalpha(static_cast<unsigned char>(text[0])) &&
                    text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") >= colon)
                    fail("{}: expected a local path or value, got the URL \"{}\" (bertbench reads and "
                         "writes local files only; TensorFlow's gfile would open {}:// there) (hint: a "
                         "local copy, or the bucket mounted as a directory)",
                         what, text, text.substr(0, colon));
                *p = text;
            } else if constexpr (std::is_same_v<T, bool>) {
                *p = parse_bool(text, what);
            } else if constexpr (std::is_same_v<T, double>) {
                double v = 0;
                if (!python_float(text, &v)) fail("{}: expected a number, got \"{}\"", what, text);
                // "inf", or past DBL_MAX; "nan"
                if ((std::isinf(v) && !flag.infinity_ok) || (std::isnan(v) && !flag.nan_ok))
                    fail("{}: expected a finite number, got \"{}\"", what, text);
                *p = v;
            } else if constexpr (std::is_same_v<T, uint64_t>) {  // LoadGen's seeds: digits only
                char* end = nullptr;
                errno = 0;
                const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
                if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' ||
                    errno == ERANGE)
                    fail("{}: expected an integer 0 .. 18446744073709551615, got \"{}\"", what, text);
                *p = v;
            } else {  // int and int64_t: the references' absl and argparse integers
                std::string decimal;
                if (!python_int_decimal(text, &decimal))
                    fail("{}: expected an integer, got \"{}\"", what, text);
                char* end = nullptr;
                errno = 0;
                const long long v = std::strtoll(decimal.c_str(), &end, 10);
                if (errno == ERANGE || v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
                    fail("{}: expected an integer in [{}, {}], got \"{}\"", what, std::numeric_limits<T>::min(),
                         std::numeric_limits<T>::max(), text);
                *p = static_cast<T>(v);
            }
        },
        flag.target);
    flag.set = true;
    flag.set_as = spelled;
    flag.set_text = text;
}

bool Flags::parse(int argc, char** argv) {
    bool only_positional = false;
    std::vector<std::string> errors;  // every bad flag, reported together at the end
    const auto canonical_of = [&](const std::string& name) -> Flag* {
        if (Flag* f = find(name)) return f;
        for (const auto& [a, c] : aliases_)
            if (a == name) return find(c);
        return nullptr;
    };
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (only_positional || arg.size() < 2 || arg[0] != '-') {
            if (!positional_allowed_) {
                errors.push_back(fmt::format("unexpected argument \"{}\" (flags look like "
                                             "--name=value; see bertbench {} --help)",
                                             arg, command_));
                continue;
            }
            positional_.push_back(arg);
            continue;
        }
        if (arg == "--") {
            only_positional = true;
            continue;
        }
        std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
        if (body == "help" || body == "helpfull" || body == "h") {
            std::cout << help();
            return false;
        }
        std::string name = body, value;
        const size_t eq = body.find('=');
        const bool has_value = eq != std::string::npos;
        if (has_value) {
            name = body.substr(0, eq);
            value = body.substr(eq + 1);
        }
        Flag* f = canonical_of(name);
        if (f == nullptr && has_value && name.rfind("no", 0) == 0) {
            const Flag* neg = canonical_of(name.substr(2));
            if (neg != nullptr && std::holds_alternative<bool*>(neg->target)) {
                errors.push_back(fmt::format("flag --{}={}: the no- form of a boolean flag takes no value "
                                             "(expected --{}, or --{}=true|false)", name, value, name,
                                             name.substr(2)));
                continue;
            }
        }
        if (f == nullptr && !has_value && name.rfind("no", 0) == 0) {
            const std::string positive = name.substr(2);
            Flag* neg = canonical_of(positive);
            if (neg != nullptr && std::holds_alternative<bool*>(neg->target)) {
                try {
                    assign(*neg, "false", positive);
                } catch (const Error& e) {
                    errors.push_back(e.what());
                }
                continue;
            }
            const Ignored* g = find_ignored(positive);
            if (g != nullptr && !g->takes_value) {
                ignored_given_.push_back("--" + name);
                ignored_why_.push_back(g->why);
                continue;
            }
        }
        if (f == nullptr) {
            if (const Ignored* g = find_ignored(name)) {
                if (g->takes_value && !has_value) {
                    if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) == 0) {
                        // `--tpu_name --num_train_steps=5` (an unset $TPU_NAME): as for a flag
                        // that has effect, the next flag is not swallowed as the value
                        errors.push_back(flag_after_flag(name, argv[i + 1]));
                        continue;
                    } else if (i + 1 < argc) {
                        value = argv[++i];
                    } else {
                        errors.push_back(fmt::format("flag --{} needs a value", name));
                        continue;
                    }
                }
                if (!g->takes_value && has_value) {
                    try {
                        parse_bool(value, "flag --" + name);
                    } catch (const Error& e) {
                        errors.push_back(e.what());
                        continue;
                    }
                }
                ignored_given_.push_back("--" + name +
                                         (g->takes_value || has_value ? "=" + value : ""));
                ignored_why_.push_back(g->why);
                continue;
            }
            std::string hint;
            for (const auto& [foreign, h] : hints_)
                if (foreign == name) hint = " (" + h + ")";
            if (hint.empty()) hint = suggestion(name);
            if (hint.empty() && positional_allowed_ && arg[1] != '-')  // "-p.json": a file's name?
                hint = " (a file whose name starts with '-': ./" + arg + ", or -- before it)";
            errors.push_back(fmt::format("unknown flag {}{}", arg.substr(0, arg.find('=')), hint));
            // `--name value` of another script: the value belongs to the unknown flag and is not
            // a second error ("unexpected argument"). Only where no positional argument is taken.
            if (!has_value && !positional_allowed_ && i + 1 < argc && argv[i + 1][0] != '-')
                ++i;
            continue;
        }
        if (!has_value) {
            if (std::holds_alternative<bool*>(f->target)) {
                value = "true";
            } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) == 0) {
                // `--output_dir --learning_rate=1e-3`: a forgotten value, not a directory
                errors.push_back(flag_after_flag(name, argv[i + 1]));
                continue;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                errors.push_back(fmt::format("flag --{} needs a value", name));
                continue;
            }
        }
        // every flag is recorded in the run's JSON files (config.json, a checkpoint's metadata)
        if (const size_t bad = json_safe::invalid_utf8_at(value); bad != std::string::npos && !any_bytes_) {
            errors.push_back(fmt::format("flag --{}: byte {} of its value (0x{:02x}) is not UTF-8, expected UTF-8 "
                                         "text, which the run's JSON files can record (hint: rename that file or "
                                         "directory)", name, bad, static_cast<unsigned char>(value[bad])));
            continue;
        }
        try {
            assign(*f, value, name);
        } catch (const Error& e) {
            errors.push_back(e.what());
        }
    }
    if (errors.size() == 1) fail("{}", errors[0]);
    if (errors.size() > 1) {
        std::string all;
        for (size_t k = 0; k < errors.size(); ++k)
            all += fmt::format("{}({}) {}", k ? "; " : "", k + 1, errors[k]);
        fail("{} bad flags: {}", errors.size(), all);
    }
    // One line per reason, in the order first given: "accepted, no effect on a CPU run: ...".
    std::vector<std::string> whys;
    for (const auto& w : ignored_why_)
        if (std::find(whys.begin(), whys.end(), w) == whys.end()) whys.push_back(w);
    for (const auto& w : whys) {
        std::string names;
        for (size_t k = 0; k < ignored_given_.size(); ++k)
            if (ignored_why_[k] == w) names += (names.empty() ? "" : ", ") + ignored_given_[k];
        log::info("accepted, no effect {}: {}", w, names);
    }
    return true;
}

std::string Flags::help() const {
    std::string out = fmt::format("usage: bertbench {} [flags]{}\n\n{}\n\nflags:\n", command_,
                                  positional_allowed_ ? " " + positional_usage_ : "", summary_);
    for (const auto& f : flags_) {
        const bool is_bool = std::holds_alternative<bool*>(f.target);
        std::string also;
        for (const auto& [a, c] : aliases_) {
            if (c != f.name) continue;
            also += (also.empty() ? " (also --" : ", --") + a;
            for (const auto& [n, note] : alias_notes_)
                if (n == a) also += ": " + note;
        }
        if (!also.empty()) also += ")";
        out += fmt::format("  --{}{}{}\n      {} (default: {})\n", f.name,
                           is_bool ? " | --no" + f.name : "=VALUE", also, f.help, f.default_text);
    }
    if (!ignored_.empty()) {
        out += "\naccepted for other scripts' command lines, without effect:\n";
        for (const auto& g : ignored_)
            out += fmt::format("  --{}{}  (no effect {})\n", g.name, g.takes_value ? "=VALUE" : "",
                               g.why);
    }
    return out;
}

nlohmann::json Flags::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : flags_)
        std::visit(
            [&](auto* p) {
                if constexpr (std::is_same_v<std::remove_pointer_t<decltype(p)>, double>) {
                    if (std::isinf(*p)) {  // JSON has no infinity (it would be written as null)
                        j[f.name] = *p > 0 ? "inf" : "-inf";
                        return;
                    }
                }
                j[f.name] = *p;
            },
            f.target);
    return j;
}

}  // namespace bertbench
