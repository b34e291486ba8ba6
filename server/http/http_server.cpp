// See http_server.h. Notes on cpp-httplib 0.11.4 (OPENAI.md §7.6): POST routes take a ContentReader so that a
// missing Content-Type (curl -d) does not hit the library's 8 KiB form limit; the pre-routing handler runs
// before the body is read; the error handler runs for every status >= 400, so it only fills empty bodies.
#include "http/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <functional>

#include <fmt/format.h>

#include "http/access_log.h"
#include "http/chat_handler.h"
#include "http/completion_handler.h"
#include "http/front_end.h"
#include "http/generation_session.h"
#include "http/messages_handler.h"
#include "http/misc_handlers.h"
#include "http/request_processor.h"
#include "http/responses_handler.h"
#include "http/server_log.h"
#include "http/worker_pool.h"
#include "openai/api_error.h"
#include "openai/ids.h"
#include "openai/json_body.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;

// Errors in the shape of the route's API: Anthropic's on /v1/messages*, OpenAI's everywhere else.
void send_error(httplib::Response& res, const ApiError& e, const std::string& path) {
  res.status = e.http_status();
  res.set_content(openai::dump_json(anthropic_route(path) ? openai::anthropic_error_body(e) : openai::error_body(e)),
                  "application/json");
  if (e.code() == ErrorCode::kQueueFull || e.code() == ErrorCode::kUnavailable) res.set_header("Retry-After", "1");
  if (e.code() == ErrorCode::kInvalidApiKey) res.set_header("WWW-Authenticate", "Bearer");
}

bool sane_request_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
}

// Constant-time comparison: the time taken does not depend on where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

bool authorized(const ServeOptions& options, const httplib::Request& req) {
  if (options.api_keys.empty()) return true;
  std::string key;
  std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7) {
    std::string scheme = auth.substr(0, 7);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
    if (scheme == "bearer ") key = auth.substr(7);
  }
  if (key.empty()) key = req.get_header_value("X-Api-Key");
  bool ok = false;
  for (const std::string& k : options.api_keys) ok = same_secret(key, k) || ok;
  return ok;
}

uint64_t declared_length(const httplib::Request& req) {
  std::string v = req.get_header_value("Content-Length");
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10) return 0;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

