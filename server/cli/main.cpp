// Entry point of the `voltserve` binary: dispatches to the sub-commands (serve, generate, logits, tokenize,
// detokenize, render, bench, plan, quantize). `voltserve <command> --help` documents each.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"voltserve: an OpenAI-compatible inference server for the Qwen3.5/3.6/3.8 hybrid models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "voltserve 0.1.0");
  voltserve::cli::register_serve_command(app);
  voltserve::cli::register_generate_command(app);
  voltserve::cli::register_logits_command(app);
  voltserve::cli::register_tokenize_command(app);
  voltserve::cli::register_render_command(app);
  voltserve::cli::register_bench_command(app);
  voltserve::cli::register_plan_command(app);
  voltserve::cli::register_quantize_command(app);
  voltserve::cli::register_synth_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
