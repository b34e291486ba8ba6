// engine/grammar/ (voltserve/grammar.h over XGrammar) with the CPU reference sampler: random logits, masked by the
// matcher, always give output the constraint accepts; without the mask the same draws do not (so the checks can
// fail); bad specs are kInvalidArgument naming the problem; identical specs share one compiled grammar; triggered
// tool calls (tool_choice auto) are free text around calls that each follow their tool's schema.
#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/choice_grammar.h"
#include "sampling/sampling.h"
#include "voltserve/grammar.h"
#include "voltserve/tokenizer.h"

namespace voltserve {
namespace {

namespace ks = kernels::sampling;

const char* kModelDir = VOLTSERVE_SOURCE_DIR "/tests/fixtures/models/tiny-chat";
constexpr int32_t kVocab = 3033;  // the fixture's lm_head rows (config.json vocab_size)

struct Fixture {
  Tokenizer tok;
  std::vector<int32_t> stops;
  std::unique_ptr<GrammarCompiler> compiler;
};

Fixture& fixture() {
  static Fixture f = [] {
    Result<Tokenizer> t = Tokenizer::load(kModelDir);
    REQUIRE(t.is_ok());
    Fixture out{std::move(t).value(), {}, nullptr};
    out.stops.push_back(*out.tok.token_id(out.tok.eos_token()));
    Result<std::unique_ptr<GrammarCompiler>> c = GrammarCompiler::create(out.tok, kVocab, out.stops);
    REQUIRE(c.is_ok());
    out.compiler = std::move(c).value();
    return out;
  }();
  return f;
}

// Samples up to max_tokens from random logits (temperature 1), masked by `matcher` when `masked`. Returns the text
// and whether the matcher terminated (accepted a stop token once complete).
std::pair<std::string, bool> generate(ConstraintMatcher& matcher, bool masked, uint64_t seed, int max_tokens) {
  Fixture& f = fixture();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(kVocab);
  std::vector<uint32_t> mask((kVocab + 31) / 32);
  std::vector<int32_t> ids;
  for (int step = 0; step < max_tokens; ++step) {
    for (float& x : logits) x = noise(rng);
    ks::RowParams row;
    row.flags = ks::kSample;
    row.seed = seed;
    row.draw_index = static_cast<uint64_t>(step);
    if (masked) {
      matcher.fill_mask(mask.data());
      row.mask_row = 0;
    }
    int32_t token = -1, status = 0, nan_index = -1;
    ks::RefArgs a;
    a.logits = logits.data();
    a.logits_stride = kVocab;
    a.n_rows = 1;
    a.n_vocab_real = kVocab;
    a.rows = &row;
    a.masks = masked ? mask.data() : nullptr;
    a.mask_words = static_cast<int32_t>(mask.size());
    a.out.token = &token;
    a.out.status = &status;
    a.out.nan_index = &nan_index;
    ks::sample_ref(a);
    REQUIRE(status == ks::kRowOk);
    if (std::find(f.stops.begin(), f.stops.end(), token) != f.stops.end()) {
      return {f.tok.decode(ids), masked ? matcher.accept(token) && matcher.terminated() : false};
    }
    if (masked) REQUIRE(matcher.accept(token));
    ids.push_back(token);
  }
  return {f.tok.decode(ids), false};
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

ConstraintSpec schema_spec(const std::string& schema) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = schema;
  s.any_whitespace = false;
  return s;
}

TEST_CASE("masked random sampling always yields JSON that matches the schema", "[unit]") {
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":1,)"
      R"("maximum":9},"tag":{"enum":["a","b"]}},"required":["name","n","tag"],"additionalProperties":false})";
  Result<std::shared_ptr<const CompiledConstraint>> c = fixture().compiler->compile(schema_spec(schema));
  REQUIRE(c.is_ok());
  int n_done = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*c);
    REQUIRE(m != nullptr);
    auto [text, done] = generate(*m, /*masked=*/true, seed, 300);
    if (!done) continue;
    ++n_done;
    std::string hex;
    for (unsigned char ch : text) hex += std::to_string(ch) + " ";
    INFO(text << " bytes: " << hex);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.size() == 3);
    REQUIRE(j["name"].is_string());
    CHECK(code_points(j["name"].get<std::string>()) <= 8);  // maxLength counts characters
    REQUIRE(j["n"].is_number_integer());
    CHECK(j["n"].get<int>() >= 1);
    CHECK(j["n"].get<int>() <= 9);
    CHECK((j["tag"] == "a" || j["tag"] == "b"));
  }
  CHECK(n_done >= 6);  // the constraint also makes noise end
}

