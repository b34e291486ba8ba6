// Python arithmetic on template values: exact int64 with overflow errors, float semantics of CPython (floor division
// and modulo follow the divisor's sign), str/list concatenation and repetition, printf-style `%` for strings.
#include "chat/template/operators.h"

#include <cmath>

#include "chat/template/builtins.h"
#include "chat/template/py_format.h"
#include "chat/template/py_text.h"
#include "chat/template/renderer.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

bool is_num(const Value& v) { return v.is_int() || v.is_float() || v.is_bool(); }
bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() +
                      "'");
}

[[noreturn]] void overflow() { throw TemplateError("integer overflow (template integers are 64-bit)"); }

// a (op) b on int64 with overflow detection; op is one of __builtin_{add,sub,mul}_overflow.
template <class Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t out = 0;
  if (op(a, b, &out)) overflow();
  return out;
}
bool add_ovf(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }
bool sub_ovf(int64_t a, int64_t b, int64_t* out) { return __builtin_sub_overflow(a, b, out); }
bool mul_ovf(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

double float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double float_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
  }
  return std::copysign(0.0, a / b);
}

Value repeat(Renderer& r, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value(std::string()) : Value::list({}, seq.is_tuple());
  const auto count = static_cast<uint64_t>(n);
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && count > r.limits().max_output_bytes / s.size()) r.check_size(r.limits().max_output_bytes + 1);
    std::string out;
    if (!s.empty()) {
      out.reserve(s.size() * count);
      for (uint64_t i = 0; i < count; ++i) out += s;
    }
    return Value(std::move(out));
  }
  const ValueList& items = seq.as_list();
  if (items.empty()) return Value::list({}, seq.is_tuple());
  if (count > static_cast<uint64_t>(r.limits().max_steps) / items.size()) r.count_steps(r.limits().max_steps + 1);
  r.count_steps(static_cast<int64_t>(items.size() * count));
  ValueList out;
  out.reserve(items.size() * count);
  for (uint64_t i = 0; i < count; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.is_tuple());
}

// "text %s" % args: the conversions chat templates plausibly use (%s %r %d %i %f %%).
Value percent_format(const std::string& fmt, const Value& args) {
  ValueList values = args.is_tuple() ? args.as_list() : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw TemplateError("incomplete format");
    const char c = fmt[i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw TemplateError("not enough arguments for format string");
    const Value& v = values[next++];
    switch (c) {
      case 's': out += py_str(v); break;
      case 'r': out += py_repr(v); break;
      case 'd':
      case 'i':
        if (v.is_float()) {
          out += std::to_string(static_cast<int64_t>(v.as_float()));
        } else if (is_intlike(v)) {
          out += std::to_string(v.as_int());
        } else {
          throw TemplateError(std::string("%") + c + " format: a real number is required, not " + v.type_name());
        }
        break;
      case 'f': {
        if (!is_num(v)) throw TemplateError(std::string("%f format: a real number is required, not ") + v.type_name());
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%f", v.as_float());
        out += buf;
        break;
      }
      default:
        throw TemplateError(std::string("unsupported format character '") + c + "' in % formatting");
    }
  }
  if (next < values.size()) throw TemplateError("not all arguments converted during string formatting");
  return Value(std::move(out));
}

}  // namespace

[[noreturn]] void throw_undefined(const Value& v) { throw TemplateError(v.undefined_hint()); }

Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = py_str(a);
    const std::string t = py_str(b);
    r.check_size(s.size() + t.size());
    return Value(s + t);
  }
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  if (op == "+") {
    if (is_intlike(a) && is_intlike(b)) return Value(checked(add_ovf, a.as_int(), b.as_int()));
    if (is_num(a) && is_num(b)) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      r.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      r.count_steps(static_cast<int64_t>(items.size()));
      return Value::list(std::move(items), a.is_tuple());
    }
    if (a.is_string()) throw TemplateError(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (is_intlike(a) && is_intlike(b)) return Value(checked(sub_ovf, a.as_int(), b.as_int()));
    if (is_num(a) && is_num(b)) return Value(a.as_float() - b.as_float());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (is_intlike(a) && is_intlike(b)) return Value(checked(mul_ovf, a.as_int(), b.as_int()));
    if (is_num(a) && is_num(b)) return Value(a.as_float() * b.as_float());
    if ((a.is_string() || a.is_list()) && is_intlike(b)) return repeat(r, a, b.as_int());
    if (is_intlike(a) && (b.is_string() || b.is_list())) return repeat(r, b, a.as_int());
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!is_num(a) || !is_num(b)) unsupported("/", a, b);
    if (b.as_float() == 0.0) throw TemplateError("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (!is_num(a) || !is_num(b)) unsupported("//", a, b);
    if (is_intlike(a) && is_intlike(b)) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) throw TemplateError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    if (b.as_float() == 0.0) throw TemplateError("float floor division by zero");
    return Value(float_floordiv(a.as_float(), b.as_float()));
  }
  if (op == "%") {
    if (a.is_string()) return percent_format(a.as_string(), b);
    if (!is_num(a) || !is_num(b)) unsupported("%", a, b);
    if (is_intlike(a) && is_intlike(b)) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) throw TemplateError("integer division or modulo by zero");
      if (y == -1) return Value(int64_t{0});
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (b.as_float() == 0.0) throw TemplateError("float modulo");
    return Value(float_mod(a.as_float(), b.as_float()));
  }
  if (op == "**") {
    if (!is_num(a) || !is_num(b)) unsupported("** or pow()", a, b);
    if (is_intlike(a) && is_intlike(b) && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int(), e = b.as_int();
      while (e > 0) {
        if (e & 1) result = checked(mul_ovf, result, base);
        e >>= 1;
        if (e) base = checked(mul_ovf, base, base);
      }
      return Value(result);
    }
    if (a.as_float() == 0.0 && b.as_float() < 0) throw TemplateError("0.0 cannot be raised to a negative power");
    const double v = std::pow(a.as_float(), b.as_float());
    if (std::isnan(v) && !std::isnan(a.as_float()) && !std::isnan(b.as_float())) {
      throw TemplateError("negative number cannot be raised to a fractional power (complex results unsupported)");
    }
    return Value(v);
  }
  throw TemplateError("unknown operator " + op);
}

Value negate(const Value& v) {
  if (v.is_undefined()) throw_undefined(v);
  if (is_intlike(v)) {
    if (v.as_int() == INT64_MIN) throw TemplateError("integer overflow (template integers are 64-bit)");
    return Value(-v.as_int());
  }
  if (v.is_float()) return Value(-v.as_float());
  throw TemplateError(std::string("bad operand type for unary -: '") + v.type_name() + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) throw_undefined(v);
  if (v.is_bool()) return Value(v.as_int());
  if (is_num(v)) return v;
  throw TemplateError(std::string("bad operand type for unary +: '") + v.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // jinja2's Undefined iterates as empty
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw TemplateError(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& v : container.as_list()) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if ((item.is_list() && !item.is_tuple()) || item.is_dict()) {
        throw TemplateError(std::string("unhashable type: '") + item.type_name() + "'");
      }
      return container.as_dict().find(item) != nullptr;
    default:
      throw TemplateError(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

}  // namespace voltserve::chat
