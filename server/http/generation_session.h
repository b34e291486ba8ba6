// The life cycle shared by every generation route (chat, completions, responses, messages): wait for engine events
// (keep-alives while waiting, a timeout at --request-timeout), turn them into SSE text or one JSON body through the
// route's hooks, end with an error event or the usage chunk and [DONE], and write the access-log record once. A
// client that hangs up — seen by the connection front end, streaming or not, running or queued — wakes the wait and
// cancels every choice; the session records how many engine steps the release took. Tested by
// tests/e2e/test_disconnects.py and the other e2e suites.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "http/access_log.h"
#include "http/client_connection.h"
#include "http/generation.h"
#include "http/server_context.h"
#include "http/stream_support.h"
#include "openai/api_error.h"
#include "openai/json_body.h"
#include "openai/responses.h"

namespace voltserve::http {

// Thrown out of run_to_completion() when the client hung up; the request is cancelled and logged (status 499).
struct ClientGone : std::exception {
  const char* what() const noexcept override { return "the client closed the connection"; }
};

class GenerationSession : public StreamSession {
 public:
  ~GenerationSession() override;

  std::string step(bool& done) final;
  void disconnected() final;
  bool client_gone() const final { return client_gone_; }
  // Waits for every choice and returns the JSON body of a non-streaming answer (throws the request's ApiError).
  virtual openai::Json run_to_completion() = 0;

 protected:
  using Clock = std::chrono::steady_clock;

  // `id_prefix`: "chatcmpl-" or "cmpl-"; `include_usage`: stream_options.include_usage.
  GenerationSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, std::unique_ptr<Generation> generation,
                    const std::string& id_prefix, const std::string& model, bool include_usage);

  // Route hooks. `sse` is null when answering with one JSON body.
  virtual void handle(ChoiceEvent& ev, std::string* sse) = 0;
  virtual bool all_finished() const = 0;
  virtual openai::Usage usage() const = 0;
  virtual std::string usage_chunk() const = 0;       // the SSE data line of the final usage chunk
  virtual std::string finish_reasons() const = 0;    // for the access log
  virtual std::string opening() { return ""; }       // SSE text sent once before any event (chat: role chunks)
  // The end of a stream: after a failure (default: an OpenAI error chunk and [DONE]) or after every choice
  // finished (default: the usage chunk when asked for, and [DONE]). The Responses and Anthropic routes end theirs
  // with their own events.
  virtual std::string stream_error(const openai::ApiError& error);
  virtual std::string stream_end();

  // Waits until every choice finished; throws the ApiError if the request failed (non-streaming answers).
  void run_until_finished();
  // Writes the access-log record (once; later calls do nothing).
  void finalize_record(int status);
  // Records the arrival of `n` tokens: first-token time and inter-token latency metrics.
  void observe_tokens(size_t n);
  // True (and the request is failed with the engine's error) when a final event is neither stop nor length.
  bool failed_in_engine(const Event& e);
  // `u` with the speculative-decoding counts of the choices' final events so far.
  openai::Usage with_speculation(openai::Usage u) const;
  // The prompt tokens the prefix cache served for choices [first, first + count) of one prompt: the prompt-level
  // figure OpenAI reports, i.e. the least any of them found (siblings then reuse each other's prompt, which the
  // client does not count as cached), from each choice's first final event (a reasoning-budget continuation's is
  // not the request's), at most n_prompt.
  int64_t cached_tokens(int first, int count, int64_t n_prompt) const;

  ServerContext& ctx_;
  std::shared_ptr<AccessRecord> record_;
  std::unique_ptr<Generation> generation_;
  openai::ResponseMeta meta_;
  std::optional<openai::ApiError> error_;

 private:
  void wait_for_event(std::string* sse, bool& idle);
  // Cancels what is unfinished and waits (briefly) for the engine to release it, observing the steps it took.
  void release_after_disconnect();

  std::shared_ptr<ClientConnection> connection_;  // the client's connection, watched for a hang-up
  ClientConnection::WatchId watch_ = 0;
  bool client_gone_ = false;
  ActiveRequest active_;
  Clock::time_point deadline_;
  bool include_usage_;
  bool opened_ = false;
  bool record_written_ = false;
  Clock::time_point last_token_{};
  openai::Usage speculation_;  // drafted / accepted of the finished choices
  std::vector<int64_t> cached_;  // per choice: Event::n_tokens_cached of its first final event, -1 before it
};

// Answers with `session`: as an SSE stream (the access record is written when the stream ends) or as one JSON body.
void respond(httplib::Response& res, AccessRecord& record, std::shared_ptr<GenerationSession> session, bool stream);

}  // namespace voltserve::http