TEST_CASE("the same random draws without the mask are not valid JSON", "[unit]") {
  Result<std::shared_ptr<const CompiledConstraint>> c =
      fixture().compiler->compile(schema_spec(R"({"type":"object","properties":{"a":{"type":"integer"}}})"));
  REQUIRE(c.is_ok());
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*c);
    auto [text, done] = generate(*m, /*masked=*/false, seed, 40);
    CHECK_FALSE(nlohmann::json::parse(text, nullptr, false).is_object());
  }
}

TEST_CASE("regex and choice constraints", "[unit]") {
  ConstraintSpec re;
  re.kind = ConstraintSpec::Kind::kRegex;
  re.text = "[a-c]{2}-[0-9]{3}";
  ConstraintSpec choice;
  choice.kind = ConstraintSpec::Kind::kChoice;
  choice.choices = {"yes", "no \"quoted\"", "maybe\\"};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto r = fixture().compiler->compile(re);
    REQUIRE(r.is_ok());
    auto m = make_matcher(*r);
    auto [text, done] = generate(*m, true, seed, 50);
    CHECK(done);
    CHECK(std::regex_match(text, std::regex("[a-c]{2}-[0-9]{3}")));
    auto ch = fixture().compiler->compile(choice);
    REQUIRE(ch.is_ok());
    auto mc = make_matcher(*ch);
    auto [ctext, cdone] = generate(*mc, true, seed, 50);
    CHECK(cdone);
    CHECK((ctext == "yes" || ctext == "no \"quoted\"" || ctext == "maybe\\"));
  }
}

// A uniformly random allowed token (the mask alone decides what may come next).
int32_t random_allowed(const std::vector<uint32_t>& mask, std::mt19937& rng) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < kVocab; ++id) {
    if (mask[static_cast<size_t>(id / 32)] >> (id % 32) & 1u) allowed.push_back(id);
  }
  REQUIRE_FALSE(allowed.empty());
  return allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
}

bool allows(const std::vector<uint32_t>& mask, int32_t id) {
  return mask[static_cast<size_t>(id / 32)] >> (id % 32) & 1u;
}

ConstraintSpec literal_spec(std::string text) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kLiteral;
  s.text = std::move(text);
  return s;
}

// Tool calls under tool_choice "auto": `<tool_call>` in free text starts a call of `f` whose arguments follow the
// schema (JSON form) or of `g` (any object).
ConstraintSpec triggered_calls(const std::string& schema) {
  ConstraintSpec f;
  f.kind = ConstraintSpec::Kind::kSequence;
  f.parts = {literal_spec("<tool_call>\n{\"name\": \"f\", \"arguments\": "), schema_spec(schema),
             literal_spec("}\n</tool_call>")};
  ConstraintSpec any;
  any.kind = ConstraintSpec::Kind::kJsonObject;
  any.any_whitespace = false;
  ConstraintSpec g;
  g.kind = ConstraintSpec::Kind::kSequence;
  g.parts = {literal_spec("<tool_call>\n{\"name\": \"g\", \"arguments\": "), any, literal_spec("}\n</tool_call>")};
  ConstraintSpec t;
  t.kind = ConstraintSpec::Kind::kTriggered;
  t.text = "<tool_call>";
  t.parts = {f, g};
  return t;
}

