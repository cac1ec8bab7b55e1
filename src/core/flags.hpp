// Command-line flags with absl/TF-flags semantics, so reference command lines paste unchanged:
// --name=value, --name value, -name=value; booleans as --name, --noname, --name=True|false|1|0.
// Other scripts' spellings: alias() (another name for a flag), add_ignored() (accepted, no effect
// on a CPU run, listed once at start-up) and add_hint() (not accepted; the error names ours).
// Every unknown or invalid flag of a command line is reported at once, each with the closest
// match. Written here rather than taken from CLI11 because CLI11 has no --noname form and no
// "did you mean" for unknown long flags.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
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
    void add(const std::string& name, uint64_t* value, const std::string& help);  // 0 .. 2^64 - 1
    void add(const std::string& name, double* value, const std::string& help);
    // A number flag that takes an infinity too, as Python's float() reads it ("inf", "-inf",
    // "Infinity", "1e999"): a threshold where infinity means "never" (others refuse it).
    void allow_infinity(const std::string& name);
    // ... and NaN ("nan"), where the reference's own test of the value makes it mean something
    // (NVIDIA run_squad.py's `max_steps > 0`: no limit).
    void allow_nan(const std::string& name);

    // `alias` is another script's name for the registered flag `canonical` (--model_dir for
    // --output_dir): it sets that flag, its --noalias form too for a boolean. Giving both names
    // with different values is an error. `note`, when given, follows the alias in --help (what
    // else that spelling does).
    void alias(const std::string& alias, const std::string& canonical,
               const std::string& note = "");
    // Accepted and without effect here (accelerator settings such as --use_tpu): takes a value
    // (`takes_value`) or is a boolean (--name, --noname, --name=false). `why` completes "no
    // effect ..." ("on a CPU run"); parse() logs the ones given once per reason, as "accepted,
    // no effect on a CPU run: --use_tpu, --tpu_name=x".
    void add_ignored(const std::string& name, bool takes_value, const std::string& why);
    // A flag of another script that is not accepted: its error says `hint` (for example
    // "use --steps_per_update") instead of an edit-distance guess.
    void add_hint(const std::string& name, const std::string& hint);

    // Flag values may hold bytes that are not UTF-8 (a command that records no flags in JSON:
    // tokenize); otherwise such a value is an error.
    void allow_any_bytes() { any_bytes_ = true; }

    // Allow positional arguments (otherwise any is an error). `usage` names them for --help.
    void allow_positional(const std::string& usage);

    // Parse argv[1..argc); argv[0] is the subcommand. Returns false if --help was given (help was
    // printed to stdout and the caller should exit 0). Throws Error on a bad or unknown flag.
    bool parse(int argc, char** argv);

    bool is_set(const std::string& name) const;  // given explicitly (or through an alias)
    // The spelling that set a flag, as given ("model_dir" when --model_dir set --output_dir);
    // the canonical name when it was not set or set under its own name.
    std::string spelling(const std::string& name) const;
    // The ignored flags given, as "--use_tpu, --tpu_name=x" ("" when none).
    std::string ignored_text() const;
    // How the ignored flag `name` was given ("--use_xla", "--nouse_xla", "--tpu_name=x"); "" if not.
    std::string ignored_given(const std::string& name) const;
    const std::vector<std::string>& positional() const { return positional_; }
    std::string help() const;
    nlohmann::json to_json() const;  // the effective configuration, every flag by name

private:
    using Target = std::variant<std::string*, bool*, int*, int64_t*, uint64_t*, double*>;
    struct Flag {
        std::string name, help, default_text;
        Target target;
        bool set = false, infinity_ok = false, nan_ok = false;
        std::string set_as, set_text;  // the spelling and value text that set it
    };
    struct Ignored {
        std::string name, why;
        bool takes_value = false;
    };
    Flag* find(const std::string& name);
    const Ignored* find_ignored(const std::string& name) const;
    void add_flag(const std::string& name, Target target, const std::string& help);
    void assign(Flag& flag, const std::string& text, const std::string& spelled);
    std::string suggestion(const std::string& name) const;
    bool known_name(const std::string& name) const;

    std::string command_, summary_, positional_usage_;
    bool positional_allowed_ = false, any_bytes_ = false;
    std::vector<Flag> flags_;
    std::vector<std::pair<std::string, std::string>> aliases_;  // alias -> canonical
    std::vector<std::pair<std::string, std::string>> alias_notes_;  // alias -> its --help note
    std::vector<Ignored> ignored_;
    std::vector<std::pair<std::string, std::string>> hints_;    // foreign name -> hint
    std::vector<std::string> ignored_given_, ignored_why_;
    std::vector<std::string> positional_;
};

// Parses a boolean the way absl does (true/false/1/0/yes/no/t/f/y/n, any case); throws with `what`.
bool parse_bool(const std::string& text, const std::string& what);
// The integer Python's int() reads from a flag's text, as absl's IntegerParser (tf.flags) and
// argparse's type=int call it: surrounding whitespace, one sign, '_' between digits ("1_000"), and
// without a sign absl's base prefixes 0x/0X (hexadecimal) and 0o (octal). Any size: the value as a
// decimal string with its sign ("-16"); false when the text is not such an integer.
bool python_int_decimal(std::string_view text, std::string* decimal);
// The number Python's float() reads from a flag's text, as absl's FloatParser (tf.flags) and
// argparse's type=float call it: surrounding whitespace, one sign, decimal digits with '_' between
// two of them, an optional fraction and exponent, or inf/infinity/nan in any case; not C's
// hexadecimal floats or nan(...). A value past the double range is ±inf, one below it 0 or
// subnormal (as float() rounds). False when the text is not such a number.
bool python_float(std::string_view text, double* value);
// Splits "a,b,c" on commas, dropping empty items.
std::vector<std::string> split_commas(const std::string& text);
// The items of a list-valued flag (--model=tiny,base): split_commas, but an empty item (a comma at
// either end, or two together) is an error naming --flag, where a file list may skip it.
std::vector<std::string> split_list(const std::string& text, const std::string& flag);

}  // namespace bertbench
