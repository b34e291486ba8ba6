// The HTTP server: the connection front end (accepts, reads whole requests, enforces the connection limits and
// timeouts) hands each complete request to a worker lane — a small one for /health, /metrics, /v1/models and
// preflights, which never waits behind generations, and one for everything else — where cpp-httplib routes it: the
// request-id, CORS, API-key and phase (loading/draining) checks run before the body is used, one error wrapper per
// route maps openai::ApiError through the error table, and the library's own 404/413 answers get JSON bodies.
// Tested by tests/e2e/ (the real binary) and tests/server/connection_test.cpp.
#pragma once

#include <memory>
#include <string>

#include "http/client_connection.h"
#include "http/request_framing.h"
#include "http/server_context.h"
#include "voltserve/status.h"

namespace voltserve::http {

class ConnectionFrontEnd;
class RequestProcessor;
class WorkerPool;

class HttpServer {
 public:
  explicit HttpServer(ServerContext& ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds ctx.options.host:port (port 0 picks a free one); returns the bound port.
  Result<int> bind();
  // Serves until stop() (blocking). Requests still with a worker then finish their writes; ones still waiting for
  // the engine see their client as gone (stop() comes after the drain).
  void serve();
  void stop();

 private:
  void install_routes();
  bool dispatch(std::shared_ptr<ClientConnection> conn, const Frame& frame);
  std::string reject_response(int status, const std::string& target, const std::string& message);

  ServerContext& ctx_;
  std::unique_ptr<RequestProcessor> server_;
  std::unique_ptr<ConnectionFrontEnd> front_end_;
  std::unique_ptr<WorkerPool> control_lane_;
  std::unique_ptr<WorkerPool> main_lane_;
};

}  // namespace voltserve::http