TEST_CASE("triggered tool calls: free text, then each opened call valid against its tool's schema", "[unit]") {
  Fixture& f = fixture();
  const std::string schema =
      R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},"s":{"type":"string",)"
      R"("maxLength":5}},"required":["n","s"],"additionalProperties":false})";
  Result<std::shared_ptr<const CompiledConstraint>> c = f.compiler->compile(triggered_calls(schema));
  INFO(c.status().message());
  REQUIRE(c.is_ok());
  const int32_t eos = f.stops.front();
  std::vector<uint32_t> mask((kVocab + 31) / 32);
  int n_calls = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*c);
    REQUIRE(m != nullptr);
    // Free text first: anything goes, the generation may end here.
    Result<std::vector<int32_t>> prefix = f.tok.encode("Sure, calling f. <tool_call>\n{\"name\": \"f\"", true);
    REQUIRE(prefix.is_ok());
    m->fill_mask(mask.data());
    CHECK(allows(mask, eos));
    for (int32_t id : *prefix) REQUIRE(m->accept(id));
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> ids;
    std::string text;
    for (int step = 0; step < 400 && text.find("</tool_call>") == std::string::npos; ++step) {
      m->fill_mask(mask.data());
      CHECK_FALSE(allows(mask, eos));  // inside the call the generation cannot end
      int32_t id = random_allowed(mask, rng);
      REQUIRE(m->accept(id));
      ids.push_back(id);
      text = f.tok.decode(ids);
    }
    INFO(text);
    const std::string head = ", \"arguments\": ";
    const std::string tail = "}\n</tool_call>";
    // The last token may run past the closing tag into free text.
    const size_t close = text.find(tail);
    REQUIRE(text.starts_with(head));
    REQUIRE(close != std::string::npos);
    nlohmann::json j = nlohmann::json::parse(text.substr(head.size(), close - head.size()), nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.size() == 2);
    REQUIRE(j["n"].is_number_integer());
    CHECK(j["n"].get<int>() >= 1);
    CHECK(j["n"].get<int>() <= 9);
    REQUIRE(j["s"].is_string());
    CHECK(code_points(j["s"].get<std::string>()) <= 5);
    ++n_calls;
    // Free text again after the call: it may end.
    m->fill_mask(mask.data());
    CHECK(allows(mask, eos));
    REQUIRE(m->accept(eos));
    CHECK(m->terminated());
  }
  CHECK(n_calls == 6);
}

