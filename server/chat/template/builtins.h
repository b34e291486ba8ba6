// The built-in vocabulary of the template language as transformers configures it: filters (jinja2's plus its own
// tojson), tests, attribute/item access with Python methods of str/dict/list, and the globals (range, namespace,
// dict, raise_exception, strftime_now, cycler, joiner).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/template/value.h"

namespace voltserve::chat {

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args);

// obj.name and obj[key] with jinja2's sandboxed fallbacks (attribute first for `.`, item first for `[]`).
Value get_attr(Renderer& r, const Value& obj, const std::string& name);
Value get_item(Renderer& r, const Value& obj, const Value& key);
// Python getattr only (no item fallback), as the `attr` filter does.
Value get_python_attr(const Value& obj, const std::string& name);
// obj[start:stop:step] for lists, tuples and strings.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

std::vector<std::pair<std::string, Value>> make_globals();

// The items a for loop (or |list) walks: list items, dict keys, string characters; Undefined is empty.
ValueList iterate(const Value& v);

// Binds call arguments to parameter names the way Python does for builtins with keyword support.
class ArgBinder {
 public:
  ArgBinder(const CallArgs& args, std::string what, std::vector<const char*> names);
  // The argument for parameter i (positional index i or keyword names[i]); nullptr when not given.
  const Value* get(size_t i) const { return bound_[i]; }
  Value get_or(size_t i, Value fallback) const { return bound_[i] ? *bound_[i] : std::move(fallback); }

 private:
  std::vector<const Value*> bound_;
};

}  // namespace voltserve::chat
