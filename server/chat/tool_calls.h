// Parses tool calls out of streamed model text, for both formats the Qwen family writes inside <tool_call>:
// Qwen3.5+ XML (<function=NAME><parameter=P>value</parameter></function>) and Qwen3 JSON ({"name", "arguments"}).
// XML argument values are typed by the tool's JSON schema; arguments stream per completed parameter; several
// calls per message are indexed 0, 1, ...; output that is not a well-formed call degrades to plain content.
// Tested by tests/server/tool_calls_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace voltserve::chat {

struct ToolSchema {
  std::string name;
  nlohmann::ordered_json parameters;  // JSON schema of the arguments (object) or null
};

struct ToolCall {
  std::string id;         // call_<24 hex>
  std::string name;
  std::string arguments;  // a JSON object, serialised
};

// One entry of a streamed `tool_calls` delta. `id`/`name` are set only on the first delta of a call.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolParseDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;  // at most one entry per index
};

class ToolCallParser {
 public:
  explicit ToolCallParser(std::vector<ToolSchema> tools);

  ToolParseDelta push(std::string_view text);
  ToolParseDelta finish();

  // Completed (and, after finish(), unterminated-but-recoverable) calls; concatenated streamed arguments of
  // call i equal calls()[i].arguments.
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kText, kCallStart, kXmlBody, kAfterFunction, kJsonBody };
  void run(ToolParseDelta& out, bool at_end);
  void emit_content(ToolParseDelta& out, std::string_view text);
  void add_delta(ToolParseDelta& out, ToolCallDelta delta);
  void start_call(ToolParseDelta& out, const std::string& name);
  void append_arguments(ToolParseDelta& out, const std::string& piece);
  void close_call(ToolParseDelta& out);
  void degrade(ToolParseDelta& out);
  const nlohmann::ordered_json* parameter_schema(const std::string& param) const;

  std::vector<ToolSchema> tools_;
  std::vector<ToolCall> calls_;
  State state_ = State::kText;
  std::string pending_;
  std::string raw_;            // text of the current <tool_call> consumed so far (for degrading)
  bool call_open_ = false;     // a call header was emitted and its arguments are not closed yet
  bool args_started_ = false;  // "{" was emitted for the open call
  bool strip_space_ = false;   // drop whitespace between/after calls
};

// Converts one XML parameter value by its JSON schema (string/integer/number/boolean/object/array/null, anyOf
// with null). Values that do not fit the declared type stay strings.
nlohmann::ordered_json convert_parameter_value(const std::string& raw, const nlohmann::ordered_json* schema);

// Non-streaming convenience: content before/between calls, and the calls.
struct ParsedToolOutput {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedToolOutput parse_tool_output(std::string_view text, std::vector<ToolSchema> tools);

}  // namespace voltserve::chat
