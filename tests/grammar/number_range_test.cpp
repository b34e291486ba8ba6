// engine/grammar/number_range (the range grammar) and schema_number_ranges (placing it in a schema's grammar):
// thousands of random ranges, each compiled by XGrammar over a one-byte-per-token vocabulary and driven byte by byte,
// accept exactly the candidates a direct exact-decimal check calls valid; random walks under the mask never stall
// and end; schemas with ranged numbers (top level, nested, arrays, anyOf, $defs, nullable) compile through the
// public GrammarCompiler and accept / refuse JSON by its numbers; unsupported multipleOf names its pointer.
#include <catch2/catch_test_macros.hpp>
#include <dlpack/dlpack.h>
#include <nlohmann/json.hpp>
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/number_range.h"
#include "grammar/schema_number_ranges.h"
#include "voltserve/grammar.h"
#include "voltserve/tokenizer.h"

namespace voltserve {
namespace {

// ---- the oracle: plain-notation decimals compared as fixed-width digit strings ----

struct Fixed {
  bool negative = false;
  std::string digits;  // 80 integer digits then 60 fraction digits
};

std::optional<Fixed> fixed(const std::string& text) {
  static const std::regex kPlain(R"((-?)([0-9]+)(?:\.([0-9]+))?)");
  std::smatch m;
  if (!std::regex_match(text, m, kPlain)) return std::nullopt;
  std::string i = m[2].str(), f = m[3].str();
  if (i.size() > 80 || f.size() > 60) return std::nullopt;
  Fixed out;
  out.digits = std::string(80 - i.size(), '0') + i + f + std::string(60 - f.size(), '0');
  out.negative = m[1].length() > 0 && out.digits.find_first_not_of('0') != std::string::npos;
  return out;
}

int cmp(const Fixed& a, const Fixed& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = a.digits.compare(b.digits);
  const int s = c < 0 ? -1 : (c > 0 ? 1 : 0);
  return a.negative ? -s : s;
}

struct TestRange {
  std::optional<std::string> lo, hi;  // plain notation
  bool lo_exclusive = false, hi_exclusive = false;
  int max_frac = 15;
  int64_t multiple = 0;
};

bool oracle(const std::string& text, const TestRange& r) {
  const std::string frac = r.max_frac == 0 ? "" : "(\\.[0-9]{1," + std::to_string(r.max_frac) + "})?";
  if (!std::regex_match(text, std::regex("-?(0|[1-9][0-9]*)" + frac))) return false;
  const size_t first = text.find_first_of("123456789");  // at most 15 digits from the first non-zero one on
  if (first != std::string::npos &&
      std::count_if(text.begin() + static_cast<std::ptrdiff_t>(first), text.end(), [](char ch) { return ch != '.'; }) > 15) {
    return false;
  }
  const Fixed v = *fixed(text);
  if (text[0] == '-' && v.digits.find_first_not_of('0') == std::string::npos) return false;  // "-0", "-0.0"
  if (r.lo) {
    const int c = cmp(v, *fixed(*r.lo));
    if (c < 0 || (c == 0 && r.lo_exclusive)) return false;
  }
  if (r.hi) {
    const int c = cmp(v, *fixed(*r.hi));
    if (c > 0 || (c == 0 && r.hi_exclusive)) return false;
  }
  if (r.multiple > 1) {
    int64_t rem = 0;
    for (char ch : text) {
      if (ch >= '0' && ch <= '9') rem = (rem * 10 + (ch - '0')) % r.multiple;
    }
    if (rem != 0) return false;
  }
  return true;
}

NumberRange to_range(const TestRange& t) {
  NumberRange r;
  if (t.lo) r.lo = NumberBound{*parse_decimal(*t.lo), t.lo_exclusive};
  if (t.hi) r.hi = NumberBound{*parse_decimal(*t.hi), t.hi_exclusive};
  r.max_fraction_digits = t.max_frac;
  r.integer_multiple = t.multiple;
  return r;
}

// ---- XGrammar over a byte vocabulary: token b < 256 is the byte b, token 256 the stop token ----

constexpr int32_t kStop = 256;

xgrammar::GrammarCompiler& byte_compiler() {
  static xgrammar::GrammarCompiler c = [] {
    std::vector<std::string> vocab(257);
    for (int b = 0; b < 256; ++b) vocab[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, 257, std::vector<int32_t>{kStop}, false);
    return xgrammar::GrammarCompiler(info, 1, false);
  }();
  return c;
}

xgrammar::CompiledGrammar compile_range(const NumberRange& r) {
  const std::string ebnf = "root ::= num\n" + number_range_ebnf(r, "num");
  return byte_compiler().CompileGrammar(xgrammar::Grammar::FromEBNF(ebnf, "root"));
}

bool accepts(const xgrammar::CompiledGrammar& g, const std::string& text) {
  xgrammar::GrammarMatcher m(g);
  for (unsigned char c : text) {
    if (!m.AcceptToken(c)) return false;
  }
  return m.AcceptToken(kStop);
}

std::vector<int32_t> allowed(xgrammar::GrammarMatcher& m) {
  std::vector<int32_t> words(9, 0);
  int64_t shape[1] = {9};
  DLTensor t{};
  t.data = words.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  m.FillNextTokenBitmask(&t, 0);
  std::vector<int32_t> out;
  for (int32_t id = 0; id <= kStop; ++id) {
    if (static_cast<uint32_t>(words[static_cast<size_t>(id / 32)]) & (1u << (id % 32))) out.push_back(id);
  }
  return out;
}

std::string random_digits(std::mt19937& rng, int n, bool nonzero_first) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>('0' + (i == 0 && nonzero_first ? 1 + rng() % 9 : rng() % 10)));
  return s;
}

