// A tiny per-op wall-clock profiler for `bertbench bench --profile`: time is attributed to the
// label on top of a stack; BB_PROFILE_MARK(label) replaces the top label ("from here on, this op"),
// BB_PROFILE_SCOPE(label) pushes one until the end of the C++ scope. Main thread only (the marks
// sit between OpenMP regions). Disabled (the default) every macro is one global bool test.
#pragma once

#include <string>
#include <vector>

namespace bertbench::profile {

inline bool g_enabled = false;  // read by the macros; set only through enable()

void enable(bool on);  // enabling also resets the table; disabling keeps it for entries()
void reset();
void mark(const char* label);  // close the current section, continue as `label`
void push(const char* label);
void pop();

struct Entry {
    std::string label;
    double seconds = 0;
    long calls = 0;  // sections closed under this label
};
// Accumulated time per label, in first-seen order (sections still open are not included).
std::vector<Entry> entries();

class Scope {
  public:
    explicit Scope(const char* label) : on_(g_enabled) {
        if (on_) push(label);
    }
    ~Scope() {
        if (on_) pop();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

  private:
    bool on_;
};

}  // namespace bertbench::profile

#define BB_PROFILE_CAT2(a, b) a##b
#define BB_PROFILE_CAT(a, b) BB_PROFILE_CAT2(a, b)
#define BB_PROFILE_SCOPE(label) \
    const ::bertbench::profile::Scope BB_PROFILE_CAT(bb_profile_scope_, __LINE__)(label)
#define BB_PROFILE_MARK(label)                                                  \
    do {                                                                        \
        if (::bertbench::profile::g_enabled) ::bertbench::profile::mark(label); \
    } while (0)
