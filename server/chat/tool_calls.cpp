// See tool_calls.h. Behaviour follows vLLM's qwen3_coder and hermes parsers as described in OPENAI.md §5.2-5.3
// (values typed by schema, parameters emitted when complete), written independently.
#include "chat/tool_calls.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <random>

namespace voltserve::chat {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";
constexpr size_t kMaxTagName = 256;

size_t partial_tag_overlap(std::string_view text, std::string_view tag) {
  size_t max_k = std::min(tag.size() - 1, text.size());
  for (size_t k = max_k; k > 0; --k) {
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

// `s` is a proper prefix of `tag` (the tag may still complete).
bool prefix_of(std::string_view s, std::string_view tag) { return s.size() < tag.size() && tag.substr(0, s.size()) == s; }

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

std::string call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id.push_back(kHex[rng() & 15]);
  return id;
}

std::string dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::vector<std::string> schema_types(const Json* schema) {
  std::vector<std::string> types;
  if (!schema || !schema->is_object()) return types;
  auto t = schema->find("type");
  if (t != schema->end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const Json& x : *t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto it = schema->find(key);
    if (it != schema->end() && it->is_array()) {
      for (const Json& sub : *it) {
        for (std::string& s : schema_types(&sub)) types.push_back(std::move(s));
      }
    }
  }
  if (types.empty() && schema->contains("enum")) types.push_back("string");
  return types;
}

std::optional<Json> parse_integer(const std::string& s) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc() && ptr == s.data() + s.size() && !s.empty()) return Json(v);
  return std::nullopt;
}

std::optional<Json> parse_number(const std::string& s) {
  if (s.empty() || is_space(s.front())) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  if (std::trunc(v) == v && std::fabs(v) < 9.0e15) return Json(static_cast<int64_t>(v));
  return Json(v);
}

std::optional<Json> parse_structured(const std::string& s, bool want_object) {
  Json v = Json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (!v.is_discarded() && (want_object ? v.is_object() : v.is_array())) return v;
  // Models trained on Python-rendered templates may write {'a': True, 'b': None}.
  std::string fixed;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\'') {
      fixed.push_back('"');
      in_string = !in_string;
      continue;
    }
    if (!in_string) {
      std::string_view rest = std::string_view(s).substr(i);
      if (starts_with(rest, "True")) { fixed += "true"; i += 3; continue; }
      if (starts_with(rest, "False")) { fixed += "false"; i += 4; continue; }
      if (starts_with(rest, "None")) { fixed += "null"; i += 3; continue; }
    }
    fixed.push_back(c);
  }
  v = Json::parse(fixed, nullptr, false);
  if (!v.is_discarded() && (want_object ? v.is_object() : v.is_array())) return v;
  return std::nullopt;
}

}  // namespace

Json convert_parameter_value(const std::string& raw, const Json* schema) {
  std::vector<std::string> types = schema_types(schema);
  bool nullable = std::find(types.begin(), types.end(), "null") != types.end();
  if (nullable && (raw == "null" || raw == "None")) return nullptr;
  for (const std::string& t : types) {
    if (t == "null") continue;
    if (t == "string" || t == "str" || t == "text" || t == "enum") return raw;
    if (t == "integer" || t == "int") {
      if (auto v = parse_integer(raw)) return *v;
      if (auto v = parse_number(raw); v && v->is_number_integer()) return *v;
    } else if (t == "number" || t == "float") {
      if (auto v = parse_number(raw)) return *v;
    } else if (t == "boolean" || t == "bool") {
      if (raw == "true" || raw == "True") return true;
      if (raw == "false" || raw == "False") return false;
    } else if (t == "object" || t == "dict") {
      if (auto v = parse_structured(raw, true)) return *v;
    } else if (t == "array" || t == "list") {
      if (auto v = parse_structured(raw, false)) return *v;
    }
  }
  return raw;
}

ToolCallParser::ToolCallParser(std::vector<ToolSchema> tools) : tools_(std::move(tools)) {}

ToolParseDelta ToolCallParser::push(std::string_view text) {
  pending_.append(text);
  ToolParseDelta out;
  run(out, false);
  return out;
}

ToolParseDelta ToolCallParser::finish() {
  ToolParseDelta out;
  run(out, true);
  if (call_open_) close_call(out);
  if (state_ != State::kText) state_ = State::kText;
  return out;
}