std::string random_decimal(std::mt19937& rng) {
  const int n_int = static_cast<int>(rng() % 4);
  std::string s = n_int == 0 ? "0" : random_digits(rng, n_int, true);
  const int n_frac = rng() % 5 == 0 ? static_cast<int>(10 + rng() % 9) : static_cast<int>(rng() % 4);
  // append(), not "." + string: GCC 12 at -O3 misreports -Wrestrict on operator+(const char*, string&&)
  if (n_frac > 0) s.append(".").append(random_digits(rng, n_frac, false));
  return rng() % 2 && s != "0" ? std::string("-").append(s) : s;
}

// Candidates near and far from the bounds, valid and not.
std::vector<std::string> candidates(std::mt19937& rng, const TestRange& r) {
  std::vector<std::string> c = {"0", "-0", "0.0", "-0.0", "0.000", "00", "01", "-01", "1.", ".5", "-", "", "1e5",
                                "+1", "1.5e2", "0.1234567890123456", "-0.999999999999999", "9999999", "-9999999",
                                "5", "-5", "1", "-1", "0.5", "-0.5", "10", "100"};
  for (const auto* b : {&r.lo, &r.hi}) {
    if (!*b) continue;
    const std::string& s = **b;
    c.push_back(s);
    c.push_back(s[0] == '-' ? s.substr(1) : "-" + s);
    c.push_back(s + (s.find('.') == std::string::npos ? ".0" : "0"));
    c.push_back(s + (s.find('.') == std::string::npos ? ".000000000000001" : "000000000001"));
    c.push_back(s + (s.find('.') == std::string::npos ? ".9" : "9"));
    c.push_back(s + (s.find('.') == std::string::npos ? ".0000000000000001" : "1"));
    for (int k = 0; k < 6; ++k) {  // one digit changed by one up or down
      std::string t = s;
      const size_t at = rng() % t.size();
      if (t[at] < '0' || t[at] > '9') continue;
      t[at] = static_cast<char>(rng() % 2 ? (t[at] == '9' ? '8' : t[at] + 1) : (t[at] == '0' ? '1' : t[at] - 1));
      c.push_back(t);
    }
    if (s.size() > 2) c.push_back(s.substr(0, s.size() - 1));
  }
  for (int k = 0; k < 24; ++k) c.push_back(random_decimal(rng));
  return c;
}

TEST_CASE("parse_decimal reads JSON numbers exactly", "[unit]") {
  auto text = [](const char* s) {
    std::optional<Decimal> d = parse_decimal(s);
    REQUIRE(d.has_value());
    return std::string(d->negative ? "-" : "") + d->int_digits + (d->frac_digits.empty() ? "" : "." + d->frac_digits);
  };
  CHECK(text("0") == "0");
  CHECK(text("-0") == "0");
  CHECK(text("-0.000") == "0");
  CHECK(text("1e-3") == "0.001");
  CHECK(text("2.50E+2") == "250");
  CHECK(text("-1.5") == "-1.5");
  CHECK(text("12.3400") == "12.34");
  CHECK(text("1.25e1") == "12.5");
  CHECK(text("100") == "100");
  CHECK(text("1e+20") == "100000000000000000000");
  for (const char* bad : {"", "-", "01x", "1.", ".5", "1e", "1e+", "+1", "1e500"}) {
    CHECK_FALSE(parse_decimal(bad).has_value());
  }
  CHECK(compare(*parse_decimal("-1.5"), *parse_decimal("-1.25")) < 0);
  CHECK(compare(*parse_decimal("0.5"), *parse_decimal("0.25")) > 0);
  CHECK(compare(*parse_decimal("10"), *parse_decimal("9.99")) > 0);
  CHECK(compare(*parse_decimal("0.10"), *parse_decimal("1e-1")) == 0);
}

