// See fields.h.
#include "openai/fields.h"

#include <cmath>

#include <fmt/format.h>

#include "openai/api_error.h"

namespace voltserve::openai {

const Json* find_field(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

std::optional<bool> read_bool(const Json& object, std::string_view key, const std::string& param) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail_invalid(param, fmt::format("'{}' must be a boolean, got {}", param, json_type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> read_string(const Json& object, std::string_view key, const std::string& param) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail_invalid(param, fmt::format("'{}' must be a string, got {}", param, json_type_name(*v)));
  return v->get<std::string>();
}

std::optional<double> read_number(const Json& object, std::string_view key, const std::string& param, double lo,
                                  double hi, bool lo_open) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail_invalid(param, fmt::format("'{}' must be a number, got {}", param, json_type_name(*v)));
  double x = v->get<double>();
  bool below = lo_open ? !(x > lo) : !(x >= lo);
  if (!std::isfinite(x) || below || !(x <= hi)) {
    fail_invalid(param, fmt::format("'{}' must be in {}{}, {}], got {}", param, lo_open ? "(" : "[", lo, hi, x));
  }
  return x;
}

int64_t integer_value(const Json& v, const std::string& param, int64_t lo, int64_t hi) {
  int64_t out = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        fail_invalid(param, fmt::format("'{}' must be an integer in [{}, {}], got {}", param, lo, hi, u));
      }
      out = static_cast<int64_t>(u);
    } else {
      out = v.get<int64_t>();
    }
  } else if (v.is_number_float()) {
    double x = v.get<double>();
    // 3.0 is an integer to a Python client; 2.7 and 1e30 are not.
    if (!(std::trunc(x) == x) || !(std::fabs(x) < 9.0e15)) {
      fail_invalid(param, fmt::format("'{}' must be an integer, got {}", param, x));
    }
    out = static_cast<int64_t>(x);
  } else {
    fail_invalid(param, fmt::format("'{}' must be an integer, got {}", param, json_type_name(v)));
  }
  if (out < lo || out > hi) {
    fail_invalid(param, fmt::format("'{}' must be an integer in [{}, {}], got {}", param, lo, hi, out));
  }
  return out;
}

std::optional<int64_t> read_integer(const Json& object, std::string_view key, const std::string& param, int64_t lo,
                                    int64_t hi) {
  const Json* v = find_field(object, key);
  if (!v) return std::nullopt;
  return integer_value(*v, param, lo, hi);
}

std::string field_path(const std::string& parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, size_t index) { return parent + "[" + std::to_string(index) + "]"; }

}  // namespace voltserve::openai