const Json* ToolCallParser::parameter_schema(const std::string& param) const {
  if (calls_.empty()) return nullptr;
  const std::string& fn = calls_.back().name;
  for (const ToolSchema& t : tools_) {
    if (t.name != fn || !t.parameters.is_object()) continue;
    auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return nullptr;
    auto p = props->find(param);
    return p == props->end() ? nullptr : &*p;
  }
  return nullptr;
}

void ToolCallParser::emit_content(ToolParseDelta& out, std::string_view text) {
  if (strip_space_) {
    size_t n = skip_space(text);
    text.remove_prefix(n);
    if (text.empty()) return;
    strip_space_ = false;
  }
  out.content.append(text);
}

void ToolCallParser::add_delta(ToolParseDelta& out, ToolCallDelta delta) {
  if (!out.calls.empty() && out.calls.back().index == delta.index) {
    out.calls.back().arguments += delta.arguments;
    return;
  }
  out.calls.push_back(std::move(delta));
}

void ToolCallParser::start_call(ToolParseDelta& out, const std::string& name) {
  calls_.push_back(ToolCall{call_id(), name, ""});
  call_open_ = true;
  args_started_ = false;
  raw_.clear();
  ToolCallDelta d;
  d.index = static_cast<int>(calls_.size()) - 1;
  d.id = calls_.back().id;
  d.name = name;
  add_delta(out, std::move(d));
}

void ToolCallParser::append_arguments(ToolParseDelta& out, const std::string& piece) {
  calls_.back().arguments += piece;
  ToolCallDelta d;
  d.index = static_cast<int>(calls_.size()) - 1;
  d.arguments = piece;
  add_delta(out, std::move(d));
}

void ToolCallParser::close_call(ToolParseDelta& out) {
  append_arguments(out, args_started_ ? "}" : "{}");
  call_open_ = false;
  args_started_ = false;
  strip_space_ = true;
}

void ToolCallParser::degrade(ToolParseDelta& out) {
  // Not a call after all: what was consumed goes back out as text.
  std::string text = raw_ + pending_;
  raw_.clear();
  pending_.clear();
  state_ = State::kText;
  emit_content(out, text);
}

