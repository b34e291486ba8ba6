// Helpers shared by the CLI sub-commands: failing with a clear message and an exit code, parsing --ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace voltserve::cli {

// Prints "voltserve <command>: <message>" to stderr and ends the command with exit_code.
[[noreturn]] void fail(std::string_view command, const std::string& message, int exit_code);

// "1,2,3" (commas and/or whitespace, optional [ ]) -> ids; every entry must be a non-negative integer and
// at least one must be given (otherwise fail() with exit code 2).
std::vector<int32_t> parse_token_ids(std::string_view command, const std::string& text);

}  // namespace voltserve::cli
