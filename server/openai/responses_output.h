// The output side of /v1/responses: the Response object, and a writer that turns the chat pipeline's deltas
// (reasoning, content, tool-call pieces) into output items and the typed stream events in their documented order
// (output_item.added, content_part.added, *.delta, *.done, content_part.done, output_item.done), each with its
// sequence_number. The same writer builds the output of a non-streaming answer, so both agree. Tested by
// tests/server/responses_output_test.cpp.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "openai/json_body.h"

namespace voltserve::openai {

struct ResponsesUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;
  int64_t cached_tokens = 0;  // of input_tokens, served by the prefix cache
};

Json responses_usage_json(const ResponsesUsage& usage);

class ResponsesWriter {
 public:
  explicit ResponsesWriter(std::set<std::string> custom_tools) : custom_tools_(std::move(custom_tools)) {}

  // Each appends the events it causes to `events` (a JSON array).
  void reasoning(const std::string& text, Json& events);
  void text(const std::string& text, Json& events);
  // A piece of tool call `index`: the first piece carries `call_id` and `name`, later ones argument text.
  void tool_call(int index, const std::string& call_id, const std::string& name, const std::string& arguments,
                 Json& events);
  // Closes the open item (`complete` false: generation stopped early, items are "incomplete").
  void finish(bool complete, Json& events);

  // An event of `type` with the next sequence number (lifecycle events: response.created, ...).
  Json event(const char* type, Json fields);
  const Json& output() const { return output_; }
  bool has_tool_calls() const { return n_calls_ > 0; }

 private:
  enum class Open { kNone, kReasoning, kMessage, kCall };
  void open(Open kind, Json& events);
  void close(Json& events);

  std::set<std::string> custom_tools_;
  Json output_ = Json::array();  // finished items
  Open open_ = Open::kNone;
  Json item_;                    // the open item
  std::string text_;             // its text / arguments so far
  int call_index_ = -1;          // the open call's parser index
  bool custom_ = false;          // the open call is a custom (free-form) tool call
  bool complete_ = true;
  int n_calls_ = 0;
  int64_t sequence_ = 0;
};

// The Response object. `echo` holds the request fields it repeats (ResponsesRequest::echo); `status` is
// in_progress, completed, incomplete or failed; `error` is null or {code, message}.
Json response_object(const std::string& id, int64_t created_at, const std::string& model, const Json& echo,
                     const std::string& status, const Json& output, const Json& usage, const Json& error);

}  // namespace voltserve::openai
