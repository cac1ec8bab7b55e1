// The profiler behind core/profile.hpp: a label stack and a table of accumulated seconds.
#include "core/profile.hpp"

#include <chrono>
#include <utility>

namespace bertbench::profile {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
    std::vector<Entry> table;
    std::vector<std::pair<const char*, int>> stack;  // label, tag
    Clock::time_point since;
};

State& state() {
    static State s;
    return s;
}

// Adds the time since the last event to the label on top of the stack.
void close_section() {
    State& s = state();
    const Clock::time_point now = Clock::now();
    if (!s.stack.empty()) {
        const std::string label = s.stack.back().first;
        Entry* e = nullptr;
        for (Entry& x : s.table)
            if (x.label == label) e = &x;
        if (e == nullptr) {
            s.table.push_back({label, 0.0, 0, s.stack.back().second});
            e = &s.table.back();
        }
        e->seconds += std::chrono::duration<double>(now - s.since).count();
        ++e->calls;
    }
    s.since = now;
}

}  // namespace

void enable(bool on) {
    if (on) reset();
    g_enabled = on;
}

void reset() {
    State& s = state();
    s.table.clear();
    s.stack.clear();
    s.since = Clock::now();
}

void mark(const char* label, int tag) {
    State& s = state();
    close_section();
    if (s.stack.empty())
        s.stack.push_back({label, tag});
    else
        s.stack.back() = {label, tag};
}

void push(const char* label, int tag) {
    close_section();
    state().stack.push_back({label, tag});
}

void pop() {
    close_section();
    State& s = state();
    if (!s.stack.empty()) s.stack.pop_back();
}

std::vector<Entry> entries() {
    return state().table;
}

}  // namespace bertbench::profile
