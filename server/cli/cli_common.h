// Helpers shared by the CLI sub-commands: failing with a clear message and an exit code, parsing --ids, loading a
// model for one sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/qwen35_runner.h"

namespace voltserve::cli {

// Prints "voltserve <command>: <message>" to stderr and ends the command with exit_code.
[[noreturn]] void fail(std::string_view command, const std::string& message, int exit_code);

// "1,2,3" (commas and/or whitespace, optional [ ]) -> ids; every entry must be a non-negative integer and
// at least one must be given (otherwise fail() with exit code 2).
std::vector<int32_t> parse_token_ids(std::string_view command, const std::string& text);

// Loads the model in `model_dir` with `opt` set for one sequence (one slot, max_context positions) and checks that
// every prompt id is inside its vocabulary: fail() with exit code 1 if loading fails, 2 for an id out of range.
std::unique_ptr<Qwen35Runner> load_single_sequence_runner(std::string_view command, const std::string& model_dir,
                                                          RunnerOptions opt, int32_t max_context,
                                                          const std::vector<int32_t>& prompt_ids);

}  // namespace voltserve::cli
