// The HTTP server: cpp-httplib routes for the OpenAI API and the service endpoints, with the request-id,
// CORS, API-key and phase (loading/draining) checks run before any body is read, one error wrapper per route
// mapping openai::ApiError through the error table, and JSON bodies for the library's own 404/413 answers.
// Tested by tests/e2e/ (the real binary).
#pragma once

#include <memory>
#include <string>

#include "http/server_context.h"
#include "voltserve/status.h"

namespace httplib {
class Server;
}

namespace voltserve::http {

class HttpServer {
 public:
  explicit HttpServer(ServerContext& ctx);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds ctx.options.host:port (port 0 picks a free one); returns the bound port.
  Result<int> bind();
  // Serves until stop() (blocking); in-flight handlers finish before it returns.
  void serve();
  void stop();

 private:
  void install_routes();
  ServerContext& ctx_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace voltserve::http