TEST_CASE("the range grammar accepts exactly the numbers in the range", "[unit]") {
  std::mt19937 rng(20261202);
  int n_cases = 0, n_valid = 0, n_empty = 0;
  for (int iter = 0; iter < 400; ++iter) {
    TestRange t;
    if (rng() % 5) t.lo = random_decimal(rng);
    if (rng() % 5) t.hi = random_decimal(rng);
    if (t.lo && t.hi && rng() % 8 && cmp(*fixed(*t.lo), *fixed(*t.hi)) > 0) std::swap(t.lo, t.hi);
    if (t.lo && t.hi && rng() % 10 == 0) t.hi = t.lo;  // a single value (or none, with an exclusive end)
    t.lo_exclusive = rng() % 2;
    t.hi_exclusive = rng() % 2;
    const unsigned kind = rng() % 8;
    if (kind == 0) t.max_frac = 0;  // integers
    if (kind == 1) t.max_frac = static_cast<int>(1 + rng() % 3);  // multipleOf 10^-d
    if (kind == 2) {
      t.max_frac = 0;
      t.multiple = std::vector<int64_t>{2, 3, 7, 10, 25}[rng() % 5];
    }
    INFO("range lo=" << t.lo.value_or("-") << (t.lo_exclusive ? " (excl)" : "") << " hi=" << t.hi.value_or("-")
                     << (t.hi_exclusive ? " (excl)" : "") << " frac<=" << t.max_frac << " multiple=" << t.multiple);
    const NumberRange r = to_range(t);
    std::vector<std::string> cands = candidates(rng, t);
    std::optional<xgrammar::CompiledGrammar> g;
    try {
      g = compile_range(r);
    } catch (const std::invalid_argument&) {
      ++n_empty;
      for (const std::string& s : cands) {  // refused as empty: then no candidate may be valid
        INFO("candidate " << s);
        CHECK_FALSE(oracle(s, t));
      }
      continue;
    }
    for (const std::string& s : cands) {
      INFO("candidate '" << s << "'");
      const bool want = oracle(s, t);
      n_valid += want ? 1 : 0;
      ++n_cases;
      CHECK(accepts(*g, s) == want);
    }
  }
  INFO("cases " << n_cases << ", valid " << n_valid << ", empty ranges " << n_empty);
  CHECK(n_cases > 10000);
  CHECK(n_valid > n_cases / 10);  // both answers are exercised
  CHECK(n_valid < n_cases * 9 / 10);
  CHECK(n_empty > 0);
}

TEST_CASE("random walks under the range mask never stall and end inside the range", "[unit]") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 80; ++iter) {
    TestRange t;
    t.lo = random_decimal(rng);
    t.hi = random_decimal(rng);
    if (cmp(*fixed(*t.lo), *fixed(*t.hi)) > 0) std::swap(t.lo, t.hi);
    if (iter % 5 == 1) t.lo.reset();  // open sides end too: the significant digits are capped
    if (iter % 5 == 2) t.hi.reset();
    t.max_frac = iter % 4 == 0 ? 2 : 15;
    INFO("range [" << t.lo.value_or("-inf") << ", " << t.hi.value_or("inf") << "]");
    std::optional<xgrammar::CompiledGrammar> g;
    try {
      g = compile_range(to_range(t));
    } catch (const std::invalid_argument&) {
      continue;  // lo == hi with nothing else: fine
    }
    // At most sign + 15 integer digits + '.' + 15 fraction digits, then the stop token.
    const size_t longest = 1 + 15 + 1 + 15;
    for (int walk = 0; walk < 10; ++walk) {
      xgrammar::GrammarMatcher m(*g);
      std::string text;
      bool ended = false;
      for (size_t step = 0; step <= longest + 1 && !ended; ++step) {
        std::vector<int32_t> ok = allowed(m);
        REQUIRE_FALSE(ok.empty());
        const int32_t pick = ok[rng() % ok.size()];
        REQUIRE(m.AcceptToken(pick));
        if (pick == kStop) {
          ended = true;
        } else {
          text.push_back(static_cast<char>(pick));
        }
      }
      INFO("walk '" << text << "'");
      CHECK(ended);
      CHECK(oracle(text, t));
    }
  }
}

