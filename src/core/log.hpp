// Logging to stderr with a wall-clock offset since start; progress lines redraw in place on a
// terminal and become plain lines otherwise (so CI logs stay readable).
#pragma once

#include <fmt/format.h>

#include <string>

namespace bertbench::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);
bool stderr_is_terminal();
// True the first time this process asks with `key`, false after: a message about a file said
// once, though a command reads the file more than once.
bool first_time(const std::string& key);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
    if (level() <= Level::info) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    if (level() <= Level::warn) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
    if (level() <= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}

// A duration for a progress line: "42s", "3m07s", "2h05m"; "?" when negative or not finite.
std::string duration(double s);

// A progress line: on a terminal it overwrites itself (\r) at most every 0.2 s; otherwise it is
// printed as a plain line at most every `plain_interval_s` seconds. finish() ends the line.
class Progress {
public:
    explicit Progress(double plain_interval_s = 10.0);
    ~Progress();
    void update(const std::string& line, bool force = false);
    void finish(const std::string& line);

private:
    double plain_interval_s_;
    double last_ = -1e9;
    bool tty_;
    bool open_ = false;
};

}  // namespace bertbench::log
