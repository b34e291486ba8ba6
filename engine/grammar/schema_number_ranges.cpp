// See schema_number_ranges.h. The walk follows the schema keywords only (a property named "minimum" is not a
// range) and dispatches as XGrammar does: $ref, const, enum, anyOf/oneOf and allOf come before `type`, so a
// range beside them is ignored there as it is by XGrammar.
#include "grammar/schema_number_ranges.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace voltserve {
namespace {

// ordered: XGrammar writes properties in the schema's order, which a rewrite must keep.
using Json = nlohmann::ordered_json;

constexpr const char* kRangeKeys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};

bool has_range(const Json& s) {
  return std::any_of(std::begin(kRangeKeys), std::end(kRangeKeys), [&](const char* k) { return s.contains(k); });
}

std::string keyword_at(const char* keyword, const std::string& ptr) {
  return fmt::format("'{}' at {}", keyword, ptr.empty() ? "/" : ptr);
}

Decimal number_value(const Json& v, const char* keyword, const std::string& ptr) {
  std::string text;
  if (v.is_number_integer()) {
    text = v.is_number_unsigned() ? std::to_string(v.get<uint64_t>()) : std::to_string(v.get<int64_t>());
  } else if (v.is_number_float() && std::isfinite(v.get<double>())) {
    text = v.dump();  // the shortest text that reads back as this double: 0.1 is 0.1, not 0.1000000000000000055
  } else {
    throw std::invalid_argument(keyword_at(keyword, ptr) + " must be a number");
  }
  std::optional<Decimal> d = parse_decimal(text);
  if (!d) throw std::invalid_argument(keyword_at(keyword, ptr) + " is out of range: " + text);
  return *d;
}

// True when XGrammar enforces this integer range itself: whole bounds well inside int64, numeric exclusives, no
// multipleOf (which it ignores).
bool xgrammar_enforces_integer_range(const Json& s) {
  if (s.contains("multipleOf")) return false;
  for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(k)) continue;
    const Json& v = s[k];
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t{1} << 53)) return false;
      if (!v.is_number_unsigned() && std::llabs(v.get<int64_t>()) > (int64_t{1} << 53)) return false;
      continue;
    }
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0) return false;
  }
  return true;
}

NumberRange read_range(const Json& s, bool integer, const std::string& ptr) {
  NumberRange r;
  r.max_fraction_digits = integer ? 0 : 15;
  // Draft 4 spelt exclusive bounds as booleans beside minimum / maximum.
  auto exclusive_flag = [&](const char* k) { return s.contains(k) && s[k].is_boolean() && s[k].get<bool>(); };
  auto tighter = [](std::optional<NumberBound>& cur, NumberBound b, bool lower) {
    if (!cur) {
      cur = b;
      return;
    }
    const int c = compare(b.value, cur->value);
    if ((lower ? c > 0 : c < 0) || (c == 0 && b.exclusive)) cur = b;
  };
  if (s.contains("minimum")) tighter(r.lo, {number_value(s["minimum"], "minimum", ptr), exclusive_flag("exclusiveMinimum")}, true);
  if (s.contains("maximum")) tighter(r.hi, {number_value(s["maximum"], "maximum", ptr), exclusive_flag("exclusiveMaximum")}, false);
  if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean()) {
    tighter(r.lo, {number_value(s["exclusiveMinimum"], "exclusiveMinimum", ptr), true}, true);
  }
  if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean()) {
    tighter(r.hi, {number_value(s["exclusiveMaximum"], "exclusiveMaximum", ptr), true}, false);
  }
  if (s.contains("multipleOf")) {
    const Decimal m = number_value(s["multipleOf"], "multipleOf", ptr);
    if (m.negative || m.is_zero()) throw std::invalid_argument(keyword_at("multipleOf", ptr) + " must be above 0");
    const std::string& f = m.frac_digits;
    const bool power_of_ten_below_one = m.int_digits == "0" && f.back() == '1' &&
                                        f.find_first_not_of('0') == f.size() - 1;
    if (m.is_integer()) {
      const int64_t n = m.int_digits.size() > 6 ? kMaxIntegerMultiple + 1 : std::stoll(m.int_digits);
      if (n > kMaxIntegerMultiple) {
        throw std::invalid_argument(fmt::format("{} is not supported above {} (got {})", keyword_at("multipleOf", ptr),
                                                kMaxIntegerMultiple, m.int_digits));
      }
      r.integer_multiple = n;
      r.max_fraction_digits = 0;
    } else if (power_of_ten_below_one) {
      r.max_fraction_digits = std::min(r.max_fraction_digits, static_cast<int>(f.size()));
    } else {
      throw std::invalid_argument(fmt::format("{} is not supported: use a power of ten below 1 (0.1, 0.01, ...) or an "
                                              "integer; got {}{}", keyword_at("multipleOf", ptr),
                                              m.int_digits, f.empty() ? "" : "." + f));
    }
  }
  // Only checks that the range holds a number; the grammar itself is built from the placeholder later.
  try {
    (void)number_range_ebnf(r, "check");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("the range at {}: {}", ptr.empty() ? "/" : ptr, e.what()));
  }
  return r;
}

