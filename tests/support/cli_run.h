// Test helper: runs `build/voltserve <args>` through the shell and returns its exit code, stdout and stderr (the
// CLI tests: tests/golden/cli_model_test.cpp, tests/plan/cli_plan_test.cpp). Needs VOLTSERVE_BINARY_DIR.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace voltserve::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// args go to the shell as they are (quote what needs it).
inline RunResult run_voltserve(const std::string& args) {
  static int counter = 0;
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const std::filesystem::path out = dir / ("vs_cli_out_" + tag), err = dir / ("vs_cli_err_" + tag);
  const std::string cmd = std::string(VOLTSERVE_BINARY_DIR) + "/voltserve " + args + " >" + out.string() + " 2>" +
                          err.string();
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace voltserve::testing
