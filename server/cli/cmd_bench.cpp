// `voltserve bench linear [args]`: runs the linear-kernel benchmark (bench/linear/bench_linear.cu), which is a
// separate binary next to this one (built with CUDA); arguments are passed through.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace voltserve::cli {

namespace {

std::filesystem::path self_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (bench linear: quantized linear kernels vs the read ceiling)");
  auto* linear = cmd->add_subcommand("linear", "Weight-streaming linear kernels: us, GB/s, % of the read ceiling");
  linear->allow_extras();
  linear->callback([linear] {
    const auto bin = self_dir() / "bench_linear";
    if (!std::filesystem::exists(bin)) {
      std::cerr << "voltserve bench linear: " << bin.string()
                << " not found (it is built only with CUDA: configure with -DVOLTSERVE_CUDA=ON)\n";
      throw CLI::RuntimeError(2);
    }
    std::vector<std::string> args = {bin.string()};
    for (const auto& a : linear->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::cerr << "voltserve bench linear: cannot run " << bin.string() << "\n";
    throw CLI::RuntimeError(2);
  });
  cmd->require_subcommand(1);
}

}  // namespace voltserve::cli
