// `bertbench version`: build and system information as JSON.
#include <iostream>

#include "cli/commands.hpp"
#include "core/flags.hpp"
#include "core/sysinfo.hpp"

namespace bertbench::cli {

int cmd_version(int argc, char** argv) {
    Flags flags("version", "Print the build (commit, compiler, flags) and system as JSON.");
    if (!flags.parse(argc, argv)) return 0;
    nlohmann::json j = {{"build_info", sysinfo::build_info()},
                        {"system_info", sysinfo::system_info()}};
    std::cout << j.dump(2) << "\n";
    return 0;
}

}  // namespace bertbench::cli