class Rewriter {
 public:
  explicit Rewriter(std::string placeholder_prefix) : prefix_(std::move(placeholder_prefix)) {}
  std::vector<std::pair<std::string, NumberRange>> ranges;

  void walk(Json& s, const std::string& ptr) {
    if (!s.is_object()) return;
    for (const char* k : {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}) {
      if (s.contains(k) && s[k].is_object()) {
        for (auto it = s[k].begin(); it != s[k].end(); ++it) walk(it.value(), ptr + "/" + k + "/" + escape(it.key()));
      }
    }
    for (const char* k : {"additionalProperties", "unevaluatedProperties", "items", "additionalItems",
                          "unevaluatedItems", "contains", "propertyNames", "not", "if", "then", "else"}) {
      if (s.contains(k)) walk(s[k], ptr + "/" + k);
    }
    for (const char* k : {"prefixItems", "items", "anyOf", "oneOf", "allOf"}) {
      if (s.contains(k) && s[k].is_array()) {
        for (size_t i = 0; i < s[k].size(); ++i) walk(s[k][i], ptr + "/" + k + "/" + std::to_string(i));
      }
    }
    for (const char* k : {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"}) {
      if (s.contains(k)) return;  // XGrammar takes these before `type`
    }
    if (!has_range(s)) return;
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
      if (s["type"].is_array()) {
        for (const Json& t : s["type"]) {
          if (t.is_string()) types.push_back(t.get<std::string>());
        }
      }
    } else {
      for (const char* k : {"properties", "additionalProperties", "unevaluatedProperties", "items", "prefixItems",
                            "unevaluatedItems"}) {
        if (s.contains(k)) return;  // XGrammar reads it as an object or an array
      }
      // No type: any value, and the range applies to numbers only.
      types = {"null", "boolean", "string", "array", "object", "number"};
    }
    const bool number = std::find(types.begin(), types.end(), "number") != types.end();
    const bool integer = !number && std::find(types.begin(), types.end(), "integer") != types.end();
    if (!number && !integer) return;
    if (integer && xgrammar_enforces_integer_range(s)) return;
    NumberRange range = read_range(s, integer, ptr);
    const std::string placeholder = prefix_ + std::to_string(ranges.size());
    ranges.emplace_back(placeholder, range);
    std::erase_if(types, [](const std::string& t) { return t == "number" || t == "integer"; });
    Json ph = {{"const", placeholder}};
    if (types.empty()) {
      s = std::move(ph);
      return;
    }
    Json rest = s;
    for (const char* k : kRangeKeys) rest.erase(k);
    rest["type"] = types.size() == 1 ? Json(types[0]) : Json(types);
    s = Json{{"anyOf", Json::array({std::move(ph), std::move(rest)})}};
  }

 private:
  static std::string escape(const std::string& key) {  // JSON pointer: ~ is ~0, / is ~1
    std::string out;
    for (char c : key) out += c == '~' ? "~0" : (c == '/' ? "~1" : std::string(1, c));
    return out;
  }
  std::string prefix_;
};

// A prefix that does not occur in `text`, so neither the placeholders nor the rule names can clash with it.
std::string unused_prefix(const std::string& text, std::string base) {
  while (text.find(base) != std::string::npos) base += "x";
  return base;
}

}  // namespace

SchemaNumberRanges extract_number_ranges(const std::string& schema) {
  SchemaNumberRanges out;
  out.schema = schema;
  Json doc = Json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return out;
  Rewriter rw(unused_prefix(schema, "VSNUMBERRANGEPLACEHOLDER"));
  rw.walk(doc, "");
  if (rw.ranges.empty()) return out;
  out.schema = doc.dump();
  out.ranges = std::move(rw.ranges);
  return out;
}

std::string substitute_number_ranges(const std::string& ebnf, const SchemaNumberRanges& ranges) {
  std::string out = ebnf;
  std::string rules;
  const std::string prefix = unused_prefix(ebnf, "vs_number_range_");
  for (size_t i = 0; i < ranges.ranges.size(); ++i) {
    const auto& [placeholder, range] = ranges.ranges[i];
    const std::string rule = prefix + std::to_string(i);
    // XGrammar prints the const as the JSON string inside an EBNF literal: "\"<placeholder>\"". Closing the
    // literal around the rule keeps whatever it was merged with on either side.
    const std::string printed = "\\\"" + placeholder + "\\\"";
    const std::string replacement = "\" " + rule + " \"";
    bool used = false;
    for (size_t at = out.find(printed); at != std::string::npos; at = out.find(printed, at + replacement.size())) {
      out.replace(at, printed.size(), replacement);
      used = true;
    }
    if (used) rules += number_range_ebnf(range, rule);
  }
  return out + "\n" + rules;
}

}  // namespace voltserve
