// Jinja filters with jinja2 3.1 semantics, plus transformers' tojson (json.dumps with ensure_ascii=False and the
// indent/separators/sort_keys options). Generators (map, select, unique, ...) are returned as lists.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/template/builtins.h"
#include "chat/template/operators.h"
#include "chat/template/py_format.h"
#include "chat/template/py_text.h"
#include "chat/template/renderer.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

using FilterFn = Value (*)(Renderer&, const Value&, CallArgs&);

std::string str_of(const Value& v) { return py_str(v); }

bool as_flag(const Value* v, bool fallback) { return v ? v->truthy() : fallback; }

// Filters without parameters still reject arguments, as Python would.
void no_args(const CallArgs& a, const char* filter) {
  const ArgBinder binder(a, filter, {});
  (void)binder;
}

// jinja2's make_attrgetter: "a.b.0" walks item lookups (with attribute fallback); None means the item itself.
Value attr_path(Renderer& r, const Value& item, const Value* attribute) {
  if (!attribute || attribute->is_none()) return item;
  if (attribute->is_int()) return get_item(r, item, *attribute);
  const std::string path = str_of(*attribute);
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(r, cur, numeric ? Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value ignore_case(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(py::lower(v.as_string())) : v;
}

ValueList items_of(Renderer& r, const Value& v) {
  ValueList items = iterate(v);
  r.count_steps(static_cast<int64_t>(items.size()));
  return items;
}

Value f_tojson(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = as_flag(b.get(0), false);
  if (const Value* indent = b.get(1); indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->as_string();
    } else if (indent->is_int() || indent->is_bool()) {
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 256)), ' ');
    } else {
      throw TemplateError("tojson: indent must be an int or a str");
    }
  }
  if (const Value* sep = b.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string()) {
      throw TemplateError("tojson: separators must be a pair of strings");
    }
    o.separators = std::make_pair(sep->as_list()[0].as_string(), sep->as_list()[1].as_string());
  }
  o.sort_keys = as_flag(b.get(3), false);
  return Value(py_json_dumps(v, o));
}

Value f_length(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "length");
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value(int64_t{0});
    case Value::Kind::kString: return Value(py::length(v.as_string()));
    case Value::Kind::kList: return Value(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(v.as_dict().size()));
    default: throw TemplateError(std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

Value f_string(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "string");
  return Value(str_of(v));
}

Value f_safe(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "safe");
  return v.is_string() ? v : Value(str_of(v));
}

Value f_trim(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "trim", {"chars"});
  if (b.get(0) && !b.get(0)->is_none()) {
    const std::string chars = str_of(*b.get(0));
    return Value(py::strip(str_of(v), py::StripSide::kBoth, &chars));
  }
  return Value(py::strip(str_of(v), py::StripSide::kBoth));
}

Value f_upper(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  return Value(py::upper(str_of(v)));
}
Value f_lower(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  return Value(py::lower(str_of(v)));
}
Value f_title(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "title");
  return Value(py::title(str_of(v)));
}
Value f_capitalize(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "capitalize");
  return Value(py::capitalize(str_of(v)));
}

Value f_replace(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "replace", {"old", "new", "count"});
  if (!b.get(0) || !b.get(1)) throw TemplateError("replace needs the old and new strings");
  CallArgs m;
  m.positional = {Value(str_of(*b.get(0))), Value(str_of(*b.get(1)))};
  if (b.get(2) && !b.get(2)->is_none()) m.positional.push_back(*b.get(2));
  return r.call(get_attr(r, Value(str_of(v)), "replace"), m);
}

Value f_join(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "join", {"d", "attribute"});
  const std::string sep = b.get(0) ? str_of(*b.get(0)) : "";
  std::string out;
  bool first = true;
  for (const auto& item : items_of(r, v)) {
    if (!first) out += sep;
    first = false;
    out += str_of(attr_path(r, item, b.get(1)));
    r.check_size(out.size());
  }
  return Value(std::move(out));
}

Value f_items(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "items");
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
  ValueList out;
  r.count_steps(static_cast<int64_t>(v.as_dict().size()));
  for (const auto& [k, e] : v.as_dict().items()) out.push_back(Value::list({k, e}, true));
  return Value::list(std::move(out));
}

Value f_list(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "list");
  return Value::list(items_of(r, v));
}

Value f_first(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "first");
  ValueList items = items_of(r, v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "last");
  ValueList items = items_of(r, v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_default(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "default", {"default_value", "boolean"});
  const bool boolean = as_flag(b.get(1), false);
  if (v.is_undefined() || (boolean && !v.truthy())) return b.get_or(0, Value(std::string()));
  return v;
}