void ToolCallParser::run(ToolParseDelta& out, bool at_end) {
  auto consume = [&](size_t n) {
    raw_.append(pending_, 0, n);
    pending_.erase(0, n);
  };
  while (true) {
    std::string_view p = pending_;
    switch (state_) {
      case State::kText: {
        size_t pos = p.find(kCallOpen);
        if (pos != std::string_view::npos) {
          emit_content(out, p.substr(0, pos));
          pending_.erase(0, pos);
          raw_.clear();
          consume(kCallOpen.size());
          state_ = State::kCallStart;
          continue;
        }
        size_t hold = at_end ? 0 : partial_tag_overlap(p, kCallOpen);
        emit_content(out, p.substr(0, p.size() - hold));
        pending_.erase(0, p.size() - hold);
        return;
      }
      case State::kCallStart: {
        size_t ws = skip_space(p);
        std::string_view rest = p.substr(ws);
        if (rest.empty()) {
          if (at_end) degrade(out);
          return;
        }
        if (rest.front() == '{') {
          consume(ws);
          state_ = State::kJsonBody;
          continue;
        }
        if (starts_with(rest, kFunctionOpen)) {
          size_t gt = rest.find('>');
          if (gt == std::string_view::npos) {
            if (rest.size() > kMaxTagName || at_end) {
              degrade(out);
              return;
            }
            return;
          }
          std::string name(rest.substr(kFunctionOpen.size(), gt - kFunctionOpen.size()));
          if (name.empty() || name.find('<') != std::string::npos || name.find('\n') != std::string::npos) {
            degrade(out);
            continue;
          }
          consume(ws + gt + 1);
          start_call(out, name);
          state_ = State::kXmlBody;
          continue;
        }
        if (!at_end && prefix_of(rest, kFunctionOpen)) return;
        degrade(out);
        continue;
      }
      case State::kXmlBody: {
        size_t ws = skip_space(p);
        std::string_view rest = p.substr(ws);
        if (rest.empty()) {
          if (at_end) {
            pending_.clear();
            close_call(out);
            state_ = State::kText;
          }
          return;
        }
        if (starts_with(rest, kParamOpen)) {
          size_t gt = rest.find('>');
          if (gt == std::string_view::npos) {
            if (!at_end && rest.size() <= kMaxTagName) return;
            pending_.clear();
            close_call(out);
            state_ = State::kText;
            return;
          }
          std::string name(rest.substr(kParamOpen.size(), gt - kParamOpen.size()));
          std::string_view value = rest.substr(gt + 1);
          size_t end = value.find(kParamClose);
          size_t skip = kParamClose.size();
          for (std::string_view alt : {kFunctionClose, kParamOpen, kCallClose}) {
            size_t a = value.find(alt);
            if (a < end) {
              end = a;
              skip = 0;
            }
          }
          if (end == std::string_view::npos) {
            if (!at_end) return;
            end = value.size();
            skip = 0;
          }
          std::string raw(value.substr(0, end));
          // One newline after the opening tag and one before the closing tag belong to the format.
          if (!raw.empty() && raw.front() == '\n') raw.erase(0, 1);
          if (!raw.empty() && raw.back() == '\n') raw.pop_back();
          Json typed = convert_parameter_value(raw, parameter_schema(name));
          std::string piece = (args_started_ ? ", " : "{") + dump(Json(name)) + ": " + dump(typed);
          args_started_ = true;
          append_arguments(out, piece);
          pending_.erase(0, ws + gt + 1 + end + skip);
          continue;
        }
        if (starts_with(rest, kFunctionClose)) {
          pending_.erase(0, ws + kFunctionClose.size());
          close_call(out);
          state_ = State::kAfterFunction;
          continue;
        }
        if (starts_with(rest, kCallClose)) {
          pending_.erase(0, ws + kCallClose.size());
          close_call(out);
          state_ = State::kText;
          continue;
        }
        if (!at_end && (prefix_of(rest, kParamOpen) || prefix_of(rest, kFunctionClose) || prefix_of(rest, kCallClose))) {
          return;
        }
        // Stray text inside a call: skip to the next tag.
        size_t next = rest.find('<', 1);
        pending_.erase(0, next == std::string_view::npos ? p.size() : ws + next);
        continue;
      }
      case State::kAfterFunction: {
        size_t ws = skip_space(p);
        std::string_view rest = p.substr(ws);
        if (rest.empty()) return;
        if (starts_with(rest, kCallClose)) {
          pending_.erase(0, ws + kCallClose.size());
          state_ = State::kText;
          continue;
        }
        if (starts_with(rest, kFunctionOpen)) {  // several functions inside one <tool_call>
          pending_.erase(0, ws);
          raw_.clear();
          state_ = State::kCallStart;
          continue;
        }
        if (!at_end && (prefix_of(rest, kCallClose) || prefix_of(rest, kFunctionOpen))) return;
        state_ = State::kText;
        continue;
      }
      case State::kJsonBody: {
        size_t close = p.find(kCallClose);
        if (close == std::string_view::npos && !at_end) return;
        std::string body(p.substr(0, close == std::string_view::npos ? p.size() : close));
        Json v = Json::parse(body, nullptr, /*allow_exceptions=*/false);
        const Json* name = v.is_object() && v.contains("name") ? &v["name"] : nullptr;
        if (!name || !name->is_string() || name->get<std::string>().empty()) {
          degrade(out);
          continue;
        }
        const Json* args = nullptr;
        if (v.contains("arguments")) args = &v["arguments"];
        else if (v.contains("parameters")) args = &v["parameters"];
        std::string arguments = "{}";
        if (args && args->is_object()) {
          arguments = dump(*args);
        } else if (args && args->is_string()) {
          Json inner = Json::parse(args->get<std::string>(), nullptr, false);
          arguments = !inner.is_discarded() && inner.is_object() ? dump(inner) : dump(Json{{"value", *args}});
        }
        pending_.erase(0, close == std::string_view::npos ? p.size() : close + kCallClose.size());
        start_call(out, name->get<std::string>());
        append_arguments(out, arguments);
        call_open_ = false;
        strip_space_ = true;
        state_ = State::kText;
        continue;
      }
    }
  }
}

ParsedToolOutput parse_tool_output(std::string_view text, std::vector<ToolSchema> tools) {
  ToolCallParser parser(std::move(tools));
  ParsedToolOutput out;
  ToolParseDelta a = parser.push(text);
  ToolParseDelta b = parser.finish();
  out.content = a.content + b.content;
  out.calls = parser.calls();
  return out;
}

}  // namespace voltserve::chat
