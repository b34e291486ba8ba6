// named_logger (see named_logger.h): get-or-create, tolerant of another thread registering the name in between.
#include "common/named_logger.h"

#include <map>
#include <memory>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace voltserve {

spdlog::logger& named_logger(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<spdlog::logger>> held;  // keeps each alive for the references
  std::lock_guard lk(mu);
  if (auto it = held.find(name); it != held.end()) return *it->second;
  std::shared_ptr<spdlog::logger> log = spdlog::get(name);
  if (!log) {
    try {
      log = spdlog::stderr_color_mt(name);
    } catch (const spdlog::spdlog_ex&) {
      log = spdlog::get(name);
    }
  }
  held[name] = log;
  return *log;
}

}  // namespace voltserve
