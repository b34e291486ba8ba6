// obj.attr / obj[key] / obj[a:b:c] with jinja2's sandboxed lookup rules, and the Python methods of str, dict and list
// that templates call (`content.startswith(...)`, `args.items()`, ...). Mutating methods are refused, as in
// transformers' ImmutableSandboxedEnvironment.
#include <algorithm>
#include <array>

#include "chat/template/builtins.h"
#include "chat/template/operators.h"
#include "chat/template/py_format.h"
#include "chat/template/py_text.h"
#include "chat/template/renderer.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

// Attribute names Python's str, dict and list types have (so `x.name` is the method, not an item).
constexpr std::array<std::string_view, 47> kStrAttrs = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
constexpr std::array<std::string_view, 11> kDictAttrs = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                                         "pop", "popitem", "setdefault", "update", "values"};
constexpr std::array<std::string_view, 11> kListAttrs = {"append", "clear", "copy", "count", "extend", "index",
                                                         "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool in(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// "'dict object'" as jinja2 names an object in messages (built with append: GCC 12 misreports `"'" + string`).
std::string quoted_type(const Value& obj) {
  std::string out = "'";
  out += obj.is_none() ? "None" : std::string(obj.type_name()) + " object";
  out += "'";
  return out;
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(quoted_type(obj) + " has no attribute '" + name + "'");
}

Value unsafe_method(const Value& obj, const std::string& name) {
  const std::string message = "access to attribute '" + name + "' of '" + obj.type_name() +
                              "' object is unsafe (chat templates cannot modify values)";
  return Value::callable("unsafe method '" + name + "'",
                         [message](Renderer&, CallArgs&) -> Value { throw TemplateError(message); });
}

std::string expect_str(const Value* v, const std::string& what) {
  if (!v) throw TemplateError(what + " is missing a required argument");
  if (!v->is_string()) throw TemplateError(what + ": expected a str argument, not " + v->type_name());
  return v->as_string();
}

// Python str.split(sep=None, maxsplit=-1) and rsplit.
Value split(const std::string& s, const Value* sep_arg, int64_t maxsplit, bool from_right) {
  ValueList parts;
  if (!sep_arg || sep_arg->is_none()) {
    const std::u32string cps = py::decode(s);
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    if (!from_right) {
      size_t i = 0;
      while (i < cps.size()) {
        while (i < cps.size() && py::is_space(cps[i])) ++i;
        if (i == cps.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(i, cps.size());  // CPython keeps the remainder's trailing whitespace
          break;
        }
        size_t j = i;
        while (j < cps.size() && !py::is_space(cps[j])) ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      size_t i = cps.size();
      while (i > 0) {
        while (i > 0 && py::is_space(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(0, i);  // and rsplit keeps the remainder's leading whitespace
          break;
        }
        size_t j = i;
        while (j > 0 && !py::is_space(cps[j - 1])) --j;
        words.emplace_back(j, i);
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (const auto& [b, e] : words) parts.emplace_back(py::encode(std::u32string_view(cps).substr(b, e - b)));
    return Value::list(std::move(parts));
  }
  const std::string sep = expect_str(sep_arg, "str.split()");
  if (sep.empty()) throw TemplateError("empty separator");
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(sep, pos);
      if (hit == std::string::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep.size();
    }
    parts.emplace_back(s.substr(pos));
  } else {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      if (end < sep.size()) break;
      const size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      parts.emplace_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  return Value::list(std::move(parts));
}

// Python's str.splitlines() boundaries.
bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

// Code-point index of `needle` in `hay` searching [start, end); -1 when absent. rfind when `last`.
int64_t find_cp(const std::string& hay, const std::string& needle, bool last) {
  const size_t pos = last ? hay.rfind(needle) : hay.find(needle);
  if (pos == std::string::npos) return -1;
  return py::length(std::string_view(hay).substr(0, pos));
}

Value format_string(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw TemplateError("single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw TemplateError("single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw TemplateError("format specs and conversions in str.format() are not supported: {" + field + "}");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = field.empty() ? auto_index++ : std::stoul(field);
      if (idx >= args.positional.size()) throw TemplateError("Replacement index " + std::to_string(idx) + " out of range");
      v = &args.positional[idx];
    } else {
      for (const auto& [k, kv] : args.keyword) {
        if (k == field) v = &kv;
      }
      if (!v) throw TemplateError("KeyError: '" + field + "' in str.format()");
    }
    out += py_str(*v);
    i = close;
  }
  return Value(std::move(out));
}

Value justify(const std::string& s, const CallArgs& a, const char* what, int mode) {
  ArgBinder b(a, what, {"width", "fillchar"});
  if (!b.get(0) || !(b.get(0)->is_int() || b.get(0)->is_bool())) throw TemplateError(std::string(what) + " needs an int width");
  std::string fill = b.get(1) ? expect_str(b.get(1), what) : " ";
  if (py::length(fill) != 1) throw TemplateError(std::string(what) + ": the fill character must be exactly one character long");
  const int64_t width = std::min<int64_t>(b.get(0)->as_int(), 1 << 24);
  const int64_t len = py::length(s);
  if (width <= len) return Value(s);
  const int64_t pad = width - len;
  int64_t left = mode == 0 ? 0 : mode == 1 ? pad : pad / 2 + (pad & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < pad - left; ++i) out += fill;
  return Value(std::move(out));
}

template <class Pred>
Value all_chars(const std::string& s, Pred pred) {
  const std::u32string cps = py::decode(s);
  if (cps.empty()) return Value(false);
  return Value(std::all_of(cps.begin(), cps.end(), pred));
}

Value call_str_method(Renderer& r, const std::string& s, const std::string& name, CallArgs& a) {
  const std::string what = "str." + name + "()";
  auto no_args = [&] {
    if (!a.positional.empty() || !a.keyword.empty()) throw TemplateError(what + " takes no arguments");
  };
  if (name == "startswith" || name == "endswith") {
    ArgBinder b(a, what, {"prefix"});
    const Value* p = b.get(0);
    if (!p) throw TemplateError(what + " takes at least 1 argument (0 given)");
    auto test = [&](const std::string& x) {
      if (x.size() > s.size()) return false;
      return name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (p->is_tuple()) {
      for (const auto& e : p->as_list()) {
        if (test(expect_str(&e, what))) return Value(true);
      }
      return Value(false);
    }
    return Value(test(expect_str(p, what)));
  }
  if (name == "split" || name == "rsplit") {
    ArgBinder b(a, what, {"sep", "maxsplit"});
    const int64_t maxsplit = b.get(1) ? b.get(1)->as_int() : -1;
    Value parts = split(s, b.get(0), maxsplit, name == "rsplit");
    r.count_steps(static_cast<int64_t>(parts.as_list().size()));
    return parts;
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgBinder b(a, what, {"chars"});
    const auto side = name == "strip" ? py::StripSide::kBoth : name == "lstrip" ? py::StripSide::kLeft : py::StripSide::kRight;
    if (b.get(0) && !b.get(0)->is_none()) {
      const std::string chars = expect_str(b.get(0), what);
      return Value(py::strip(s, side, &chars));
    }
    return Value(py::strip(s, side));
  }
  if (name == "replace") {
    ArgBinder b(a, what, {"old", "new", "count"});
    const std::string old_s = expect_str(b.get(0), what), new_s = expect_str(b.get(1), what);
    int64_t count = b.get(2) ? b.get(2)->as_int() : -1;
    std::string out;
    if (old_s.empty()) {  // Python inserts `new` between every character (and at both ends)
      const std::u32string cps = py::decode(s);
      int64_t done = 0;
      for (size_t i = 0; i <= cps.size(); ++i) {
        if (count < 0 || done < count) {
          out += new_s;
          ++done;
        }
        if (i < cps.size()) py::append_utf8(out, cps[i]);
        r.check_size(out.size());
      }
      return Value(std::move(out));
    }
    size_t pos = 0;
    while (count != 0) {
      const size_t hit = s.find(old_s, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      out += new_s;
      r.check_size(out.size());
      pos = hit + old_s.size();
      if (count > 0) --count;
    }
    out.append(s, pos, std::string::npos);
    return Value(std::move(out));
  }
  if (name == "upper") return no_args(), Value(py::upper(s));
  if (name == "lower" || name == "casefold") return no_args(), Value(py::lower(s));
  if (name == "title") return no_args(), Value(py::title(s));
  if (name == "capitalize") return no_args(), Value(py::capitalize(s));
  if (name == "swapcase") return no_args(), Value(py::swapcase(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    ArgBinder b(a, what, {"sub"});
    const int64_t at = find_cp(s, expect_str(b.get(0), what), name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) throw TemplateError("substring not found");
    return Value(at);
  }
  if (name == "count") {
    ArgBinder b(a, what, {"sub"});
    const std::string sub = expect_str(b.get(0), what);
    if (sub.empty()) return Value(py::length(s) + 1);
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
    return Value(n);
  }
  if (name == "format") return format_string(s, a);
  if (name == "join") {
    ArgBinder b(a, what, {"iterable"});
    if (!b.get(0)) throw TemplateError(what + " takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const auto& e : iterate(*b.get(0))) {
      if (!e.is_string()) throw TemplateError(std::string("sequence item: expected str instance, ") + e.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += e.as_string();
      r.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    ArgBinder b(a, what, {"keepends"});
    const bool keep = b.get(0) && b.get(0)->truthy();
    const std::u32string cps = py::decode(s);
    ValueList lines;
    size_t start = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      if (!is_line_break(cps[i])) continue;
      size_t end = i + 1;
      if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++end;
      lines.emplace_back(py::encode(std::u32string_view(cps).substr(start, (keep ? end : i) - start)));
      start = end;
      i = end - 1;
    }
    if (start < cps.size()) lines.emplace_back(py::encode(std::u32string_view(cps).substr(start)));
    return Value::list(std::move(lines));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return no_args(), all_chars(s, py::is_digit);
  if (name == "isalpha") return no_args(), all_chars(s, py::is_alpha);
  if (name == "isalnum") return no_args(), all_chars(s, py::is_alnum);
  if (name == "isspace") return no_args(), all_chars(s, py::is_space);
  if (name == "isascii") return no_args(), Value(py::is_ascii(s));
  if (name == "isupper" || name == "islower") {
    no_args();
    bool any_cased = false, ok = true;
    for (char32_t cp : py::decode(s)) {
      const bool up = py::is_upper(cp), low = py::is_lower(cp);
      any_cased = any_cased || up || low;
      if (name == "isupper" ? low : up) ok = false;
    }
    return Value(any_cased && ok);
  }
  if (name == "zfill") {
    ArgBinder b(a, what, {"width"});
    if (!b.get(0)) throw TemplateError(what + " takes exactly one argument (0 given)");
    const int64_t width = std::min<int64_t>(b.get(0)->as_int(), 1 << 24);
    const int64_t len = py::length(s);
    if (width <= len) return Value(s);
    std::string out = s;
    const size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    out.insert(sign, std::string(static_cast<size_t>(width - len), '0'));
    return Value(std::move(out));
  }
  if (name == "ljust") return justify(s, a, "str.ljust()", 0);
  if (name == "rjust") return justify(s, a, "str.rjust()", 1);
  if (name == "center") return justify(s, a, "str.center()", 2);
  if (name == "partition" || name == "rpartition") {
    ArgBinder b(a, what, {"sep"});
    const std::string sep = expect_str(b.get(0), what);
    if (sep.empty()) throw TemplateError("empty separator");
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                                 : Value::list({Value(""), Value(""), Value(s)}, true);
    }
    return Value::list({Value(s.substr(0, hit)), Value(sep), Value(s.substr(hit + sep.size()))}, true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder b(a, what, {"affix"});
    const std::string x = expect_str(b.get(0), what);
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  throw TemplateError(what + " is not supported by voltserve's template engine");
}

Value str_method(const Value& obj, const std::string& name) {
  return Value::callable("method '" + name + "' of str", [obj, name](Renderer& r, CallArgs& a) {
    return call_str_method(r, obj.as_string(), name, a);
  });
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear") {
    return unsafe_method(obj, name);
  }
  return Value::callable("method '" + name + "' of dict", [obj, name](Renderer& r, CallArgs& a) -> Value {
    const Dict& d = obj.as_dict();
    const std::string what = "dict." + name + "()";
    if (name == "get") {
      ArgBinder b(a, what, {"key", "default"});
      if (!b.get(0)) throw TemplateError(what + " expected at least 1 argument, got 0");
      const Value* hit = d.find(*b.get(0));
      return hit ? *hit : b.get_or(1, Value::none());
    }
    const ArgBinder binder(a, what, {});
    (void)binder;
    r.count_steps(static_cast<int64_t>(d.size()));
    ValueList out;
    for (const auto& [k, v] : d.items()) {
      if (name == "keys") {
        out.push_back(k);
      } else if (name == "values") {
        out.push_back(v);
      } else if (name == "items") {
        out.push_back(Value::list({k, v}, true));
      }
    }
    if (name == "copy") return obj;
    if (name == "fromkeys") throw TemplateError("dict.fromkeys() is not supported by voltserve's template engine");
    return Value::list(std::move(out));
  });
}

Value list_method(const Value& obj, const std::string& name) {
  if (name != "count" && name != "index" && name != "copy") return unsafe_method(obj, name);
  return Value::callable("method '" + name + "' of list", [obj, name](Renderer&, CallArgs& a) -> Value {
    const ValueList& items = obj.as_list();
    if (name == "copy") return obj;
    ArgBinder b(a, "list." + name + "()", {"value"});
    if (!b.get(0)) throw TemplateError("list." + name + "() takes exactly one argument (0 given)");
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!py_equal(items[i], *b.get(0))) continue;
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") throw TemplateError(py_repr(*b.get(0)) + " is not in list");
    return Value(n);
  });
}

int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

Value get_python_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe");
  }
  switch (obj.kind()) {
    case Value::Kind::kDict:
      return in(kDictAttrs, name) ? dict_method(obj, name) : missing_attribute(obj, name);
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_namespace().find(name)) return *v;
      return missing_attribute(obj, name);
    case Value::Kind::kString:
      return in(kStrAttrs, name) ? str_method(obj, name) : missing_attribute(obj, name);
    case Value::Kind::kList:
      if (in(kListAttrs, name) && !(obj.is_tuple() && name != "count" && name != "index")) return list_method(obj, name);
      return missing_attribute(obj, name);
    default:
      return missing_attribute(obj, name);
  }
}

Value get_attr(Renderer& r, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe");
  }
  switch (obj.kind()) {
    case Value::Kind::kDict: {
      if (in(kDictAttrs, name)) return dict_method(obj, name);
      if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
      return missing_attribute(obj, name);
    }
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_namespace().find(name)) return *v;
      return missing_attribute(obj, name);
    case Value::Kind::kString:
      if (in(kStrAttrs, name)) return str_method(obj, name);
      return missing_attribute(obj, name);
    case Value::Kind::kList:
      if (in(kListAttrs, name) && !(obj.is_tuple() && name != "count" && name != "index")) return list_method(obj, name);
      return missing_attribute(obj, name);
    default:
      (void)r;
      return missing_attribute(obj, name);
  }
}

Value get_item(Renderer& r, const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (!(key.is_list() && !key.is_tuple()) && !key.is_dict()) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
      }
      break;
    case Value::Kind::kList:
      if (key.is_int() || key.is_bool()) {
        const auto n = static_cast<int64_t>(obj.as_list().size());
        const int64_t i = normalize_index(key.as_int(), n);
        if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
        return Value::undefined(quoted_type(obj) + " has no element " + std::to_string(key.as_int()));
      }
      break;
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        const std::string& s = obj.as_string();
        const std::u32string cps = py::decode(s);
        const auto n = static_cast<int64_t>(cps.size());
        const int64_t i = normalize_index(key.as_int(), n);
        if (i >= 0 && i < n) {
          std::string one;
          py::append_utf8(one, cps[static_cast<size_t>(i)]);
          return Value(std::move(one));
        }
        return Value::undefined("'str object' has no element " + std::to_string(key.as_int()));
      }
      break;
    default:
      break;
  }
  // jinja2: a failed item lookup with a string key falls back to the attribute.
  if (key.is_string()) return get_attr(r, obj, key.as_string());
  return Value::undefined(quoted_type(obj) + " has no element " + py_repr(key));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_opt = [](const Value& v, bool& ok) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.is_int() || v.is_bool()) return v.as_int();
    ok = false;
    return std::nullopt;
  };
  bool ok = true;
  const auto start = as_opt(start_v, ok), stop = as_opt(stop_v, ok), step_o = as_opt(step_v, ok);
  if (!ok || !(obj.is_list() || obj.is_string())) {
    return Value::undefined(quoted_type(obj) + " cannot be sliced with these bounds");
  }
  const int64_t step = step_o.value_or(1);
  if (step == 0) throw TemplateError("slice step cannot be zero");
  std::u32string cps;
  int64_t n;
  if (obj.is_string()) {
    cps = py::decode(obj.as_string());
    n = static_cast<int64_t>(cps.size());
  } else {
    n = static_cast<int64_t>(obj.as_list().size());
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t b = adjust(start, step < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  if (step > 0) {
    for (int64_t i = b; i < e; i += step) idx.push_back(i);
  } else {
    for (int64_t i = b; i > e; i += step) idx.push_back(i);
  }
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : idx) out.push_back(cps[static_cast<size_t>(i)]);
    return Value(py::encode(out));
  }
  ValueList out;
  for (int64_t i : idx) out.push_back(obj.as_list()[static_cast<size_t>(i)]);
  return Value::list(std::move(out), obj.is_tuple());
}

}  // namespace voltserve::chat
