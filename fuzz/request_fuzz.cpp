// libFuzzer target for the HTTP request parser and validators: arbitrary bytes as a /v1/chat/completions,
// /v1/completions, /v1/responses or /v1/messages body (the first byte picks which). Any outcome but a parsed request or an openai::ApiError with a
// 4xx status (and a body that serialises) is a bug; crashes, sanitizer reports and other exceptions fail the run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "openai/api_error.h"
#include "openai/chat_request.h"
#include "openai/completion_request.h"
#include "openai/json_body.h"
#include "openai/messages_request.h"
#include "openai/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace voltserve::openai;
  if (size == 0) return 0;
  const int route = data[0] & 3;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestLimits limits;
  limits.model_names = {"tiny-chat"};
  limits.vocab_size = 3033;
  limits.context_length = 4096;
  try {
    Json j = parse_json_object_body(body);
    if (route == 0) {
      ChatRequest r = parse_chat_request(j, limits);
      (void)dump_json(r.template_body);  // what the template sees must serialise
      check_context(r.options, 100, limits.context_length, "messages");
    } else if (route == 2) {
      Json previous = Json::array({Json{{"role", "user"}, {"content", "earlier"}}});
      ResponsesRequest r = parse_responses_request(j, limits, &previous);
      (void)dump_json(r.chat.template_body);
      (void)dump_json(r.echo);
    } else if (route == 3) {
      MessagesRequest r = parse_messages_request(j, limits, (data[0] & 4) != 0);
      (void)dump_json(r.chat.template_body);
    } else {
      CompletionRequest r = parse_completion_request(j, limits);
      for (const CompletionPrompt& p : r.prompts) {
        if (p.ids.empty() && !p.text) std::abort();
      }
    }
  } catch (const ApiError& e) {
    if (e.http_status() < 400 || e.http_status() >= 500) std::abort();
    (void)dump_json(error_body(e));
    (void)dump_json(anthropic_error_body(e));
  }
  return 0;
}
