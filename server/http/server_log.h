// The server's named spdlog logger ("server"), created on first use; per-request lines carry `req=<id>`.
#pragma once

#include <spdlog/spdlog.h>

namespace voltserve::http {

spdlog::logger& server_log();

}  // namespace voltserve::http
