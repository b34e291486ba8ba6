// A `voltserve`-like binary with only the `render` command (server/cli/cmd_render.cpp compiled in): the
// differential tests drive it without building the whole engine.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"voltserve render (test driver)"};
  app.require_subcommand(1);
  voltserve::cli::register_render_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
