// Linked into every test executable: before main(), points BB_SHARED_DIR, BB_SOURCE_DIR,
// BB_BINARY_DIR and BB_BERTBENCH at this build (see tests/CMakeLists.txt), unless already set.
#include <cstdlib>

namespace {
struct TestEnvironment {
    TestEnvironment() {
        setenv("BB_SHARED_DIR", BB_SHARED_DIR_DEFAULT, 0);
        setenv("BB_SOURCE_DIR", BB_SOURCE_DIR_DEFAULT, 0);
        setenv("BB_BINARY_DIR", BB_BINARY_DIR_DEFAULT, 0);
        setenv("BB_BERTBENCH", BB_BERTBENCH_DEFAULT, 0);
    }
};
const TestEnvironment g_environment;
}  // namespace
