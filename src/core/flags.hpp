// Command-line flags with absl/TF-flags semantics, so reference command lines paste unchanged:
// --name=value, --name value, -name=value; booleans as --name, --noname, --name=True|false|1|0.
// An unknown flag is an error naming the closest known flag. Written here rather than taken from
// CLI11 because CLI11 has no --noname form and no "did you mean" for unknown long flags.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace bertbench {

class Flags {
public:
    // `command` is the subcommand name ("prepare"); `summary` is one paragraph for --help.
    Flags(std::string command, std::string summary);

    // Register a flag; the variable's current value is its default. `help` states units.
    void add(const std::string& name, std::string* value, const std::string& help);
    void add(const std::string& name, bool* value, const std::string& help);
    void add(const std::string& name, int* value, const std::string& help);
    void add(const std::string& name, int64_t* value, const std::string& help);
    void add(const std::string& name, double* value, const std::string& help);

    // Allow positional arguments (otherwise any is an error). `usage` names them for --help.
    void allow_positional(const std::string& usage);

    // Parse argv[1..argc); argv[0] is the subcommand. Returns false if --help was given (help was
    // printed to stdout and the caller should exit 0). Throws Error on a bad or unknown flag.
    bool parse(int argc, char** argv);

    bool is_set(const std::string& name) const;  // given explicitly on the command line
    const std::vector<std::string>& positional() const { return positional_; }
    std::string help() const;
    nlohmann::json to_json() const;  // the effective configuration, every flag by name

private:
    using Target = std::variant<std::string*, bool*, int*, int64_t*, double*>;
    struct Flag {
        std::string name, help, default_text;
        Target target;
        bool set = false;
    };
    Flag* find(const std::string& name);
    void add_flag(const std::string& name, Target target, const std::string& help);
    void assign(Flag& flag, const std::string& text);
    std::string suggestion(const std::string& name) const;

    std::string command_, summary_, positional_usage_;
    bool positional_allowed_ = false;
    std::vector<Flag> flags_;
    std::vector<std::string> positional_;
};

// Parses a boolean the way absl does (true/false/1/0/yes/no/t/f/y/n, any case); throws with `what`.
bool parse_bool(const std::string& text, const std::string& what);
// Splits "a,b,c" on commas, dropping empty items.
std::vector<std::string> split_commas(const std::string& text);

}  // namespace bertbench
