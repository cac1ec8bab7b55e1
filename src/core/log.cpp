#include "core/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>

namespace bertbench::log {
namespace {
Level g_level = Level::info;
std::mutex g_mutex;
const auto g_start = std::chrono::steady_clock::now();
bool g_progress_open = false;  // a terminal progress line without its newline is on screen

double seconds_since_start() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}
}  // namespace

void set_level(Level lvl) { g_level = lvl; }
Level level() { return g_level; }
bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

bool first_time(const std::string& key) {
    static std::mutex mu;
    static std::set<std::string> seen;
    const std::lock_guard<std::mutex> lock(mu);
    return seen.insert(key).second;
}

void write(Level lvl, const std::string& message) {
    static const char* names[] = {"debug", "info", "warning", "error"};
    std::lock_guard lock(g_mutex);
    if (g_progress_open) {  // clear it, so the log line does not glue onto it; next update redraws
        std::fputs("\r\033[K", stderr);
        g_progress_open = false;
    }
    // One write per line (stderr is unbuffered): under mpirun the ranks' lines reach the terminal
    // through one stream, and a line written in pieces interleaved with another rank's. The whole
    // message, a NUL in it too (text quoted from input files, as the references log it).
    std::string line = lvl == Level::info ? fmt::format("[{:8.2f}s] ", seconds_since_start())
                                          : fmt::format("[{:8.2f}s] {}: ", seconds_since_start(),
                                                        names[static_cast<int>(lvl)]);
    line.append(message).push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    const int64_t t = static_cast<int64_t>(s + 0.5);
    if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
    if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}s", t);
}

Progress::Progress(double plain_interval_s)
    : plain_interval_s_(plain_interval_s), tty_(stderr_is_terminal()) {}

Progress::~Progress() {
    std::lock_guard lock(g_mutex);
    if (open_ && g_progress_open) std::fputc('\n', stderr);
    g_progress_open = false;
}

void Progress::update(const std::string& line, bool force) {
    const double now = seconds_since_start();
    std::lock_guard lock(g_mutex);
    if (tty_) {
        if (!force && now - last_ < 0.2) return;
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
        std::fflush(stderr);
        open_ = true;
        g_progress_open = true;
    } else {
        if (!force && now - last_ < plain_interval_s_) return;
        std::fprintf(stderr, "[%8.2fs] %s\n", now, line.c_str());
    }
    last_ = now;
}

void Progress::finish(const std::string& line) {
    std::lock_guard lock(g_mutex);
    if (tty_) {
        if (!line.empty()) {
            std::fprintf(stderr, "\r\033[K%s\n", line.c_str());
        } else if (g_progress_open) {
            std::fputs("\r\033[K", stderr);  // nothing to keep: the line goes
        }
    } else if (!line.empty()) {
        std::fprintf(stderr, "[%8.2fs] %s\n", seconds_since_start(), line.c_str());
    }
    open_ = false;
    g_progress_open = false;
}

}  // namespace bertbench::log