const char* endpoint_name(const std::string& path) {
  static const char* kKnown[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                                 "/tokenize", "/detokenize", "/apply-template", "/v1/responses",
                                 "/v1/responses/input_tokens", "/v1/messages", "/v1/messages/count_tokens"};
  for (const char* k : kKnown) {
    if (path == k) return k;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
  return "other";
}

// A connection serves this many requests, then its last answer says Connection: close (clients reconnect).
constexpr uint64_t kMaxRequestsPerConnection = 1000;
// The lane for probes and the model list: a few threads, so they answer while every main worker streams.
constexpr int kControlThreads = 4;
constexpr size_t kControlQueue = 1024;

bool is_control_request(const Frame& frame) {
  if (frame.method == "OPTIONS") return true;
  if (frame.method != "GET" && frame.method != "HEAD") return false;
  const std::string path = frame.target.substr(0, frame.target.find('?'));
  return path == "/health" || path == "/metrics" || path == "/v1/models" || path.rfind("/v1/models/", 0) == 0;
}

ErrorCode code_for_status(int status) {
  switch (status) {
    case 408: return ErrorCode::kRequestTimeout;
    case 413: return ErrorCode::kPayloadTooLarge;
    case 414: return ErrorCode::kUriTooLong;
    case 429: return ErrorCode::kTooManyConnections;
    case 431: return ErrorCode::kHeadersTooLarge;
    case 503: return ErrorCode::kServerBusy;
    default: return ErrorCode::kInvalidRequest;
  }
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

HttpServer::HttpServer(ServerContext& ctx) : ctx_(ctx) {
  const ServeOptions& o = ctx_.options;
  int threads = o.http_threads;
  if (threads <= 0) threads = 64 + 16;
  server_ = std::make_unique<RequestProcessor>(o.write_timeout_s);
  server_->set_payload_max_length(o.max_body_bytes);
  // Only what httplib writes into the Keep-Alive response header; the front end enforces both.
  server_->set_keep_alive_max_count(kMaxRequestsPerConnection);
  server_->set_keep_alive_timeout(static_cast<time_t>(o.keep_alive_timeout_s));
  FrontEndOptions f;
  f.header_timeout_s = o.header_timeout_s;
  f.body_timeout_s = o.body_timeout_s;
  f.keep_alive_timeout_s = o.keep_alive_timeout_s;
  f.max_connections = o.max_connections;
  f.max_connections_per_address = o.max_connections_per_address;
  f.framing.max_body_bytes = o.max_body_bytes;
  // Room for a full body on a good share of the connections, never less than 256 MiB.
  f.max_buffered_bytes = std::max<size_t>(size_t{256} << 20, 4 * o.max_body_bytes);
  front_end_ = std::make_unique<ConnectionFrontEnd>(
      f, ctx_.metrics.connections(),
      [this](int status, const std::string& target, const std::string& message) {
        return reject_response(status, target, message);
      });
  // Each generation (streaming or not) holds a main worker for its whole life; beyond the queue the front end
  // answers 503 at once instead of queueing without bound.
  main_lane_ = std::make_unique<WorkerPool>(threads, static_cast<size_t>(threads));
  control_lane_ = std::make_unique<WorkerPool>(kControlThreads, kControlQueue);
  install_routes();
}

HttpServer::~HttpServer() {
  // Workers hand connections back to the front end: stop them first.
  control_lane_->shutdown();
  main_lane_->shutdown();
}

Result<int> HttpServer::bind() {
  Result<int> port = front_end_->bind(ctx_.options.host, ctx_.options.port);
  if (port.is_ok() && front_end_->max_connections() < ctx_.options.max_connections) {
    ctx_.options.max_connections = front_end_->max_connections();
  }
  return port;
}

void HttpServer::serve() {
  server_->set_serving(true);
  front_end_->run([this](std::shared_ptr<ClientConnection> conn, const Frame& frame) {
    return dispatch(std::move(conn), frame);
  });
  control_lane_->shutdown();
  main_lane_->shutdown();
}

void HttpServer::stop() {
  server_->set_serving(false);
  front_end_->stop();
}

bool HttpServer::dispatch(std::shared_ptr<ClientConnection> conn, const Frame& frame) {
  WorkerPool& lane = is_control_request(frame) ? *control_lane_ : *main_lane_;
  const size_t n_bytes = frame.total_bytes;
  return lane.try_submit([this, conn, n_bytes] {
    bool keep_alive = false;
    try {
      const bool last = ctx_.phase.load() == ServerPhase::kDraining || conn->n_requests + 1 >= kMaxRequestsPerConnection;
      keep_alive = server_->serve(*conn, n_bytes, last);
    } catch (const std::exception& e) {
      server_log().error("HTTP worker: unexpected error answering {}:{}: {}", conn->peer_ip(), conn->peer_port(), e.what());
    }
    front_end_->finished(conn, keep_alive);
  });
}

std::string HttpServer::reject_response(int status, const std::string& target, const std::string& message) {
  const std::string path = target.substr(0, target.find('?'));
  const ApiError error(code_for_status(status), message);
  // The route's error vocabulary even though no route ran: an Anthropic client parses its own shape.
  const std::string body =
      openai::dump_json(anthropic_route(path) ? openai::anthropic_error_body(error) : openai::error_body(error));
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                                "Connection: close\r\nx-request-id: {}\r\n",
                                status, reason_phrase(status), body.size(), openai::random_id("req-", 16));
  if (status == 429 || status == 503) out += "Retry-After: 1\r\n";
  const auto& origins = ctx_.options.cors_origins;
  if (std::find(origins.begin(), origins.end(), "*") != origins.end()) out += "Access-Control-Allow-Origin: *\r\n";
  out += "\r\n";
  out += body;
  ctx_.metrics.count_request(endpoint_name(path), status);
  // Slow and abusive clients can cause many of these: counted in /metrics, logged at debug only.
  server_log().debug("{} {}: {}", status, target.empty() ? "-" : target, message);
  return out;
}

void HttpServer::install_routes() {
  ServerContext& ctx = ctx_;

  server_->set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    std::string id = req.get_header_value("x-request-id");
    if (!sane_request_id(id)) id = openai::random_id("req-", 16);
    res.set_header("x-request-id", id);
    if (!ctx.options.cors_origins.empty()) {
      std::string origin = req.get_header_value("Origin");
      const auto& allowed = ctx.options.cors_origins;
      if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) {
        res.set_header("Access-Control-Allow-Origin", "*");
      } else if (!origin.empty() && std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) {
        res.set_header("Access-Control-Allow-Origin", origin);
        res.set_header("Vary", "Origin");
      }
      res.set_header("Access-Control-Expose-Headers", "x-request-id");
    }
    if (req.method == "OPTIONS") {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     "Authorization, Content-Type, X-Api-Key, x-request-id, anthropic-version, anthropic-beta");
      res.set_header("Access-Control-Max-Age", "600");
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool open_path = req.path == "/health" || req.path == "/metrics";
    if (!open_path && !authorized(ctx.options, req)) {
      send_error(res, ApiError(ErrorCode::kInvalidApiKey, "missing or invalid API key (send 'Authorization: Bearer <key>' "
                                                          "or 'x-api-key: <key>')"),
                 req.path);
      ctx.metrics.count_request(endpoint_name(req.path), 401);
      return httplib::Server::HandlerResponse::Handled;
    }
    ServerPhase phase = ctx.phase.load();
    if (!open_path && phase == ServerPhase::kLoading) {
      send_error(res, ApiError(ErrorCode::kUnavailable, "the model is still loading"), req.path);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method == "POST" && phase == ServerPhase::kDraining) {
      send_error(res, ApiError(ErrorCode::kUnavailable, "the server is shutting down"), req.path);
      ctx.metrics.count_request(endpoint_name(req.path), 503);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  server_->set_error_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;
    if (res.status == 413) {
      send_error(res, ApiError(ErrorCode::kPayloadTooLarge,
                               fmt::format("request body larger than {} bytes", ctx.options.max_body_bytes)),
                 req.path);
    } else if (res.status == 404) {
      send_error(res, ApiError(ErrorCode::kNotFound, fmt::format("no route for {} {}", req.method, req.path)), req.path);
    } else if (res.status == 405) {
      send_error(res, ApiError(ErrorCode::kMethodNotAllowed, fmt::format("{} is not allowed on {}", req.method, req.path)),
                 req.path);
    } else if (res.status >= 500) {
      send_error(res, ApiError(ErrorCode::kInternal, "internal server error"), req.path);
    } else {
      send_error(res, ApiError(ErrorCode::kInvalidRequest, fmt::format("bad request (HTTP {})", res.status)), req.path);
    }
    ctx.metrics.count_request(endpoint_name(req.path), res.status);
  });

  // Every route runs inside this wrapper: ApiError -> the table, anything else -> 500 logged with the request id.
  using BodyHandler = std::function<void(const std::string&, const std::shared_ptr<AccessRecord>&, httplib::Response&)>;
  auto post = [this, &ctx](const char* path, BodyHandler handler, bool generation) {
    server_->Post(path, [&ctx, path, handler, generation](const httplib::Request& req, httplib::Response& res,
                                                          const httplib::ContentReader& reader) {
      auto record = std::make_shared<AccessRecord>(ctx, res.get_header_value("x-request-id"), path);
      try {
        std::string body;
        bool too_large = false;
        bool ok = reader([&](const char* data, size_t len) {
          if (body.size() + len > ctx.options.max_body_bytes) {
            too_large = true;
            return false;
          }
          body.append(data, len);
          return true;
        });
        if (too_large || (!ok && declared_length(req) > ctx.options.max_body_bytes)) {
          throw ApiError(ErrorCode::kPayloadTooLarge,
                         fmt::format("request body larger than {} bytes (--max-body-bytes)", ctx.options.max_body_bytes));
        }
        if (!ok) throw ApiError(ErrorCode::kInvalidJson, "could not read the request body");
        if (generation && (!ctx.engine || ctx.phase.load() != ServerPhase::kReady)) {
          throw ApiError(ErrorCode::kUnavailable, "the server is not ready");
        }
        handler(body, record, res);
      } catch (const ClientGone&) {
        res.status = 499;  // nobody reads it; a body keeps the error handler from adding another
        res.set_content("client closed the connection\n", "text/plain");
      } catch (const ApiError& e) {
        if (e.code() == ErrorCode::kQueueFull) ctx.metrics.count_shed("queue_full");
        send_error(res, e, path);
      } catch (const std::exception& e) {
        server_log().error("req={} {}: unexpected error: {}", record->id(), path, e.what());
        send_error(res, ApiError(ErrorCode::kInternal, "internal server error"), path);
      }
      if (!record->deferred()) {
        record->set_status(res.status <= 0 ? 200 : res.status);
        record->write();
      }
    });
  };
  post("/v1/chat/completions",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>& r, httplib::Response& res) {
         handle_chat_completions(ctx, b, r, res);
       },
       true);
  post("/v1/completions",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>& r, httplib::Response& res) {
         handle_completions(ctx, b, r, res);
       },
       true);
  post("/tokenize",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>&, httplib::Response& res) { handle_tokenize(ctx, b, res); },
       true);
  post("/detokenize",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>&, httplib::Response& res) { handle_detokenize(ctx, b, res); },
       true);
  post("/apply-template",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>&, httplib::Response& res) {
         handle_apply_template(ctx, b, res);
       },
       true);
  post("/v1/responses",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>& r, httplib::Response& res) {
         handle_responses_create(ctx, b, r, res);
       },
       true);
  post("/v1/responses/input_tokens",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>&, httplib::Response& res) {
         handle_responses_input_tokens(ctx, b, res);
       },
       true);
  post("/v1/messages",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>& r, httplib::Response& res) {
         handle_messages(ctx, b, r, res);
       },
       true);
  post("/v1/messages/count_tokens",
       [&ctx](const std::string& b, const std::shared_ptr<AccessRecord>&, httplib::Response& res) {
         handle_messages_count_tokens(ctx, b, res);
       },
       true);

  using GetHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
  auto get = [this, &ctx](const char* pattern, const char* endpoint, GetHandler handler, bool log,
                          bool is_delete = false) {
    auto wrapped = [&ctx, endpoint, handler, log](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(res, e, req.path);
      } catch (const std::exception& e) {
        server_log().error("{}: unexpected error: {}", endpoint, e.what());
        send_error(res, ApiError(ErrorCode::kInternal, "internal server error"), req.path);
      }
      int status = res.status <= 0 ? 200 : res.status;
      ctx.metrics.count_request(endpoint, status);
      if (log) server_log().info("req={} {} {} status={}", res.get_header_value("x-request-id"), req.method, req.path, status);
    };
    if (is_delete) {
      server_->Delete(pattern, wrapped);
    } else {
      server_->Get(pattern, wrapped);
    }
  };
  get("/v1/models", "/v1/models", [&ctx](const httplib::Request&, httplib::Response& res) { handle_models(ctx, res); }, true);
  get(R"(/v1/models/(.+))", "/v1/models/{id}",
      [&ctx](const httplib::Request& req, httplib::Response& res) { handle_model(ctx, req.matches[1].str(), res); }, true);
  get(R"(/v1/responses/([^/]+))", "/v1/responses/{id}",
      [&ctx](const httplib::Request& req, httplib::Response& res) { handle_responses_get(ctx, req.matches[1].str(), req, res); },
      true);
  get(R"(/v1/responses/([^/]+))", "/v1/responses/{id}",
      [&ctx](const httplib::Request& req, httplib::Response& res) { handle_responses_delete(ctx, req.matches[1].str(), res); },
      true, /*is_delete=*/true);
  // Probes are polled: counted in /metrics, logged at debug only.
  get("/health", "/health", [&ctx](const httplib::Request&, httplib::Response& res) { handle_health(ctx, res); }, false);
  get("/metrics", "/metrics", [&ctx](const httplib::Request&, httplib::Response& res) { handle_metrics(ctx, res); }, false);
}

}  // namespace voltserve::http
