// The one pipeline behind every chat-shaped route (/v1/chat/completions, /v1/responses, /v1/messages): a validated
// openai::ChatRequest is rendered through the chat template (a required/named tool_choice primes the call),
// tokenized, checked against the context and submitted as one engine request per choice; each choice's tokens run
// through its ChatPipeline (stop strings, reasoning split, tool-call parsing) and a reasoning budget closes </think>
// when it is spent. Routes only turn the resulting deltas into their own wire format. Tested by
// tests/server/chat_pipeline_test.cpp and the e2e suites (tests/e2e/).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/chat_pipeline.h"
#include "http/generation_session.h"
#include "openai/chat_request.h"

namespace voltserve::http {

struct PreparedChat {
  std::string prompt;  // the rendered prompt, primed text included
  std::vector<int32_t> prompt_ids;
  ChatPipelineConfig pipeline;
  int32_t constraint_after_token = -1;  // structured output starts after this token (</think>); -1: at once
};

// Renders and tokenizes `request` (filling request.options.max_tokens from the context when unset). Throws ApiError:
// 400 for a conversation the template rejects, context_length_exceeded when `check_context` and it does not fit.
PreparedChat prepare_chat(ServerContext& ctx, openai::ChatRequest& request, bool check_context = true);

// Where the generation prompt starts in a rendered chat prompt (its last <|im_start|>; 0 when there is none): the
// engine snapshots the state there, because the next turn renders this turn differently from that point on (the
// Qwen3.5 templates drop the <think> block of earlier turns), so a chat's next turn resumes there.
int32_t generation_prompt_start(const ServerContext& ctx, const std::vector<int32_t>& prompt_ids);

// Submits one engine request per choice; throws the ApiError of a refused submission (queue full, ...).
std::unique_ptr<Generation> submit_chat(ServerContext& ctx, const std::string& request_id, const PreparedChat& prepared,
                                        const openai::ChatRequest& request);

// The text the server writes for the model when a reasoning budget is spent (as the model itself closes it).
inline constexpr const char* kReasoningClose = "\n</think>\n\n";

class ChatGenerationSession : public GenerationSession {
 public:
  ~ChatGenerationSession() override = default;

 protected:
  ChatGenerationSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record,
                        std::unique_ptr<Generation> generation, const std::string& id_prefix,
                        openai::ChatRequest request, PreparedChat prepared);

  // Route hooks; `sse` is null for a non-streaming answer. `logprobs` is the chat-format entries of the tokens
  // behind the delta (null unless the request asked for logprobs). `reason` is "stop", "length" or "tool_calls".
  virtual void on_delta(int choice, const ChatDelta& delta, openai::Json logprobs, std::string* sse) = 0;
  virtual void on_finish(int choice, const char* reason, std::string* sse) = 0;

  struct Choice {
    std::unique_ptr<ChatPipeline> pipeline;
    bool finished = false;
    const char* finish_reason = nullptr;
    bool reasoning_closed_by_budget = false;
    std::vector<int32_t> generated;  // every id fed to the pipeline, forced ones included
  };

  bool all_finished() const override;
  openai::Usage usage() const override;
  std::string finish_reasons() const override;
  void handle(ChoiceEvent& ev, std::string* sse) override;

  openai::ChatRequest request_;
  int64_t n_prompt_;
  std::vector<Choice> choices_;

 private:
  openai::Json logprob_entries(const Event& e, size_t first, size_t count) const;
  // Feeds ids[first, first + count) of `e` to choice `index`.
  void feed(int index, const Event& e, size_t first, size_t count, std::string* sse);
  // The budget is spent: write </think> for the model and continue from there with a new engine request.
  void close_reasoning(int index, std::string* sse);
  void finish_choice(int index, const char* reason, std::string* sse);

  std::vector<int32_t> prompt_ids_;
  std::vector<int32_t> close_ids_;
};

}  // namespace voltserve::http
