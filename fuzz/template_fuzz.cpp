// libFuzzer target: the chat-template lexer, parser and renderer on arbitrary templates and inputs. The input is a
// template, then (after the first NUL) a request body rendered through render_chat_prompt, or a fixed conversation
// when that part is not a usable JSON object. Every failure must be a TemplateError or ChatRequestError: any other
// exception, a crash, a sanitizer report, a stack overflow or a hang is a finding (limits are tightened so runaway
// loops and huge outputs end quickly).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_prompt.h"
#include "chat/template/chat_template.h"

namespace {

const nlohmann::ordered_json& default_request() {
  static const auto request = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "assistant", "content": "<think>\nr\n</think>\n\nok", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{\"a\": [1, 2.5, true, null, {\"b\": \"c\"}]}"}}]},
      {"role": "tool", "content": "out"},
      {"role": "user", "content": "again"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "chat_template_kwargs": {"enable_thinking": false, "preserve_thinking": true}})");
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t split = all.find('\0');
  const std::string_view source = all.substr(0, split);
  const std::string_view body = split == std::string_view::npos ? std::string_view() : all.substr(split + 1);

  voltserve::chat::RenderLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 32;

  nlohmann::ordered_json request = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object()) request = default_request();
  try {
    const auto tmpl = voltserve::chat::ChatTemplate::parse(source);
    const auto context = voltserve::chat::build_template_context(request, "<s>", "</s>", true);
    (void)tmpl.render(context, limits);
  } catch (const voltserve::chat::TemplateError&) {
  } catch (const voltserve::chat::ChatRequestError&) {
  }
  return 0;
}
