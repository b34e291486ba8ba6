// ResponsesWriter: output items and stream events in the documented order, sequence numbers 0, 1, 2, ..., the
// concatenated deltas equal to each item's final text, custom tool calls reduced to their free-form input.
#include <catch2/catch_test_macros.hpp>

#include "openai/responses_output.h"

using namespace voltserve::openai;

namespace {

std::vector<std::string> types(const Json& events) {
  std::vector<std::string> out;
  for (const Json& e : events) out.push_back(e["type"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("responses writer: reasoning, text and a function call in order", "[unit]") {
  ResponsesWriter w({});
  Json ev = Json::array();
  ev.push_back(w.event("response.created", {{"response", Json::object()}}));
  w.reasoning("let me ", ev);
  w.reasoning("think", ev);
  w.text("Hel", ev);
  w.text("lo", ev);
  w.tool_call(0, "call_a", "f", "", ev);
  w.tool_call(0, "", "", "{\"x\": ", ev);
  w.text("\n", ev);  // whitespace between calls is not a message
  w.tool_call(0, "", "", "1}", ev);
  w.tool_call(1, "call_b", "g", "{}", ev);
  w.finish(true, ev);
  CHECK(types(ev) == std::vector<std::string>{
      "response.created",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done"});
  for (size_t i = 0; i < ev.size(); ++i) CHECK(ev[i]["sequence_number"] == static_cast<int>(i));
  const Json& out = w.output();
  REQUIRE(out.size() == 4);
  CHECK(out[0]["type"] == "reasoning");
  CHECK(out[0]["content"][0]["text"] == "let me think");
  CHECK(out[1]["content"][0] == Json({{"type", "output_text"}, {"text", "Hello"}, {"annotations", Json::array()}}));
  CHECK(out[1]["status"] == "completed");
  CHECK(out[2]["call_id"] == "call_a");
  CHECK(out[2]["arguments"] == "{\"x\": 1}");
  CHECK(out[3]["name"] == "g");
  CHECK(w.has_tool_calls());
  // Every item event names the item it belongs to, at its output index.
  for (const Json& e : ev) {
    if (e.contains("item_id")) {
      int idx = e["output_index"].get<int>();
      CHECK(e["item_id"] == out[idx]["id"]);
    }
  }
  // The done items in the stream are the output.
  std::vector<Json> done;
  for (const Json& e : ev) {
    if (e["type"] == "response.output_item.done") done.push_back(e["item"]);
  }
  CHECK(Json(done) == out);
}

TEST_CASE("responses writer: a custom tool call carries its free-form input", "[unit]") {
  ResponsesWriter w({"patch"});
  Json ev = Json::array();
  w.tool_call(0, "call_p", "patch", "{\"input\": ", ev);
  w.tool_call(0, "", "", "\"*** Begin Patch\"}", ev);
  w.finish(true, ev);
  CHECK(types(ev) == std::vector<std::string>{"response.output_item.added", "response.custom_tool_call_input.delta",
                                              "response.custom_tool_call_input.done", "response.output_item.done"});
  CHECK(ev[1]["delta"] == "*** Begin Patch");
  CHECK(w.output()[0]["type"] == "custom_tool_call");
  CHECK(w.output()[0]["input"] == "*** Begin Patch");
}

TEST_CASE("responses writer: an unfinished item is incomplete", "[unit]") {
  ResponsesWriter w({});
  Json ev = Json::array();
  w.text("partial", ev);
  w.finish(false, ev);
  CHECK(w.output()[0]["status"] == "incomplete");
  Json r = response_object("resp_1", 5, "m", Json::object(), "incomplete", w.output(), responses_usage_json({3, 4, 1}),
                           nullptr);
  CHECK(r["incomplete_details"]["reason"] == "max_output_tokens");
  CHECK(r["usage"]["total_tokens"] == 7);
  CHECK(r["usage"]["output_tokens_details"]["reasoning_tokens"] == 1);
  CHECK(r["object"] == "response");
}

TEST_CASE("responses usage: input_tokens_details.cached_tokens", "[unit]") {
  CHECK(responses_usage_json({30, 4, 1})["input_tokens_details"]["cached_tokens"] == 0);
  const Json u = responses_usage_json({30, 4, 1, 22});
  CHECK(u["input_tokens_details"]["cached_tokens"] == 22);
  CHECK(u["input_tokens"] == 30);
  CHECK(u["total_tokens"] == 34);
}
