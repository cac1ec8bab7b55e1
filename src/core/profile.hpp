// A tiny per-op wall-clock profiler for `bertbench bench --profile`: time is attributed to the
// label on top of a stack; BB_PROFILE_MARK(label) replaces the top label ("from here on, this op"),
// BB_PROFILE_SCOPE(label) pushes one until the end of the C++ scope. Main thread only (the marks
// sit between OpenMP regions). Disabled (the default) every macro is one global bool test.
// A device whose work runs behind the host (a GPU) is timed on its own clock: with a Timeline set,
// every section boundary records an event in the device's work, and entries() reads the times
// between them once the device has got there.
#pragma once

#include <string>
#include <vector>

namespace bertbench::profile {

inline bool g_enabled = false;  // read by the macros; set only through enable()

// A device's clock: events recorded in the order of its work (CUDA events on the backend's stream).
class Timeline {
public:
    virtual ~Timeline() = default;
    // An event at this point of the device's work; its handle.
    virtual size_t record() = 0;
    // Seconds between two recorded events (waits until the device has reached `to`).
    virtual double seconds(size_t from, size_t to) = 0;
    // Forgets every event (their handles may be reused).
    virtual void clear() = 0;
};
// Times sections with `t` (not owned) from the next reset() on; null: the host's clock (default).
void use_timeline(Timeline* t);

void enable(bool on);  // enabling also resets the table; disabling keeps it for entries()
void reset();
// `tag`: the caller's id of the label (model/cost.hpp's op tags; -1 none), kept with its entry so
// that a reader needs not parse the label.
void mark(const char* label, int tag = -1);  // close the current section, continue as `label`
void push(const char* label, int tag = -1);
void pop();

struct Entry {
    std::string label;
    double seconds = 0;
    long calls = 0;  // sections closed under this label
    int tag = -1;    // as given to mark/push
};
// Accumulated time per label, in first-seen order (sections still open are not included). With a
// Timeline: waits for the device to finish the closed sections.
std::vector<Entry> entries();

class Scope {
  public:
    explicit Scope(const char* label, int tag = -1) : on_(g_enabled) {
        if (on_) push(label, tag);
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
#define BB_PROFILE_MARK(label) BB_PROFILE_MARK_TAGGED(label, -1)
#define BB_PROFILE_MARK_TAGGED(label, tag)                                             \
    do {                                                                               \
        if (::bertbench::profile::g_enabled) ::bertbench::profile::mark(label, tag);   \
    } while (0)