TEST_CASE("triggered tool calls: a call may only name an offered tool", "[unit]") {
  Fixture& f = fixture();
  auto c = f.compiler->compile(triggered_calls(R"({"type":"object","properties":{"n":{"type":"integer"}}})"));
  REQUIRE(c.is_ok());
  Result<std::vector<int32_t>> ok = f.tok.encode("<tool_call>\n{\"name\": \"g\", \"arguments\": {}", true);
  Result<std::vector<int32_t>> bad = f.tok.encode("<tool_call>\n{\"name\": \"zz\"", true);
  REQUIRE(ok.is_ok());
  REQUIRE(bad.is_ok());
  std::unique_ptr<ConstraintMatcher> m = make_matcher(*c);
  for (int32_t id : *ok) CHECK(m->accept(id));
  std::unique_ptr<ConstraintMatcher> mb = make_matcher(*c);
  bool all = true;
  for (int32_t id : *bad) all = all && mb->accept(id);
  CHECK_FALSE(all);
  // single (parallel_tool_calls false): after one call only the end may follow.
  ConstraintSpec one = triggered_calls("{}");
  one.single = true;
  auto cs = f.compiler->compile(one);
  REQUIRE(cs.is_ok());
  CHECK(cs->get() != c->get());
  Result<std::vector<int32_t>> call =
      f.tok.encode("<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>", true);
  REQUIRE(call.is_ok());
  std::vector<uint32_t> mask((kVocab + 31) / 32);
  for (auto* compiled : {&c, &cs}) {
    std::unique_ptr<ConstraintMatcher> mm = make_matcher(**compiled);
    for (int32_t id : *call) REQUIRE(mm->accept(id));
    mm->fill_mask(mask.data());
    int n_allowed = 0;
    for (int32_t id = 0; id < kVocab; ++id) n_allowed += allows(mask, id) ? 1 : 0;
    CHECK(allows(mask, f.stops.front()));
    if (compiled == &cs) {
      CHECK(n_allowed == 1);  // only the end
    } else {
      CHECK(n_allowed > 1000);  // free text again
    }
  }
  ConstraintSpec wrong = triggered_calls("{}");
  wrong.parts[0].parts[0].text = "no trigger here";
  CHECK(f.compiler->compile(wrong).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("bad specs are invalid arguments that name the problem", "[unit]") {
  GrammarCompiler& g = *fixture().compiler;
  Result<std::shared_ptr<const CompiledConstraint>> r = g.compile(schema_spec("{not json"));
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("json_schema") != std::string::npos);
  ConstraintSpec re;
  re.kind = ConstraintSpec::Kind::kRegex;
  re.text = "(unclosed";
  CHECK(g.compile(re).status().code() == StatusCode::kInvalidArgument);
  ConstraintSpec gr;
  gr.kind = ConstraintSpec::Kind::kGrammar;
  gr.text = "root ::= missing_rule";
  CHECK(g.compile(gr).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("identical specs share one compiled grammar", "[unit]") {
  GrammarCompiler& g = *fixture().compiler;
  auto a = g.compile(schema_spec(R"({"type":"object","properties":{"k":{"type":"boolean"}}})"));
  auto b = g.compile(schema_spec(R"({"type":"object","properties":{"k":{"type":"boolean"}}})"));
  auto other = g.compile(schema_spec(R"({"type":"object","properties":{"k":{"type":"string"}}})"));
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  REQUIRE(other.is_ok());
  CHECK(a->get() == b->get());
  CHECK(a->get() != other->get());
}

TEST_CASE("a masked id is never sampled, even with a large logit and bias", "[unit]") {
  constexpr int32_t n = 64;
  std::vector<float> logits(n, 0.0f);
  logits[5] = 100.0f;  // the best id, masked out
  std::vector<uint32_t> mask(2, 0u);
  mask[0] = (1u << 7) | (1u << 9);
  mask[1] = 1u << (40 - 32);
  int32_t bias_id = 5;
  float bias_value = 50.0f;
  for (float temperature : {0.0f, 1.0f}) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      ks::RowParams row;
      row.flags = ks::kSample;
      row.temperature = temperature;
      row.seed = seed;
      row.mask_row = 0;
      row.bias_offset = 0;
      row.bias_count = 1;
      int32_t token = -1, status = 0, nan_index = -1;
      ks::RefArgs a;
      a.logits = logits.data();
      a.logits_stride = n;
      a.n_rows = 1;
      a.n_vocab_real = n;
      a.rows = &row;
      a.bias_ids = &bias_id;
      a.bias_values = &bias_value;
      a.masks = mask.data();
      a.mask_words = 2;
      a.out.token = &token;
      a.out.status = &status;
      a.out.nan_index = &nan_index;
      ks::sample_ref(a);
      CHECK((token == 7 || token == 9 || token == 40));
      if (temperature == 0.0f) CHECK(token == 7);  // greedy: all allowed logits tie at 0, lowest id wins
    }
  }
}

TEST_CASE("choice grammar literals are escaped", "[unit]") {
  CHECK(ebnf_literal("a\"b\\c\n") == "\"a\\\"b\\\\c\\x0a\"");
  CHECK(choice_grammar({"x", "y"}) == "root ::= \"x\" | \"y\"\n");
}

}  // namespace
}  // namespace voltserve

