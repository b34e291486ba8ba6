// str()/repr()/json.dumps() with CPython's exact spelling of floats, strings and containers.
#include "chat/template/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/template/py_text.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

void append_hex(std::string& out, char prefix, uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\%c%0*x", prefix, digits, v);
  out += buf;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : py::decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      append_hex(out, 'x', cp, 2);
    } else if (cp < 0x7F || py::is_printable(cp)) {
      py::append_utf8(out, cp);
    } else if (cp <= 0xFF) {
      append_hex(out, 'x', cp, 2);
    } else if (cp <= 0xFFFF) {
      append_hex(out, 'u', cp, 4);
    } else {
      append_hex(out, 'U', cp, 8);
    }
  }
  out += quote;
  return out;
}

std::string repr_at(const Value& v, int depth);

std::string container_str(const Value& v, int depth) {
  if (depth > 512) throw TemplateError("value nested too deeply to print");
  if (v.is_list()) {
    const auto& items = v.as_list();
    std::string out = v.is_tuple() ? "(" : "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += ", ";
      out += repr_at(items[i], depth + 1);
    }
    if (v.is_tuple() && items.size() == 1) out += ",";
    out += v.is_tuple() ? ")" : "]";
    return out;
  }
  std::string out = "{";
  bool first = true;
  for (const auto& [k, e] : v.as_dict().items()) {
    if (!first) out += ", ";
    first = false;
    out += repr_at(k, depth + 1) + ": " + repr_at(e, depth + 1);
  }
  return out + "}";
}

std::string namespace_str(const Namespace& ns, int depth) {
  if (depth > 512) throw TemplateError("value nested too deeply to print");
  std::string out = "<" + ns.display_name + " {";
  for (size_t i = 0; i < ns.attrs.size(); ++i) {
    if (i) out += ", ";
    out += repr_string(ns.attrs[i].first) + ": " + repr_at(ns.attrs[i].second, depth + 1);
  }
  return out + "}>";
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : py::decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20) {
          append_hex(out, 'u', cp, 4);
        } else if (ensure_ascii && cp > 0x7E) {
          if (cp > 0xFFFF) {  // a surrogate pair, as Python writes it
            const char32_t v = cp - 0x10000;
            append_hex(out, 'u', 0xD800 + (v >> 10), 4);
            append_hex(out, 'u', 0xDC00 + (v & 0x3FF), 4);
          } else {
            append_hex(out, 'u', cp, 4);
          }
        } else {
          py::append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(f);
}

// json.dumps turns dict keys into strings the way Python's encoder does.
std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.as_string();
    case Value::Kind::kBool: return k.as_bool() ? "true" : "false";
    case Value::Kind::kNone: return "null";
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return json_float(k.as_float());
    default:
      throw TemplateError(std::string("tojson: keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& o) : o_(o) {
    if (o_.separators) {
      item_sep_ = o_.separators->first;
      key_sep_ = o_.separators->second;
    } else {
      item_sep_ = o_.indent ? "," : ", ";
      key_sep_ = ": ";
    }
  }

  void write(const Value& v, int depth) {
    if (depth > 512) throw TemplateError("tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.as_int()); return;
      case Value::Kind::kFloat: out_ += json_float(v.as_float()); return;
      case Value::Kind::kString: json_string(out_, v.as_string(), o_.ensure_ascii); return;
      case Value::Kind::kList: {
        const auto& items = v.as_list();
        if (items.empty()) {
          out_ += "[]";
          return;
        }
        out_ += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out_ += item_sep_;
          newline(depth + 1);
          write(items[i], depth + 1);
        }
        newline(depth);
        out_ += ']';
        return;
      }
      case Value::Kind::kDict: {
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, e] : v.as_dict().items()) entries.emplace_back(json_key(k), &e);
        if (entries.empty()) {
          out_ += "{}";
          return;
        }
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out_ += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out_ += item_sep_;
          newline(depth + 1);
          json_string(out_, entries[i].first, o_.ensure_ascii);
          out_ += key_sep_;
          write(*entries[i].second, depth + 1);
        }
        newline(depth);
        out_ += '}';
        return;
      }
      default:
        throw TemplateError(std::string("tojson: Object of type ") +
                            (v.is_undefined() ? "Undefined" : v.type_name()) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int depth) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *o_.indent;
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+20": shortest round-trip digits
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e_pos + 1));
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp10 >= -4 && exp10 < 16) {
    std::string out;
    if (exp10 >= 0) {
      const size_t int_len = static_cast<size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out = digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return sign + mantissa + exp_buf;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kString: return v.as_string();
    default: return py_repr(v);
  }
}

std::string py_repr(const Value& v) { return repr_at(v, 0); }

namespace {

std::string repr_at(const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py_float_repr(v.as_float());
    case Value::Kind::kString: return repr_string(v.as_string());
    case Value::Kind::kList:
    case Value::Kind::kDict: return container_str(v, depth);
    case Value::Kind::kNamespace: return namespace_str(v.as_namespace(), depth);
    case Value::Kind::kCallable: return "<" + v.as_callable().name + ">";
  }
  return "";
}

}  // namespace

std::string py_json_dumps(const Value& v, const JsonDumpOptions& options) {
  JsonWriter w(options);
  w.write(v, 0);
  return w.take();
}

}  // namespace voltserve::chat