TEST_CASE("unbounded sides and special bounds", "[unit]") {
  auto check = [](TestRange t, const std::vector<std::pair<std::string, bool>>& cases) {
    const xgrammar::CompiledGrammar g = compile_range(to_range(t));
    for (const auto& [s, want] : cases) {
      INFO("'" << s << "' lo=" << t.lo.value_or("-") << " hi=" << t.hi.value_or("-"));
      CHECK(oracle(s, t) == want);  // the table agrees with the oracle
      CHECK(accepts(g, s) == want);
    }
  };
  check({"0", std::nullopt, true, false}, {{"0", false}, {"-0", false}, {"0.0", false}, {"0.000000000000001", true},
                                           {"0.0000000000000001", false}, {"123456789012345", true},
                                           {"1234567890123456", false}, {"1.23456789012345", true},
                                           {"1.234567890123456", false}, {"-0.1", false}});
  check({std::nullopt, "0", false, false}, {{"0", true}, {"-0", false}, {"-0.0", false}, {"0.1", false},
                                            {"-12345678901234.5", true}, {"-123456789012345.5", false}});
  check({"-1.5", "-0.25", false, true}, {{"-1.5", true}, {"-1.50", true}, {"-1.51", false}, {"-0.25", false},
                                         {"-0.2500000000001", true}, {"-0.24", false}, {"0", false}, {"-1", true}});
  check({"0.001", "0.001", false, false}, {{"0.001", true}, {"0.0010", true}, {"0.0011", false}, {"0", false}});
  TestRange ints{"0.5", "10.5", false, false, 0, 0};
  check(ints, {{"0", false}, {"1", true}, {"10", true}, {"11", false}, {"1.0", false}, {"-0", false}});
  check({"-0", "0", false, false}, {{"0", true}, {"0.000", true}, {"-0", false}, {"-0.0", false}});
  TestRange mult{"-30", "30", false, true, 0, 7};
  check(mult, {{"-28", true}, {"-30", false}, {"0", true}, {"-0", false}, {"21", true}, {"28", true}, {"22", false}});
  CHECK_THROWS_AS(compile_range(to_range({"1", "0.5", false, false})), std::invalid_argument);
  CHECK_THROWS_AS(compile_range(to_range({"1", "1", true, false})), std::invalid_argument);
  CHECK_THROWS_AS(compile_range(to_range({"0.11", "0.19", false, false, 1, 0})), std::invalid_argument);
}

// ---- schemas through the public GrammarCompiler on the fixture tokenizer ----

struct SchemaFixture {
  Tokenizer tok;
  std::vector<int32_t> stops;
  std::unique_ptr<GrammarCompiler> compiler;
};

SchemaFixture& schema_fixture() {
  static SchemaFixture f = [] {
    Result<Tokenizer> t = Tokenizer::load(VOLTSERVE_SOURCE_DIR "/tests/fixtures/models/tiny-chat");
    REQUIRE(t.is_ok());
    SchemaFixture out{std::move(t).value(), {}, nullptr};
    out.stops.push_back(*out.tok.token_id(out.tok.eos_token()));
    Result<std::unique_ptr<GrammarCompiler>> c = GrammarCompiler::create(out.tok, 3033, out.stops);
    REQUIRE(c.is_ok());
    out.compiler = std::move(c).value();
    return out;
  }();
  return f;
}

Result<std::shared_ptr<const CompiledConstraint>> compile_schema(const std::string& schema) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = schema;
  s.any_whitespace = false;
  return schema_fixture().compiler->compile(s);
}

// Whether the compiled schema takes `json` as a whole output (its tokens, then the stop token).
bool schema_accepts(const std::shared_ptr<const CompiledConstraint>& c, const std::string& json) {
  std::unique_ptr<ConstraintMatcher> m = make_matcher(c);
  Result<std::vector<int32_t>> ids = schema_fixture().tok.encode(json);
  REQUIRE(ids.is_ok());
  for (int32_t id : ids.value()) {
    if (!m->accept(id)) return false;
  }
  return m->accept(schema_fixture().stops[0]) && m->terminated();
}

