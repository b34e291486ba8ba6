// Value, Dict and Namespace; equality and ordering follow Python (bool is an int, 1 == 1.0, dicts compare unordered).
#include "chat/template/value.h"

#include <algorithm>
#include <cmath>

#include "chat/template/template_error.h"

namespace voltserve::chat {

Value Value::undefined(std::string hint) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b), i_(b ? 1 : 0), f_(b ? 1.0 : 0.0) {}
Value::Value(int64_t v) : kind_(Kind::kInt), i_(v), f_(static_cast<double>(v)) {}
Value::Value(double v) : kind_(Kind::kFloat), f_(v) {}
Value::Value(std::string s) : kind_(Kind::kString), ptr_(std::make_shared<std::string>(std::move(s))) {}

namespace {

uint16_t nested_depth(int child_depth) {
  if (child_depth + 1 > kMaxValueDepth) {
    throw TemplateError("value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
  }
  return static_cast<uint16_t>(child_depth + 1);
}

}  // namespace

Value Value::list(ValueList items, bool is_tuple) {
  Value v;
  int child = 0;
  for (const auto& e : items) child = std::max(child, e.depth());
  v.depth_ = nested_depth(child);
  v.kind_ = Kind::kList;
  v.tuple_ = is_tuple;
  v.ptr_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  int child = 0;
  for (const auto& [k, e] : d.items()) child = std::max(child, e.depth());
  v.depth_ = nested_depth(child);
  v.kind_ = Kind::kDict;
  v.ptr_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(std::shared_ptr<Namespace> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ptr_ = std::move(ns);
  return v;
}

Value Value::callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ptr_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

namespace {

// JSON bodies come from users: bound the nesting so converting (and later printing) cannot overflow the stack.
constexpr int kMaxJsonDepth = 256;

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

Value Value::from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) {
    throw TemplateError("input JSON is nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  }
  using J = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case J::null:
      return none();
    case J::boolean:
      return Value(j.get<bool>());
    case J::number_integer:
      return Value(j.get<int64_t>());
    case J::number_unsigned: {
      const auto u = j.get<uint64_t>();
      // Python keeps big integers exact; beyond int64 we fall back to float (documented limitation).
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case J::number_float:
      return Value(j.get<double>());
    case J::string:
      return Value(j.get<std::string>());
    case J::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return list(std::move(items));
    }
    case J::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.set(Value(k), from_json_at(e, depth + 1));
      return dict(std::move(d));
    }
    default:  // binary, discarded
      return none();
  }
}

const std::string& Value::as_string() const { return *static_cast<const std::string*>(ptr_.get()); }
const ValueList& Value::as_list() const { return *static_cast<const ValueList*>(ptr_.get()); }
const Dict& Value::as_dict() const { return *static_cast<const Dict*>(ptr_.get()); }
Namespace& Value::as_namespace() const { return *static_cast<Namespace*>(ptr_.get()); }
const Callable& Value::as_callable() const { return *static_cast<const Callable*>(ptr_.get()); }

const std::string& Value::undefined_hint() const {
  static const std::string kNoHint = "value is undefined";
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kNoHint;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return !as_dict().empty();
    default:
      return true;
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto it = string_index_.find(key.as_string());
    if (it != string_index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    string_index_.emplace(key.as_string(), items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : items_) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_) {
    if (!k.is_string() && py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Namespace::find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Namespace::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

namespace {

bool is_numeric(const Value& v) { return v.is_int() || v.is_float() || v.is_bool(); }

// Exact comparison of Python numbers: int vs int exactly, otherwise as doubles (both sides finite in practice).
int compare_numbers(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  const double x = a.as_float(), y = b.as_float();
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!py_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

bool py_less(const Value& a, const Value& b) {
  if (is_numeric(a) && is_numeric(b)) return compare_numbers(a, b) < 0;
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 byte order == code-point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

}  // namespace voltserve::chat
