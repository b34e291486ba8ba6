// The engine's named spdlog loggers ("engine", "sched"), created on first use. spdlog stays out of headers: the
// loggers are forward-declared here and used from .cpp files only.
#pragma once

namespace spdlog {
class logger;
}  // namespace spdlog

namespace voltserve {

// If the server has already registered a logger of that name (its own sinks and format), that one is used.
spdlog::logger& engine_log();
spdlog::logger& sched_log();

}  // namespace voltserve
