// Value: the dynamic type templates compute with, modelled on the Python objects Jinja sees (None, bool, int, float,
// str, list/tuple, dict, jinja's Undefined and Namespace, callables). Lists and dicts are immutable and shared, as in
// transformers' ImmutableSandboxedEnvironment; namespaces are the only mutable objects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace voltserve::chat {

class Value;
class Renderer;
using ValueList = std::vector<Value>;

// Arguments of a call: positional then keyword, as written in the template.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(Renderer&, CallArgs&)>;

struct Callable {
  std::string name;  // for messages and str(): "macro 'render_content'", "method 'startswith' of str"
  NativeFunction fn;
};

class Dict;
struct Namespace;

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // undefined
  static Value undefined(std::string hint);
  static Value none();
  Value(bool b);                    // NOLINT(google-explicit-constructor)
  Value(int v) : Value(static_cast<int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  Value(int64_t v);                 // NOLINT(google-explicit-constructor)
  Value(double v);                  // NOLINT(google-explicit-constructor)
  Value(std::string s);             // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  static Value list(ValueList items, bool is_tuple = false);
  static Value dict(Dict d);
  static Value make_namespace(std::shared_ptr<Namespace> ns);
  static Value callable(std::string name, NativeFunction fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }  // list or tuple
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }  // kInt (and kBool via to_number)
  double as_float() const { return f_; }
  const std::string& as_string() const;
  const ValueList& as_list() const;
  const Dict& as_dict() const;
  Namespace& as_namespace() const;
  const Callable& as_callable() const;
  // Why this value is undefined ("'x' is undefined"); only for kUndefined.
  const std::string& undefined_hint() const;

  // Nesting depth of lists/dicts (1 for scalars); bounded so destroying or printing a value cannot exhaust the stack.
  int depth() const { return depth_; }

  // Python truthiness.
  bool truthy() const;
  // Python type name for messages: "str", "int", "dict", "undefined", ...
  const char* type_name() const;

 private:
  static Value from_json_at(const nlohmann::ordered_json& j, int depth);

  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  uint16_t depth_ = 1;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::shared_ptr<void> ptr_;  // string, list, dict, namespace, callable or undefined hint
};

// A Python dict: insertion-ordered, keys compared with Python equality (1 == 1.0 == True).
class Dict {
 public:
  void set(Value key, Value value);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> string_index_;  // string key -> position in items_
};

// jinja2's namespace() object (and, read-only, the `loop` variable): attributes that `set ns.x = ...` can change.
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  bool read_only = false;    // `loop`: assignment is an error
  std::string display_name;  // "Namespace" or "LoopContext"

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
};

// Lists and dicts nest at most this deep (JSON input, literals and values built at render time alike).
inline constexpr int kMaxValueDepth = 512;

// Python equality (==) and ordering (<); ordering throws TemplateError for types Python cannot order.
bool py_equal(const Value& a, const Value& b);
bool py_less(const Value& a, const Value& b);

}  // namespace voltserve::chat
