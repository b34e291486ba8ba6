// render_chat_prompt / build_template_context / load_model_chat_template: the request clean-up a server does before
// the template (as transformers + vLLM do), and finding a model folder's template like transformers does.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "chat/chat_prompt.h"

namespace {

using Catch::Matchers::ContainsSubstring;
using json = nlohmann::ordered_json;
namespace chat = voltserve::chat;
namespace fs = std::filesystem;

std::string fixture_template(const std::string& name) {
  std::ifstream in(fs::path(VOLTSERVE_SOURCE_DIR) / "tests/fixtures/templates" / (name + ".jinja"), std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A fresh temporary folder, removed when the test ends.
struct TempDir {
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("chat_prompt_test_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream(path / name, std::ios::binary) << text;
  }
  fs::path path;
};

}  // namespace

TEST_CASE("the context carries what apply_chat_template passes", "[unit]") {
  const json request = json::parse(R"({
    "messages": [
      {"role": "developer", "content": "dev"},
      {"role": "user", "content": "hi", "name": null},
      {"role": "assistant", "content": null, "reasoning": "r", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": [true, 1.5]}"}},
        {"id": "2", "type": "function", "function": {"name": "g", "arguments": ""}},
        {"id": "3", "type": "function", "function": {"name": "h", "arguments": {"x": 1}}}]},
      {"role": "assistant", "content": "plain", "tool_calls": []}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}],
    "reasoning_effort": "low",
    "chat_template_kwargs": {"enable_thinking": true, "custom": [1]}})");
  const json ctx = chat::build_template_context(request, "", "<|im_end|>", true);
  const json& m = ctx["messages"];
  CHECK(m[0]["role"] == "system");
  CHECK(!m[1].contains("name"));  // null-valued keys are dropped
  CHECK(!m[2].contains("content"));
  CHECK(m[2]["tool_calls"][0]["function"]["arguments"].dump() == R"({"b":1,"a":[true,1.5]})");  // order kept
  CHECK(m[2]["tool_calls"][1]["function"]["arguments"] == json::object());
  CHECK(m[2]["tool_calls"][2]["function"]["arguments"]["x"] == 1);
  CHECK(m[2].begin().key() == "thinking");  // transformers: {"thinking": r, **message, "reasoning_content": r}
  CHECK(m[2]["reasoning_content"] == "r");
  CHECK(!m[3].contains("tool_calls"));
  CHECK(ctx["tools"][0]["function"]["parameters"].dump() == R"({"z":1,"a":2})");
  CHECK(ctx["documents"].is_null());
  CHECK(ctx["add_generation_prompt"] == true);
  CHECK(!ctx.contains("bos_token"));
  CHECK(ctx["eos_token"] == "<|im_end|>");
  CHECK(ctx["reasoning_effort"] == "low");
  CHECK(ctx["enable_thinking"] == true);
  CHECK(ctx["custom"] == json::array({1}));

  const json none = chat::build_template_context(json::parse(R"({"messages": [{"role": "user", "content": "q"}],
      "reasoning_effort": "none"})"), "", "", false);
  CHECK(none["enable_thinking"] == false);
  CHECK(!none.contains("reasoning_effort"));
  CHECK(none["tools"].is_null());
  CHECK(none["add_generation_prompt"] == false);
}

TEST_CASE("malformed request bodies are ChatRequestErrors naming the field", "[unit]") {
  auto error_of = [](const char* body) -> std::string {
    try {
      chat::build_template_context(json::parse(body), "", "", true);
    } catch (const chat::ChatRequestError& e) {
      return e.what();
    }
    FAIL("expected ChatRequestError for " << body);
    return "";
  };
  CHECK_THAT(error_of(R"({})"), ContainsSubstring("messages"));
  CHECK_THAT(error_of(R"({"messages": []})"), ContainsSubstring("must not be empty"));
  CHECK_THAT(error_of(R"({"messages": [{"content": "x"}]})"), ContainsSubstring("messages[0].role"));
  CHECK_THAT(error_of(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})"),
             ContainsSubstring("messages[0].tool_calls[0].function.arguments is not valid JSON"));
  CHECK_THAT(error_of(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}})"),
             ContainsSubstring("enable_thinking must be a boolean"));
  CHECK_THAT(error_of(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}})"),
             ContainsSubstring("not allowed"));
  CHECK_THAT(error_of(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})"), ContainsSubstring("tools"));
}

TEST_CASE("Qwen3.5 prompt for a tool call turn", "[unit]") {
  const auto tmpl = chat::ChatTemplate::parse(fixture_template("qwen3_5"));
  const json request = json::parse(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2, \"metric\": true}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": "sunny"}]})");
  CHECK(chat::render_chat_prompt(tmpl, request, "", "<|im_end|>") ==
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n"
        "<parameter=metric>\nTrue\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n");
  const auto no_user = json::parse(R"({"messages": [{"role": "system", "content": "s"}]})");
  try {
    chat::render_chat_prompt(tmpl, no_user, "", "<|im_end|>");
    FAIL("expected the template to raise");
  } catch (const chat::TemplateError& e) {
    CHECK(e.raised_by_template());
    CHECK(e.message() == "No user query found in messages.");
  }
}

TEST_CASE("a model folder's template is found like transformers finds it", "[unit]") {
  TempDir dir;
  CHECK_THROWS_WITH(chat::load_model_chat_template(dir.path / "missing"), ContainsSubstring("does not exist"));
  dir.write("tokenizer_config.json", R"({"bos_token": null, "eos_token": {"content": "<|im_end|>", "special": true}})");
  CHECK_THROWS_WITH(chat::load_model_chat_template(dir.path), ContainsSubstring("has no chat template"));

  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>",
      "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  auto m = chat::load_model_chat_template(dir.path, false);
  CHECK(m.source == "D");
  CHECK(m.bos_token == "<s>");
  CHECK(m.eos_token == "</s>");
  CHECK(chat::load_model_chat_template(dir.path, true).source == "T");

  dir.write("chat_template.jinja", "FILE");  // chat_template.jinja wins over tokenizer_config.json
  m = chat::load_model_chat_template(dir.path, true);
  CHECK(m.source == "FILE");
  CHECK_THAT(m.origin, ContainsSubstring("chat_template.jinja"));

  dir.write("tokenizer_config.json", "{not json");
  CHECK_THROWS_WITH(chat::load_model_chat_template(dir.path), ContainsSubstring("not valid JSON"));
}