TEST_CASE("schemas with ranged numbers compile and are enforced wherever the number sits", "[unit]") {
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, bool>>>> cases = {
      {R"({"type":"number","minimum":0,"maximum":1})", {{"0.5", true}, {"1", true}, {"1.01", false}, {"-0.1", false}}},
      {R"({"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},)"
       R"("price":{"type":"number","minimum":0.01,"multipleOf":0.01}},"required":["p","price"],)"
       R"("additionalProperties":false})",
       {{R"({"p": 0.25, "price": 9.99})", true}, {R"({"p": 0, "price": 9.99})", false},
        {R"({"p": 0.25, "price": 9.999})", false}, {R"({"p": 0.25, "price": 0})", false},
        {R"({"p": 0.999, "price": 0.01})", true}}},
      {R"({"type":"object","properties":{"xs":{"type":"array","items":{"type":"number","minimum":-1.5,"maximum":-0.5}}},)"
       R"("required":["xs"],"additionalProperties":false})",
       {{R"({"xs": [-1.5, -0.5, -1]})", true}, {R"({"xs": []})", true}, {R"({"xs": [-1.5, 0]})", false}}},
      {R"({"type":"object","properties":{"v":{"type":["number","null"],"maximum":1e-3}},"required":["v"],)"
       R"("additionalProperties":false})",
       {{R"({"v": null})", true}, {R"({"v": 0.001})", true}, {R"({"v": 0.0011})", false}, {R"({"v": -7})", true}}},
      {R"({"type":"object","properties":{"v":{"anyOf":[{"type":"number","minimum":2.5},{"type":"string","maxLength":2}]},)"
       R"("w":{"type":"number","maximum":0.5}},"required":["v"],"additionalProperties":false})",
       {{R"({"v": 2.5})", true}, {R"({"v": 2.4})", false}, {R"({"v": "ab"})", true}, {R"({"v": 3, "w": 0.5})", true},
        {R"({"v": 3, "w": 0.6})", false}}},
      {R"({"$defs":{"P":{"type":"number","minimum":0,"maximum":1}},"type":"object","properties":{"a":{"$ref":"#/$defs/P"},)"
       R"("b":{"$ref":"#/$defs/P"}},"required":["a","b"],"additionalProperties":false})",
       {{R"({"a": 0, "b": 1})", true}, {R"({"a": 0, "b": 2})", false}, {R"({"a": 1.5, "b": 1})", false}}},
      {R"({"type":"object","properties":{"n":{"type":"integer","minimum":0.5,"maximum":3.5},)"
       R"("m":{"type":"integer","multipleOf":5,"minimum":-10,"maximum":10}},"required":["n","m"],)"
       R"("additionalProperties":false})",
       {{R"({"n": 1, "m": -10})", true}, {R"({"n": 0, "m": 5})", false}, {R"({"n": 3, "m": 3})", false},
        {R"({"n": 4, "m": 0})", false}, {R"({"n": 2, "m": 10})", true}}},
      {R"({"type":"object","properties":{"minimum":{"type":"number","exclusiveMinimum":true,"minimum":1}},)"
       R"("required":["minimum"],"additionalProperties":false})",
       {{R"({"minimum": 1})", false}, {R"({"minimum": 1.5})", true}}},
      {R"({"type":"object","properties":{"d":{"type":"number","multipleOf":1,"maximum":2}},"required":["d"],)"
       R"("additionalProperties":false})",
       {{R"({"d": 2})", true}, {R"({"d": 1.5})", false}, {R"({"d": -40})", true}}},
  };
  for (const auto& [schema, docs] : cases) {
    INFO("schema " << schema);
    Result<std::shared_ptr<const CompiledConstraint>> c = compile_schema(schema);
    REQUIRE(c.is_ok());
    for (const auto& [doc, want] : docs) {
      INFO("document " << doc);
      CHECK(schema_accepts(*c, doc) == want);
    }
  }
}

TEST_CASE("ranges the grammar cannot enforce are refused naming the keyword and where it is", "[unit]") {
  auto message = [](const std::string& schema) {
    Result<std::shared_ptr<const CompiledConstraint>> c = compile_schema(schema);
    REQUIRE_FALSE(c.is_ok());
    return c.status().message();
  };
  auto has = [](const std::string& msg, const std::string& part) {
    INFO(msg);
    CHECK(msg.find(part) != std::string::npos);
  };
  const std::string m1 = message(R"({"type":"object","properties":{"x":{"type":"number","multipleOf":0.3}}})");
  has(m1, "multipleOf");
  has(m1, "/properties/x");
  has(message(R"({"type":"integer","multipleOf":100000})"), "multipleOf");
  has(message(R"({"type":"number","minimum":2,"maximum":1.5})"), "no number lies in the range");
  has(message(R"({"type":"array","items":{"type":"number","minimum":"1"}})"), "'minimum' at /items");
  has(message(R"({"type":"number","multipleOf":0.01,"minimum":0.001,"maximum":0.009})"), "no number");
}

