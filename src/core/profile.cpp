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
    // With a device timeline: the event the open section started at, and the closed sections
    // whose device times entries() has not read yet (table index, from, to).
    Timeline* timeline = nullptr;
    size_t since_event = 0;
    struct Pending {
        size_t entry, from, to;
    };
    std::vector<Pending> pending;
};

State& state() {
    static State s;
    return s;
}

// Adds the time since the last event to the label on top of the stack (with a timeline: the
// section's two events, read by entries()).
void close_section() {
    State& s = state();
    const Clock::time_point now = Clock::now();
    const size_t event = s.timeline ? s.timeline->record() : 0;
    if (!s.stack.empty()) {
        const std::string label = s.stack.back().first;
        size_t i = 0;
        while (i < s.table.size() && s.table[i].label != label) ++i;
        if (i == s.table.size()) s.table.push_back({label, 0.0, 0, s.stack.back().second});
        Entry& e = s.table[i];
        if (s.timeline)
            s.pending.push_back({i, s.since_event, event});
        else
            e.seconds += std::chrono::duration<double>(now - s.since).count();
        ++e.calls;
    }
    s.since = now;
    s.since_event = event;
}

}  // namespace

void enable(bool on) {
    if (on) reset();
    g_enabled = on;
}

void use_timeline(Timeline* t) {
    state().timeline = t;
    reset();
}

void reset() {
    State& s = state();
    s.table.clear();
    s.stack.clear();
    s.pending.clear();
    if (s.timeline) {
        s.timeline->clear();
        s.since_event = s.timeline->record();
    }
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
    State& s = state();
    for (const State::Pending& p : s.pending) s.table[p.entry].seconds += s.timeline->seconds(p.from, p.to);
    s.pending.clear();
    return s.table;
}

}  // namespace bertbench::profile
