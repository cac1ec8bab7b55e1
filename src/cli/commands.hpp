// The bertbench subcommands. Each takes (argc, argv) with argv[0] = the subcommand name, parses
// its own flags (core/flags.hpp), returns the process exit code and throws Error on bad input.
// Add a command: declare it here, define it in cli/cmd_<name>.cpp, list it in src/main.cpp.
#pragma once

namespace bertbench::cli {

int cmd_version(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_prepare(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_pretrain(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_pick_eval(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_squad(int argc, char** argv);
int cmd_squad_eval(int argc, char** argv);

}  // namespace bertbench::cli
