// One access-log line per request (id, endpoint, status, prompt/completion tokens, TTFT, tokens/s, finish
// reason) and the matching metrics updates; written exactly once, when the response is complete.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/server_context.h"

namespace voltserve::http {

class AccessRecord {
 public:
  AccessRecord(ServerContext& ctx, std::string id, std::string endpoint);
  ~AccessRecord() { write(); }  // a record nobody wrote (e.g. an abandoned stream) is still logged

  const std::string& id() const { return id_; }
  std::chrono::steady_clock::time_point start() const { return start_; }

  void set_status(int status) { status_ = status; }
  void set_tokens(int64_t n_prompt, int64_t n_completion) {
    n_prompt_ = n_prompt;
    n_completion_ = n_completion;
  }
  void set_first_token(std::chrono::steady_clock::time_point t) { if (ttft_s_ < 0) ttft_s_ = seconds_since_start(t); }
  void set_finish_reason(std::string reason) { finish_reason_ = std::move(reason); }
  // Speculative decoding: drafts proposed and accepted, per draft position (the line shows them when drafted > 0).
  void set_speculation(int64_t drafted, int64_t accepted, std::vector<int64_t> drafted_per_position,
                       std::vector<int64_t> accepted_per_position) {
    n_drafted_ = drafted;
    n_accepted_ = accepted;
    drafted_pos_ = std::move(drafted_per_position);
    accepted_pos_ = std::move(accepted_per_position);
  }
  // Streaming responses are written by their stream; the route wrapper skips deferred records.
  void defer() { deferred_ = true; }
  bool deferred() const { return deferred_; }

  // Logs the line and updates metrics; later calls do nothing.
  void write();

 private:
  double seconds_since_start(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double>(t - start_).count();
  }
  ServerContext& ctx_;
  std::string id_;
  std::string endpoint_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int status_ = 200;
  int64_t n_prompt_ = 0;
  int64_t n_completion_ = 0;
  double ttft_s_ = -1;
  std::string finish_reason_ = "-";
  int64_t n_drafted_ = 0;
  int64_t n_accepted_ = 0;
  std::vector<int64_t> drafted_pos_;
  std::vector<int64_t> accepted_pos_;
  bool deferred_ = false;
  std::once_flag written_;
};

// Counts a request inside a generation route while it lives (drain waits for the count to reach 0).
class ActiveRequest {
 public:
  explicit ActiveRequest(ServerContext& ctx) : ctx_(ctx) { ++ctx_.n_active; }
  ~ActiveRequest() { --ctx_.n_active; }
  ActiveRequest(const ActiveRequest&) = delete;
  ActiveRequest& operator=(const ActiveRequest&) = delete;

 private:
  ServerContext& ctx_;
};

}  // namespace voltserve::http
