// See server_log.h. Get-or-create, tolerant of another component registering the name first.
#include "http/server_log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace voltserve::http {

spdlog::logger& server_log() {
  static const std::shared_ptr<spdlog::logger> log = [] {
    if (auto existing = spdlog::get("server")) return existing;
    try {
      return spdlog::stderr_color_mt("server");
    } catch (const spdlog::spdlog_ex&) {
      return spdlog::get("server");
    }
  }();
  return *log;
}

}  // namespace voltserve::http