// int(): strings parse as Python int() (whitespace, sign, underscores), else through float, else the default.
std::optional<int64_t> parse_py_int(const std::string& text, int base) {
  std::string s = py::strip(text, py::StripSide::kBoth);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_' && std::isalnum(static_cast<unsigned char>(s[i + 1]))) continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno || end != digits.c_str() + digits.size() || !std::isalnum(static_cast<unsigned char>(digits.back()))) {
    return std::nullopt;
  }
  return v;
}

std::optional<double> parse_py_float(const std::string& text) {
  const std::string s = py::strip(text, py::StripSide::kBoth);
  if (s.empty()) return std::nullopt;
  std::string lowered = py::lower(s);
  std::string body = lowered;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return lowered[0] == '-' ? -v : v;
  }
  for (char c : body) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-' || c == '_')) return std::nullopt;
  }
  std::string clean;
  for (char c : s) {
    if (c != '_') clean += c;
  }
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

Value f_int(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "int", {"default", "base"});
  const Value fallback = b.get_or(0, Value(int64_t{0}));
  const int base = b.get(1) ? static_cast<int>(b.get(1)->as_int()) : 10;
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) throw TemplateError("cannot convert float infinity or NaN to integer");
    if (std::fabs(v.as_float()) >= 9.2e18) throw TemplateError("integer overflow (template integers are 64-bit)");
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string(), base)) return Value(*i);
    if (auto f = parse_py_float(v.as_string())) {
      if (!std::isfinite(*f)) throw TemplateError("cannot convert float infinity or NaN to integer");
      if (std::fabs(*f) >= 9.2e18) throw TemplateError("integer overflow (template integers are 64-bit)");
      return Value(static_cast<int64_t>(*f));
    }
  }
  return fallback;
}

Value f_float(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "float", {"default"});
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.as_string())) return Value(*f);
  }
  return b.get_or(0, Value(0.0));
}

Value f_abs(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "abs");
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow (template integers are 64-bit)");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  throw TemplateError(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Value f_round(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "round", {"precision", "method"});
  if (!v.is_number()) throw TemplateError(std::string("round: expected a number, not ") + v.type_name());
  const int64_t precision = b.get(0) ? b.get(0)->as_int() : 0;
  const std::string method = b.get(1) ? str_of(*b.get(1)) : "common";
  const double x = v.as_float();
  if (method == "common" && (v.is_int() || v.is_bool()) && precision >= 0) return Value(v.as_int());  // round(int)
  if (method == "ceil" || method == "floor") {
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  if (method != "common") throw TemplateError("method must be 'common', 'ceil' or 'floor'");
  if (!std::isfinite(x)) return Value(x);
  // Python's round() is correctly rounded (half to even on exact ties), which is what printf's %.*f does too.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), x);
  double r = std::strtod(buf, nullptr);
  if (precision < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    r = std::nearbyint(x / scale) * scale;
  }
  return Value(r);
}

Value f_indent(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "indent", {"width", "first", "blank"});
  std::string pad = "    ";
  if (const Value* w = b.get(0)) {
    pad = w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1024)), ' ');
  }
  const bool first = as_flag(b.get(1), false), blank = as_flag(b.get(2), false);
  // s.splitlines() of s + "\n", as jinja2 does.
  ValueList lines;
  {
    const std::u32string cps = py::decode(str_of(v) + "\n");
    size_t start = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      const char32_t c = cps[i];
      const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                       c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!brk) continue;
      lines.emplace_back(py::encode(std::u32string_view(cps).substr(start, i - start)));
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
      start = i + 1;
    }
    if (start < cps.size()) lines.emplace_back(py::encode(std::u32string_view(cps).substr(start)));
  }
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + pad;
      out += lines[i].as_string();
    }
  } else {
    out = lines.empty() ? "" : lines[0].as_string();
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].as_string().empty()) out += pad;
      out += lines[i].as_string();
    }
  }
  if (first) out = pad + out;
  return Value(std::move(out));
}

Value f_center(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "center", {"width"});
  CallArgs m;
  m.positional = {b.get_or(0, Value(int64_t{80}))};
  return r.call(get_attr(r, Value(str_of(v)), "center"), m);
}

