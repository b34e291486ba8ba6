// Jinja tests (`x is defined`, `x is string`, ...) with jinja2 3.1 semantics; note that Undefined is iterable and a
// dict is a sequence there, which the Qwen templates' `content is iterable and content is not mapping` relies on.
#include <unordered_map>

#include "chat/template/builtins.h"
#include "chat/template/operators.h"
#include "chat/template/py_text.h"
#include "chat/template/renderer.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

using TestFn = bool (*)(Renderer&, const Value&, const Value*);

const Value& need(const Value* arg, const char* test) {
  if (!arg) throw TemplateError(std::string("test '") + test + "' needs an argument");
  return *arg;
}

bool t_defined(Renderer&, const Value& v, const Value*) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, const Value*) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, const Value*) { return v.is_none(); }
bool t_string(Renderer&, const Value& v, const Value*) { return v.is_string(); }
bool t_mapping(Renderer&, const Value& v, const Value*) { return v.is_dict(); }
bool t_iterable(Renderer&, const Value& v, const Value*) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
// jinja2 Undefined has __len__/__getitem__ and __call__, so it passes `sequence` and `callable`.
bool t_sequence(Renderer&, const Value& v, const Value*) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_number(Renderer&, const Value& v, const Value*) { return v.is_number(); }
bool t_integer(Renderer&, const Value& v, const Value*) { return v.is_int(); }
bool t_float(Renderer&, const Value& v, const Value*) { return v.is_float(); }
bool t_boolean(Renderer&, const Value& v, const Value*) { return v.is_bool(); }
bool t_true(Renderer&, const Value& v, const Value*) { return v.is_bool() && v.as_bool(); }
bool t_false(Renderer&, const Value& v, const Value*) { return v.is_bool() && !v.as_bool(); }
bool t_callable(Renderer&, const Value& v, const Value*) { return v.is_callable() || v.is_undefined(); }
bool t_escaped(Renderer&, const Value&, const Value*) { return false; }  // no Markup objects here

// odd/even/divisibleby are `value % n == k` in jinja2, so floats are accepted (1.5 is neither odd nor even).
bool modulo_is(Renderer& r, const Value& v, const Value& n, int64_t k) {
  return py_equal(binary_op(r, "%", v, n), Value(k));
}
bool t_odd(Renderer& r, const Value& v, const Value*) { return modulo_is(r, v, Value(int64_t{2}), 1); }
bool t_even(Renderer& r, const Value& v, const Value*) { return modulo_is(r, v, Value(int64_t{2}), 0); }
bool t_divisibleby(Renderer& r, const Value& v, const Value* arg) { return modulo_is(r, v, need(arg, "divisibleby"), 0); }
bool t_eq(Renderer&, const Value& v, const Value* arg) { return py_equal(v, need(arg, "eq")); }
bool t_ne(Renderer&, const Value& v, const Value* arg) { return !py_equal(v, need(arg, "ne")); }
bool t_lt(Renderer&, const Value& v, const Value* arg) { return py_less(v, need(arg, "lt")); }
bool t_gt(Renderer&, const Value& v, const Value* arg) { return py_less(need(arg, "gt"), v); }
bool t_le(Renderer&, const Value& v, const Value* arg) { return py_less(v, need(arg, "le")) || py_equal(v, *arg); }
bool t_ge(Renderer&, const Value& v, const Value* arg) { return py_less(need(arg, "ge"), v) || py_equal(v, *arg); }
bool t_in(Renderer&, const Value& v, const Value* arg) { return contains(need(arg, "in"), v); }
bool t_sameas(Renderer&, const Value& v, const Value* arg) {
  const Value& o = need(arg, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  // Identity of other objects is not observable here; equal small ints/strings are usually the same object in
  // CPython too, containers compared by content is the closest stand-in.
  return py_equal(v, o);
}
bool t_lower(Renderer&, const Value& v, const Value*) {
  const std::string s = v.is_string() ? v.as_string() : "";
  bool cased = false;
  for (char32_t cp : py::decode(s)) {
    if (py::is_upper(cp)) return false;
    cased = cased || py::is_lower(cp);
  }
  return cased;
}
bool t_upper(Renderer&, const Value& v, const Value*) {
  const std::string s = v.is_string() ? v.as_string() : "";
  bool cased = false;
  for (char32_t cp : py::decode(s)) {
    if (py::is_lower(cp)) return false;
    cased = cased || py::is_upper(cp);
  }
  return cased;
}
bool t_filter(Renderer&, const Value& v, const Value*) { return v.is_string() && has_filter(v.as_string()); }
bool t_test(Renderer&, const Value& v, const Value*) { return v.is_string() && has_test(v.as_string()); }

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},
      {"string", t_string},     {"mapping", t_mapping},     {"iterable", t_iterable},
      {"sequence", t_sequence}, {"number", t_number},       {"integer", t_integer},
      {"float", t_float},       {"boolean", t_boolean},     {"true", t_true},
      {"false", t_false},       {"callable", t_callable},   {"escaped", t_escaped},
      {"odd", t_odd},           {"even", t_even},           {"divisibleby", t_divisibleby},
      {"eq", t_eq},             {"equalto", t_eq},          {"==", t_eq},
      {"ne", t_ne},             {"!=", t_ne},               {"lt", t_lt},
      {"lessthan", t_lt},       {"<", t_lt},                {"gt", t_gt},
      {"greaterthan", t_gt},    {">", t_gt},                {"le", t_le},
      {"<=", t_le},             {"ge", t_ge},               {">=", t_ge},
      {"in", t_in},             {"sameas", t_sameas},       {"lower", t_lower},
      {"upper", t_upper},       {"filter", t_filter},       {"test", t_test},
  };
  return table;
}

}  // namespace

bool has_test(std::string_view name) { return test_table().count(name) > 0; }

bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  const auto& table = test_table();
  const auto it = table.find(name);
  if (it == table.end()) throw TemplateError("no test named '" + name + "'");
  if (args.positional.size() > 1 || !args.keyword.empty()) {
    throw TemplateError("test '" + name + "' takes at most one argument");
  }
  return it->second(r, input, args.positional.empty() ? nullptr : &args.positional[0]);
}

}  // namespace voltserve::chat
