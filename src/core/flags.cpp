#include "core/flags.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "core/error.hpp"

namespace bertbench {
namespace {

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
    Flag f{name, help, "", target, false};
    std::visit([&](auto* p) { f.default_text = show(*p); }, target);
    flags_.push_back(std::move(f));
}

void Flags::add(const std::string& n, std::string* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, bool* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, int* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, int64_t* v, const std::string& h) { add_flag(n, v, h); }
void Flags::add(const std::string& n, double* v, const std::string& h) { add_flag(n, v, h); }

void Flags::allow_positional(const std::string& usage) {
    positional_allowed_ = true;
    positional_usage_ = usage;
}

Flags::Flag* Flags::find(const std::string& name) {
    for (auto& f : flags_)
        if (f.name == name) return &f;
    return nullptr;
}

bool Flags::is_set(const std::string& name) const {
    for (const auto& f : flags_)
        if (f.name == name) return f.set;
    BB_CHECK(false && "is_set of an unregistered flag");
    return false;
}

std::string Flags::suggestion(const std::string& name) const {
    std::string best;
    size_t best_d = std::string::npos;
    for (const auto& f : flags_) {
        for (const std::string& cand : {f.name, std::holds_alternative<bool*>(f.target)
                                                    ? "no" + f.name
                                                    : std::string()}) {
            if (cand.empty()) continue;
            const size_t d = edit_distance(name, cand);
            if (d < best_d) best_d = d, best = cand;
        }
    }
    if (best.empty() || best_d > std::max<size_t>(3, name.size() / 3)) return "";
    return " (did you mean --" + best + "?)";
}

void Flags::assign(Flag& flag, const std::string& text) {
    const std::string what = "flag --" + flag.name;
    std::visit(
        [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::string>) {
                *p = text;
            } else if constexpr (std::is_same_v<T, bool>) {
                *p = parse_bool(text, what);
            } else if constexpr (std::is_same_v<T, double>) {
                char* end = nullptr;
                errno = 0;
                const double v = std::strtod(text.c_str(), &end);
                if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
                    fail("{}: expected a number, got \"{}\"", what, text);
                *p = v;
            } else {
                char* end = nullptr;
                errno = 0;
                const long long v = std::strtoll(text.c_str(), &end, 10);
                if (text.empty() || *end != '\0' || errno == ERANGE)
                    fail("{}: expected an integer, got \"{}\"", what, text);
                if constexpr (std::is_same_v<T, int>) {
                    if (v < INT32_MIN || v > INT32_MAX)
                        fail("{}: expected a 32-bit integer, got \"{}\"", what, text);
                }
                *p = static_cast<T>(v);
            }
        },
        flag.target);
    flag.set = true;
}

bool Flags::parse(int argc, char** argv) {
    bool only_positional = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (only_positional || arg.size() < 2 || arg[0] != '-') {
            if (!positional_allowed_)
                fail("unexpected argument \"{}\" (flags look like --name=value; see bertbench {} --help)",
                     arg, command_);
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
        Flag* f = find(name);
        if (f == nullptr && !has_value && name.rfind("no", 0) == 0) {
            Flag* neg = find(name.substr(2));
            if (neg != nullptr && std::holds_alternative<bool*>(neg->target)) {
                *std::get<bool*>(neg->target) = false;
                neg->set = true;
                continue;
            }
        }
        if (f == nullptr)
            fail("unknown flag --{}{}", name, suggestion(name));
        if (!has_value) {
            if (std::holds_alternative<bool*>(f->target)) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                fail("flag --{} needs a value", name);
            }
        }
        assign(*f, value);
    }
    return true;
}

std::string Flags::help() const {
    std::string out = fmt::format("usage: bertbench {} [flags]{}\n\n{}\n\nflags:\n", command_,
                                  positional_allowed_ ? " " + positional_usage_ : "", summary_);
    for (const auto& f : flags_) {
        const bool is_bool = std::holds_alternative<bool*>(f.target);
        out += fmt::format("  --{}{}\n      {} (default: {})\n", f.name,
                           is_bool ? " | --no" + f.name : "=VALUE", f.help, f.default_text);
    }
    return out;
}

nlohmann::json Flags::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : flags_) std::visit([&](auto* p) { j[f.name] = *p; }, f.target);
    return j;
}

}  // namespace bertbench
