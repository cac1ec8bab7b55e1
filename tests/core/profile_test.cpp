// The profiler's device clock (core/profile.hpp Timeline): with a timeline set, each section is the
// time between the events recorded at its two boundaries, summed per label, read by entries().
#include "core/profile.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bertbench::profile {
namespace {

// A device clock whose event k happened at at[k] seconds; it counts what it is asked.
class FakeTimeline final : public Timeline {
public:
    std::vector<double> at;
    size_t recorded = 0, clears = 0;
    size_t record() override { return recorded++; }
    double seconds(size_t from, size_t to) override {
        EXPECT_LT(from, to);
        return at.at(to) - at.at(from);
    }
    void clear() override {
        ++clears;
        recorded = 0;
    }
};

double seconds_of(const std::string& label) {
    for (const Entry& e : entries())
        if (e.label == label) return e.seconds;
    return -1;
}

TEST(Profile, ADeviceTimelineTimesEverySectionBetweenItsEvents) {
    FakeTimeline t;
    t.at = {0.0, 1.0, 3.0, 6.0, 10.0, 15.0};
    use_timeline(&t);  // event 0 at the reset
    enable(true);      // resets again: event 0 anew
    EXPECT_EQ(t.clears, 2u);
    push("a");          // event 1: [0, 1) had no label
    mark("b");          // event 2: a = 3 - 1
    push("c");          // event 3: b += 6 - 3
    pop();              // event 4: c = 10 - 6
    mark("a");          // event 5: b += 15 - 10
    EXPECT_EQ(t.recorded, 6u);
    EXPECT_DOUBLE_EQ(seconds_of("a"), 2.0);
    EXPECT_DOUBLE_EQ(seconds_of("b"), 8.0);
    EXPECT_DOUBLE_EQ(seconds_of("c"), 4.0);
    EXPECT_DOUBLE_EQ(seconds_of("a"), 2.0) << "read once: a second entries() adds nothing";
    enable(false);
    use_timeline(nullptr);
    // Back on the host's clock: nothing is recorded on the timeline any more
    enable(true);
    push("host");
    pop();
    enable(false);
    EXPECT_EQ(t.recorded, 6u);
    EXPECT_GE(seconds_of("host"), 0.0);
}

}  // namespace
}  // namespace bertbench::profile
