// Python's str(), repr() and json.dumps() of template values: what `{{ x }}`, `x|string` and transformers' tojson
// filter print. Checked against CPython by the differential tests (tools/template_diff.py).
#pragma once

#include <optional>
#include <string>

#include "chat/template/value.h"

namespace voltserve::chat {

// repr(float): the shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16 ("1.0", "1e+16", "1.5e-05").
std::string py_float_repr(double v);
std::string py_str(const Value& v);
std::string py_repr(const Value& v);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson calls it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None, or the string one level adds (an int n means n spaces)
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
// Throws TemplateError for values JSON cannot hold (Undefined, namespaces, callables).
std::string py_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace voltserve::chat
