// Get-or-create of the named loggers; tolerant of another component registering the same name first.
#include "core/loggers.h"

#include <memory>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace voltserve {

namespace {

std::shared_ptr<spdlog::logger> get_or_create(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  try {
    return spdlog::stderr_color_mt(name);
  } catch (const spdlog::spdlog_ex&) {
    return spdlog::get(name);  // registered by another thread in between
  }
}

}  // namespace

spdlog::logger& engine_log() {
  static const std::shared_ptr<spdlog::logger> log = get_or_create("engine");
  return *log;
}

spdlog::logger& sched_log() {
  static const std::shared_ptr<spdlog::logger> log = get_or_create("sched");
  return *log;
}

}  // namespace voltserve
