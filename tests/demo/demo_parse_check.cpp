// demo_parse_check: runs voltserve's own reply parsing (chat/reasoning_parser + chat/tool_calls, as the server does
// for a chat completion) over the demo training completions, so tests/demo/data_test.py can require that every
// completion the model is taught comes back as the reasoning, content and tool calls the data meant.
// Input: a JSON array of {"prompt", "completion", "tools"}; output: an array of {"reasoning", "content", "calls"}.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reasoning_parser.h"
#include "chat/tool_calls.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: demo_parse_check CASES.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "demo_parse_check: cannot read " << argv[1] << "\n";
    return 2;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  nlohmann::ordered_json cases;
  try {
    cases = nlohmann::ordered_json::parse(buf.str());
  } catch (const nlohmann::json::parse_error& e) {
    std::cerr << "demo_parse_check: " << argv[1] << " is not JSON: " << e.what() << "\n";
    return 2;
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    const std::string prompt = c.at("prompt").get<std::string>();
    std::string text = c.at("completion").get<std::string>();
    // The server never sees the stop token as text: generation ends on <|im_end|>.
    const std::string stop = "<|im_end|>";
    if (text.size() >= stop.size() && text.compare(text.size() - stop.size(), stop.size(), stop) == 0) {
      text.resize(text.size() - stop.size());
    }
    std::vector<voltserve::chat::ToolSchema> tools;
    if (c.contains("tools") && c["tools"].is_array()) {
      for (const auto& t : c["tools"]) {
        const auto& fn = t.contains("function") ? t["function"] : t;
        tools.push_back({fn.at("name").get<std::string>(), fn.value("parameters", nlohmann::ordered_json())});
      }
    }
    const bool has_tools = !tools.empty();
    voltserve::chat::ReasoningParser reasoning(voltserve::chat::prompt_opens_reasoning(prompt), has_tools);
    auto r = reasoning.push(text);
    const auto tail = reasoning.finish();
    r.reasoning += tail.reasoning;
    r.content += tail.content;
    nlohmann::ordered_json row;
    row["reasoning"] = r.reasoning;
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    if (has_tools) {
      voltserve::chat::ToolCallParser parser(tools);
      auto d = parser.push(r.content);
      const auto end = parser.finish();
      row["content"] = d.content + end.content;
      for (const auto& call : parser.calls()) {
        calls.push_back({{"name", call.name}, {"arguments", nlohmann::ordered_json::parse(call.arguments)}});
      }
    } else {
      row["content"] = r.content;
    }
    row["calls"] = calls;
    out.push_back(row);
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}