Value f_wordcount(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "wordcount");
  int64_t n = 0;
  bool in_word = false;
  for (char32_t cp : py::decode(str_of(v))) {
    const bool w = py::is_alnum(cp) || cp == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_reverse(Renderer& r, const Value& v, CallArgs& a) {
  no_args(a, "reverse");
  if (v.is_string()) {
    std::u32string cps = py::decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(py::encode(cps));
  }
  ValueList items = items_of(r, v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// Sorting keys the way Python compares them; errors for mixed types come from py_less.
void sort_values(ValueList& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? py_less(keys[y], keys[x]) : py_less(keys[x], keys[y]);
  });
  ValueList sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

Value f_sort(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "sort", {"reverse", "case_sensitive", "attribute"});
  ValueList items = items_of(r, v);
  const bool case_sensitive = as_flag(b.get(1), false);
  std::vector<Value> keys;
  if (const Value* attr = b.get(2); attr && attr->is_string() && attr->as_string().find(',') != std::string::npos) {
    // "age,name": a tuple key of several attributes.
    std::vector<Value> parts;
    const std::string& list = attr->as_string();
    for (size_t s = 0; s <= list.size();) {
      const size_t c = list.find(',', s);
      parts.emplace_back(list.substr(s, c == std::string::npos ? std::string::npos : c - s));
      if (c == std::string::npos) break;
      s = c + 1;
    }
    for (const auto& item : items) {
      ValueList k;
      for (const auto& p : parts) k.push_back(ignore_case(attr_path(r, item, &p), case_sensitive));
      keys.push_back(Value::list(std::move(k), true));
    }
  } else {
    for (const auto& item : items) keys.push_back(ignore_case(attr_path(r, item, b.get(2)), case_sensitive));
  }
  sort_values(items, keys, as_flag(b.get(0), false));
  return Value::list(std::move(items));
}

Value f_dictsort(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw TemplateError("You can only sort by either 'key' or 'value' of a mapping");
  const bool case_sensitive = as_flag(b.get(0), false);
  const std::string by = b.get(1) ? str_of(*b.get(1)) : "key";
  if (by != "key" && by != "value") throw TemplateError("You can only sort by either 'key' or 'value'");
  ValueList items;
  std::vector<Value> keys;
  r.count_steps(static_cast<int64_t>(v.as_dict().size()));
  for (const auto& [k, e] : v.as_dict().items()) {
    items.push_back(Value::list({k, e}, true));
    keys.push_back(ignore_case(by == "key" ? k : e, case_sensitive));
  }
  sort_values(items, keys, as_flag(b.get(2), false));
  return Value::list(std::move(items));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = as_flag(b.get(0), false);
  ValueList out, seen;
  for (const auto& item : items_of(r, v)) {
    const Value key = ignore_case(attr_path(r, item, b.get(1)), case_sensitive);
    if ((key.is_list() && !key.is_tuple()) || key.is_dict()) {
      throw TemplateError(std::string("unhashable type: '") + key.type_name() + "'");
    }
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
    r.count_steps(static_cast<int64_t>(seen.size()));
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_or_max(Renderer& r, const Value& v, CallArgs& a, bool want_max) {
  ArgBinder b(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  ValueList items = items_of(r, v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = as_flag(b.get(0), false);
  size_t best = 0;
  Value best_key = ignore_case(attr_path(r, items[0], b.get(1)), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = ignore_case(attr_path(r, items[i], b.get(1)), case_sensitive);
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}
Value f_min(Renderer& r, const Value& v, CallArgs& a) { return min_or_max(r, v, a, false); }
Value f_max(Renderer& r, const Value& v, CallArgs& a) { return min_or_max(r, v, a, true); }

Value f_sum(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "sum", {"attribute", "start"});
  Value total = b.get_or(1, Value(int64_t{0}));
  for (const auto& item : items_of(r, v)) total = binary_op(r, "+", total, attr_path(r, item, b.get(0)));
  return total;
}

Value f_map(Renderer& r, const Value& v, CallArgs& a) {
  ValueList out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, e] : a.keyword) {
    if (k == "attribute") {
      attribute = &e;
    } else if (k == "default") {
      fallback = &e;
    } else if (a.positional.empty()) {
      throw TemplateError("map got an unexpected keyword argument '" + k + "'");
    }
  }
  if (attribute) {
    for (const auto& item : items_of(r, v)) {
      Value x = attr_path(r, item, attribute);
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw TemplateError("map requires a filter argument");
  const std::string filter = str_of(a.positional[0]);
  if (!has_filter(filter)) throw TemplateError("no filter named '" + filter + "'");
  for (const auto& item : items_of(r, v)) {
    CallArgs inner;
    inner.positional.assign(a.positional.begin() + 1, a.positional.end());
    inner.keyword = a.keyword;
    out.push_back(apply_filter(r, filter, item, inner));
  }
  return Value::list(std::move(out));
}

// select/reject/selectattr/rejectattr: keep items whose (attribute's) test result equals `keep`.
Value select_items(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  const Value* attribute = nullptr;
  if (by_attr) {
    if (a.positional.empty()) throw TemplateError("selectattr/rejectattr need an attribute name");
    attribute = &a.positional[next++];
  }
  std::string test;
  if (next < a.positional.size()) test = str_of(a.positional[next++]);
  if (!test.empty() && !has_test(test)) throw TemplateError("no test named '" + test + "'");
  ValueList out;
  for (const auto& item : items_of(r, v)) {
    const Value subject = by_attr ? attr_path(r, item, attribute) : item;
    bool result;
    if (test.empty()) {
      result = subject.truthy();
    } else {
      CallArgs inner;
      inner.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next), a.positional.end());
      inner.keyword = a.keyword;
      result = apply_test(r, test, subject, inner);
    }
    if (result == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}
Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, false); }

Value f_attr(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "attr", {"name"});
  if (!b.get(0)) throw TemplateError("attr needs a name");
  (void)r;
  return get_python_attr(v, str_of(*b.get(0)));
}

Value f_escape(Renderer&, const Value& v, CallArgs& a) {
  no_args(a, "escape");
  std::string out;
  for (char c : str_of(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_batch(Renderer& r, const Value& v, CallArgs& a) {
  ArgBinder b(a, "batch", {"linecount", "fill_with"});
  if (!b.get(0) || !(b.get(0)->is_int()) || b.get(0)->as_int() <= 0) throw TemplateError("batch needs a positive linecount");
  const auto n = static_cast<size_t>(b.get(0)->as_int());
  ValueList out, row;
  for (const auto& item : items_of(r, v)) {
    row.push_back(item);
    if (row.size() == n) {
      out.push_back(Value::list(std::move(row)));
      row.clear();
    }
  }
  if (!row.empty()) {
    if (b.get(1) && !b.get(1)->is_none()) {
      while (row.size() < n) row.push_back(*b.get(1));
    }
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}

Value f_format(Renderer& r, const Value& v, CallArgs& a) {
  if (!a.keyword.empty() && !a.positional.empty()) throw TemplateError("can't handle positional and keyword arguments at the same time");
  if (!a.keyword.empty()) throw TemplateError("format with keyword arguments is not supported");
  return binary_op(r, "%", Value(str_of(v)), Value::list(a.positional, true));
}

Value f_truncate(Renderer&, const Value& v, CallArgs& a) {
  ArgBinder b(a, "truncate", {"length", "killwords", "end", "leeway"});
  const int64_t length = b.get(0) ? b.get(0)->as_int() : 255;
  const bool killwords = as_flag(b.get(1), false);
  const std::string end = b.get(2) ? str_of(*b.get(2)) : "...";
  const int64_t leeway = b.get(3) && !b.get(3)->is_none() ? b.get(3)->as_int() : 5;
  const std::u32string s = py::decode(str_of(v));
  const auto end_len = static_cast<int64_t>(py::length(end));
  if (length < end_len) throw TemplateError("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) throw TemplateError("expected leeway >= 0");
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(py::encode(s));
  std::u32string cut = s.substr(0, static_cast<size_t>(length - end_len));
  if (!killwords) {
    const size_t sp = cut.rfind(U' ');
    if (sp != std::u32string::npos) cut = cut.substr(0, sp);
  }
  return Value(py::encode(cut) + end);
}

const std::unordered_map<std::string_view, FilterFn>& filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"tojson", f_tojson},       {"length", f_length},         {"count", f_length},
      {"string", f_string},       {"safe", f_safe},             {"trim", f_trim},
      {"upper", f_upper},         {"lower", f_lower},           {"title", f_title},
      {"capitalize", f_capitalize}, {"replace", f_replace},     {"join", f_join},
      {"items", f_items},         {"list", f_list},             {"first", f_first},
      {"last", f_last},           {"default", f_default},       {"d", f_default},
      {"int", f_int},             {"float", f_float},           {"abs", f_abs},
      {"round", f_round},         {"indent", f_indent},         {"center", f_center},
      {"wordcount", f_wordcount}, {"reverse", f_reverse},       {"sort", f_sort},
      {"dictsort", f_dictsort},   {"unique", f_unique},         {"min", f_min},
      {"max", f_max},             {"sum", f_sum},               {"map", f_map},
      {"select", f_select},       {"reject", f_reject},         {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"attr", f_attr},           {"escape", f_escape},
      {"e", f_escape},            {"forceescape", f_escape},    {"batch", f_batch},
      {"format", f_format},       {"truncate", f_truncate},
  };
  return table;
}

}  // namespace

bool has_filter(std::string_view name) { return filter_table().count(name) > 0; }

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  const auto& table = filter_table();
  const auto it = table.find(name);
  if (it == table.end()) throw TemplateError("no filter named '" + name + "'");
  r.count_steps();
  return it->second(r, input, args);
}

}  // namespace voltserve::chat
