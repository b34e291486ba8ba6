// Global functions transformers' environment provides: range (capped like jinja2's sandbox), dict, namespace,
// raise_exception (a TemplateError the caller can show) and strftime_now.
#include <ctime>

#include "chat/template/builtins.h"
#include "chat/template/limits.h"
#include "chat/template/py_format.h"
#include "chat/template/renderer.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

int64_t int_arg(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  throw TemplateError(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer (" + what + ")");
}

Value range_fn(Renderer& r, CallArgs& a) {
  if (!a.keyword.empty()) throw TemplateError("range() takes no keyword arguments");
  int64_t start = 0, stop = 0, step = 1;
  switch (a.positional.size()) {
    case 1: stop = int_arg(a.positional[0], "range"); break;
    case 2: start = int_arg(a.positional[0], "range"), stop = int_arg(a.positional[1], "range"); break;
    case 3:
      start = int_arg(a.positional[0], "range"), stop = int_arg(a.positional[1], "range");
      step = int_arg(a.positional[2], "range");
      break;
    default: throw TemplateError("range expected 1 to 3 arguments, got " + std::to_string(a.positional.size()));
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  const long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                  : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (n > kMaxRange) {
    throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                        std::to_string(kMaxRange) + ").");
  }
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
  r.count_steps(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

// dict(**kwargs) or dict(pairs) / dict(mapping), and namespace(...) which takes the same arguments.
Dict dict_from_args(const CallArgs& a, const char* what) {
  Dict d;
  if (a.positional.size() > 1) throw TemplateError(std::string(what) + " expected at most 1 positional argument");
  if (a.positional.size() == 1) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      for (const auto& pair : iterate(src)) {
        if (!pair.is_list() || pair.as_list().size() != 2) {
          throw TemplateError(std::string(what) + ": sequence elements must be pairs");
        }
        d.set(pair.as_list()[0], pair.as_list()[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d.set(Value(k), v);
  return d;
}

Value namespace_fn(Renderer& r, CallArgs& a) {
  auto ns = r.new_namespace("Namespace");
  const Dict attrs = dict_from_args(a, "namespace()");
  for (const auto& [k, v] : attrs.items()) {
    if (!k.is_string()) throw TemplateError("namespace() attribute names must be strings");
    if (!k.as_string().empty() && k.as_string()[0] == '_') {
      throw TemplateError("chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                          k.as_string() + "'");
    }
    ns->set(k.as_string(), v);
  }
  return Value::make_namespace(std::move(ns));
}

Value raise_exception_fn(Renderer&, CallArgs& a) {
  const std::string message = a.positional.empty() ? "" : py_str(a.positional[0]);
  throw TemplateError(message, 0, 0, /*raised_by_template=*/true);
}

Value strftime_now_fn(Renderer&, CallArgs& a) {
  if (a.positional.size() != 1 || !a.positional[0].is_string()) throw TemplateError("strftime_now(format) needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].as_string().c_str(), &local);
  return Value(std::string(buf, n));
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals() {
  return {
      {"range", Value::callable("built-in function range", range_fn)},
      {"dict", Value::callable("built-in function dict",
                               [](Renderer&, CallArgs& a) { return Value::dict(dict_from_args(a, "dict()")); })},
      {"namespace", Value::callable("built-in function namespace", namespace_fn)},
      {"raise_exception", Value::callable("built-in function raise_exception", raise_exception_fn)},
      {"strftime_now", Value::callable("built-in function strftime_now", strftime_now_fn)},
  };
}

}  // namespace voltserve::chat
