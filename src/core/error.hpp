// Errors: one exception type whose message is a complete one-line diagnostic
// ("[where] what: expected X, got Y (hint: ...)"). Thrown at boundaries, caught in main,
// which prints it and exits non-zero. BB_CHECK is an always-on internal assertion.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace bertbench {

class Error : public std::runtime_error {
public:
    // Control characters (a newline inside a tensor name read from a file, say) become '?', so
    // the message stays one line whatever the input held.
    explicit Error(const std::string& message) : std::runtime_error(one_line(message)) {}

private:
    static std::string one_line(std::string s) {
        for (char& c : s)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        return s;
    }
};

// Throws Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace bertbench

// Always-on check of an internal invariant (not of user input: use fail() for that).
#define BB_CHECK(cond)                                                                     \
    do {                                                                                   \
        if (!(cond))                                                                       \
            ::bertbench::fail("internal error: {}:{}: check failed: {}", __FILE__, __LINE__, \
                              #cond);                                                      \
    } while (0)
