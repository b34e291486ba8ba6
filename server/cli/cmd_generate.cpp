// `voltserve generate`: placeholder until its issue lands.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"

namespace voltserve::cli {

void register_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "(not implemented yet)");
  cmd->callback([] {
    std::cerr << "voltserve generate: not implemented yet\n";
    throw CLI::RuntimeError(2);
  });
}

}  // namespace voltserve::cli