TEST_CASE("schemas without ranges XGrammar misses are left to it unchanged", "[unit]") {
  for (const char* s : {R"({"type":"integer","minimum":0,"maximum":9})", R"({"type":"number"})",
                        R"({"type":"object","properties":{"minimum":{"type":"string"}}})",
                        R"({"enum":[1.5,2.5],"type":"number","minimum":2})", "not json"}) {
    INFO(s);
    const SchemaNumberRanges r = extract_number_ranges(s);
    CHECK(r.ranges.empty());
    CHECK(r.schema == s);
  }
  const SchemaNumberRanges r = extract_number_ranges(R"({"type":["number","null"],"minimum":0})");
  REQUIRE(r.ranges.size() == 1);
  const nlohmann::json rewritten = nlohmann::json::parse(r.schema);
  CHECK(rewritten["anyOf"][0]["const"] == r.ranges[0].first);
  CHECK(rewritten["anyOf"][1] == nlohmann::json{{"type", "null"}});
}

// Not a check: the cost of the range rules on the real 151k-token Qwen3 vocabulary (bench/RESULTS.md). Run with
// `test_number_range "[bench]"`.
TEST_CASE("number ranges: compile and mask time on the Qwen3 vocabulary", "[.][bench]") {
  Result<Tokenizer> t = Tokenizer::load(VOLTSERVE_BINARY_DIR "/fixtures/tokenizers/qwen3");
  REQUIRE(t.is_ok());
  const std::vector<int32_t> stops{*t.value().token_id("<|im_end|>")};
  const std::string ranged =
      R"({"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},)"
      R"("price":{"type":"number","minimum":0.01,"maximum":1000,"multipleOf":0.01},)"
      R"("temp":{"type":"number","minimum":-273.15,"maximum":1000},"tiny":{"type":"number","minimum":-0.001,)"
      R"("maximum":0.001},"opt":{"type":"number","exclusiveMaximum":-0.5,"minimum":-2}},)"
      R"("required":["p","price","temp","tiny","opt"],"additionalProperties":false})";
  nlohmann::ordered_json plain = nlohmann::ordered_json::parse(ranged);  // ordered: the properties keep their order
  for (auto& [k, v] : plain["properties"].items()) v = {{"type", "number"}};
  for (const auto& [name, schema] : {std::pair{"plain numbers", plain.dump()}, std::pair{"ranged numbers", ranged}}) {
    Result<std::unique_ptr<GrammarCompiler>> c = GrammarCompiler::create(t.value(), t.value().vocab_size(), stops);
    REQUIRE(c.is_ok());
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kJsonSchema;
    spec.text = schema;
    spec.any_whitespace = false;
    const auto t0 = std::chrono::steady_clock::now();
    Result<std::shared_ptr<const CompiledConstraint>> compiled = c.value()->compile(spec);
    const auto t1 = std::chrono::steady_clock::now();
    REQUIRE(compiled.is_ok());
    // Mask time along one fixed valid document, token by token.
    const std::string doc = R"({"p": 0.123456789, "price": 999.99, "temp": -273.15, "tiny": -0.000999, "opt": -1.999})";
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*compiled);
    std::vector<uint32_t> mask(static_cast<size_t>((t.value().vocab_size() + 31) / 32));
    Result<std::vector<int32_t>> encoded = t.value().encode(doc);
    REQUIRE(encoded.is_ok());
    const std::vector<int32_t>& ids = encoded.value();
    const auto t2 = std::chrono::steady_clock::now();
    std::string prefix;
    for (int32_t id : ids) {
      m->fill_mask(mask.data());
      INFO(name << ": after '" << prefix << "'");
      REQUIRE(m->accept(id));
      prefix += t.value().decode(std::vector<int32_t>{id});
    }
    const auto t3 = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    WARN(name << ": compile " << ms(t0, t1) << " ms, mask " << 1000.0 * ms(t2, t3) / static_cast<double>(ids.size())
              << " us per token over " << ids.size() << " tokens");
  }
}

}  // namespace
}  // namespace voltserve
