// bertbench: one binary, one subcommand per stage of the MLPerf BERT workload.
// Errors reach here as bertbench::Error and are printed as one line; the exit code is then 1.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(int, char**);
};

const Command kCommands[] = {
    {"version", "print build and system information", bertbench::cli::cmd_version},
};

void usage(std::FILE* out) {
    std::fprintf(out, "usage: bertbench <command> [flags]   (bertbench <command> --help for its flags)\n\n"
                      "commands:\n");
    for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const auto& c : kCommands) {
        if (std::strcmp(argv[1], c.name) != 0) continue;
        try {
            return c.run(argc - 1, argv + 1);
        } catch (const bertbench::Error& e) {
            std::fprintf(stderr, "bertbench %s: error: %s\n", c.name, e.what());
        } catch (const std::bad_alloc&) {
            std::fprintf(stderr, "bertbench %s: error: out of memory\n", c.name);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bertbench %s: error: %s\n", c.name, e.what());
        }
        return 1;
    }
    std::fprintf(stderr, "bertbench: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
