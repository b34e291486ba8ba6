// named_logger: the spdlog logger of a name ("engine", "sched", "cuda", ...), created on first use with a stderr sink
// (stdout stays the commands' output), or the one the server registered under that name first.
#pragma once

#include <string>

namespace spdlog {
class logger;
}  // namespace spdlog

namespace voltserve {

spdlog::logger& named_logger(const std::string& name);

}  // namespace voltserve
