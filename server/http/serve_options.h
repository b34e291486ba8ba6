// Settings of the HTTP server (from built-in defaults, then config/*.json, then CLI flags; see config/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace voltserve::http {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;        // empty: no auth
  std::vector<std::string> cors_origins;    // empty: no CORS headers; "*" allows any origin
  size_t max_body_bytes = 16u << 20;        // larger bodies get 413
  double request_timeout_s = 600;           // a request running longer is cancelled (0 = no limit)
  double keepalive_interval_s = 10;         // SSE ": keep-alive" comment while no token arrives
  std::string served_model_name;            // default: the model folder's name
  int http_threads = 0;                     // 0: max_running + max_waiting + 16
  bool mirror_reasoning = true;             // also send reasoning text as `reasoning`
  // Connections (server/http/front_end.h): slow, idle and abusive clients cost no worker thread.
  double header_timeout_s = 10;             // a complete request header within this (else 408, or a silent close)
  double body_timeout_s = 60;               // the whole body within this after the header (else 408)
  double keep_alive_timeout_s = 60;         // idle time between requests before the connection is closed
  double write_timeout_s = 30;              // a response write (an SSE chunk) blocked longer: the client is gone
  int max_connections = 4096;               // open connections in all (bounded by the open-file limit)
  int max_connections_per_address = 0;      // per client address (0 = no limit; a reverse proxy is one address)
  size_t response_store_entries = 1024;     // /v1/responses kept for GET and previous_response_id (0 = none)
  size_t response_store_bytes = size_t{256} << 20;
};

}  // namespace voltserve::http