namespace voltserve {
namespace {

// Whether `matcher` takes the tokens of `text` one by one and then a stop token (the constraint complete).
bool accepts_whole(const std::shared_ptr<const CompiledConstraint>& c, const std::string& text) {
  Fixture& f = fixture();
  std::unique_ptr<ConstraintMatcher> m = make_matcher(c);
  Result<std::vector<int32_t>> ids = f.tok.encode(text, /*parse_special=*/false);
  REQUIRE(ids.is_ok());
  for (int32_t id : *ids) {
    if (!m->accept(id)) return false;
  }
  return m->accept(f.stops.front()) && m->terminated();
}

}  // namespace

TEST_CASE("strings with minLength / maxLength: lengths in characters, escapes counted as one, JSON only", "[unit]") {
  // The bounds are rewritten into rules of our own (grammar/bounded_strings.h): what they admit, exactly.
  const std::string schema =
      R"({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":5},)"
      R"("t":{"type":"string","minLength":3}},"required":["s","t"],"additionalProperties":false})";
  Result<std::shared_ptr<const CompiledConstraint>> c = fixture().compiler->compile(schema_spec(schema));
  REQUIRE(c.is_ok());
  auto doc = [](const std::string& s, const std::string& t) { return R"({"s": ")" + s + R"(", "t": ")" + t + R"("})"; };
  CHECK(accepts_whole(*c, doc("ab", "xyz")));
  CHECK(accepts_whole(*c, doc("abcde", "a long string, no upper bound")));
  CHECK(accepts_whole(*c, doc("\\n\\\"", "xyz")));        // two escapes: two characters
  CHECK(accepts_whole(*c, doc("\\u00e9\\t\\\\e", "xyz")));  // four characters in 14 bytes
  CHECK(accepts_whole(*c, doc("h\xc3\xa9llo", "xyz")));    // five code points in six bytes
  CHECK_FALSE(accepts_whole(*c, doc("a", "xyz")));          // shorter than minLength
  CHECK_FALSE(accepts_whole(*c, doc("abcdef", "xyz")));     // longer than maxLength
  CHECK_FALSE(accepts_whole(*c, doc("\\n\\n\\n\\n\\n\\n", "xyz")));
  CHECK_FALSE(accepts_whole(*c, doc("ab", "xy")));          // t below its minLength
  CHECK_FALSE(accepts_whole(*c, doc("a\tb", "xyz")));       // a raw control character is not JSON
  CHECK_FALSE(accepts_whole(*c, doc("a\\qb", "xyz")));      // nor an unknown escape
  // Random sampling under the mask: every finished output parses, with both lengths in bounds.
  int n_done = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*c);
    auto [text, done] = generate(*m, /*masked=*/true, seed, 300);
    if (!done) continue;
    ++n_done;
    INFO(text);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);  // rejects raw control characters
    REQUIRE(j.is_object());
    const size_t s = code_points(j["s"].get<std::string>());
    CHECK(s >= 2);
    CHECK(s <= 5);
    CHECK(code_points(j["t"].get<std::string>()) >= 3);
  }
  CHECK(n_done >= 4);
}

TEST_CASE("a string bound past the unrolled lengths is still enforced (XGrammar's own repetition)", "[unit]") {
  const std::string schema = R"({"type":"object","properties":{"s":{"type":"string","maxLength":100}},)"
                             R"("required":["s"],"additionalProperties":false})";
  Result<std::shared_ptr<const CompiledConstraint>> c = fixture().compiler->compile(schema_spec(schema));
  REQUIRE(c.is_ok());
  CHECK(accepts_whole(*c, R"({"s": ")" + std::string(100, 'a') + R"("})"));
  CHECK_FALSE(accepts_whole(*c, R"({"s": ")" + std::string(101, 'a') + R"("})"));
}

}  // namespace voltserve
