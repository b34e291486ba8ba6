// voltserve/grammar.h over XGrammar 0.1.34 (scripts/xgrammar.sh): the tokenizer's vocabulary as raw bytes per id,
// compiled grammars cached by their spec, one GrammarMatcher per sequence. XGrammar reports bad input by throwing;
// every call into it is caught here and becomes a Status. kTriggered becomes an XGrammar structural tag
// (triggered_tags), its parts' middles printed to EBNF; ranged numbers in a schema are our rules
// (schema_number_ranges.h). Tested by tests/grammar/grammar_test.cpp.
#include <dlpack/dlpack.h>

#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <xgrammar/xgrammar.h>

#include "grammar/bounded_strings.h"
#include "grammar/choice_grammar.h"
#include "grammar/schema_number_ranges.h"
#include "voltserve/grammar.h"

namespace voltserve {
namespace {

constexpr size_t kMaxCached = 256;  // compiled grammars kept (least recently used dropped first)

// Tokens without raw control bytes (< 0x20; `keep_ws`: except \t \n \r), as a bitmask over the vocabulary.
std::shared_ptr<const std::vector<uint32_t>> control_free(const std::vector<std::string>& vocab, int32_t vocab_size,
                                                          bool keep_ws) {
  auto mask = std::make_shared<std::vector<uint32_t>>(static_cast<size_t>((vocab_size + 31) / 32), 0u);
  for (int32_t id = 0; id < vocab_size; ++id) {
    bool ok = true;
    if (id < static_cast<int32_t>(vocab.size())) {
      for (unsigned char c : vocab[static_cast<size_t>(id)]) {
        if (c < 0x20 && !(keep_ws && (c == '\t' || c == '\n' || c == '\r'))) ok = false;
      }
    }
    if (ok) (*mask)[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
  }
  return mask;
}

struct XgCompiled final : CompiledConstraint {
  XgCompiled(xgrammar::CompiledGrammar g, std::string what_in, int32_t vocab_size_in,
             std::shared_ptr<const std::vector<uint32_t>> and_mask_in)
      : grammar(std::move(g)), what(std::move(what_in)), vocab_size_(vocab_size_in), and_mask(std::move(and_mask_in)) {}
  std::string describe() const override { return what; }
  int32_t vocab_size() const override { return vocab_size_; }
  xgrammar::CompiledGrammar grammar;
  std::string what;
  int32_t vocab_size_;
  // ANDed into every mask (null: none). JSON never holds a raw control byte, but XGrammar 0.1.34 (and 0.2.9) lets
  // length-bounded strings ([^"\\\r\n]{m,n}) take them, which would make the output invalid JSON.
  std::shared_ptr<const std::vector<uint32_t>> and_mask;
};

class XgMatcher final : public ConstraintMatcher {
 public:
  XgMatcher(const xgrammar::CompiledGrammar& g, int32_t vocab_size, std::shared_ptr<const std::vector<uint32_t>> and_mask)
      : matcher_(g), vocab_size_(vocab_size), words_((vocab_size + 31) / 32), and_mask_(std::move(and_mask)) {}
  void fill_mask(uint32_t* mask) override {
    int64_t shape[1] = {words_};
    DLTensor t{};
    t.data = mask;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLInt, 32, 1};
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    matcher_.FillNextTokenBitmask(&t, 0);
    if (and_mask_) {
      for (int32_t w = 0; w < words_; ++w) mask[w] &= (*and_mask_)[static_cast<size_t>(w)];
    }
  }
  bool accept(int32_t token) override {
    if (token < 0 || token >= vocab_size_) return false;
    try {
      return matcher_.AcceptToken(token);
    } catch (const std::exception&) {
      return false;  // accepting after termination
    }
  }
  void rollback(int32_t n) override {
    if (n > 0) matcher_.Rollback(n);
  }
  bool terminated() const override { return matcher_.IsTerminated(); }

 private:
  xgrammar::GrammarMatcher matcher_;
  int32_t vocab_size_;
  int32_t words_;
  std::shared_ptr<const std::vector<uint32_t>> and_mask_;
};

// The cache key: every field of the spec, each string length-prefixed (no two specs share a key).
void append_key(const ConstraintSpec& s, std::string& key) {
  key.append(std::to_string(static_cast<int>(s.kind)));
  key.push_back(s.strict ? 's' : 'n');
  key.push_back(s.any_whitespace ? 'w' : 'c');
  key.push_back(s.single ? '1' : '*');
  auto add = [&](const std::string& text) {
    key.append(std::to_string(text.size()));
    key.push_back(':');
    key.append(text);
  };
  add(s.text);
  for (const std::string& c : s.choices) add(c);
  key.push_back('[');
  for (const ConstraintSpec& part : s.parts) {
    key.push_back('|');
    append_key(part, key);
  }
  key.push_back(']');
}

std::string spec_key(const ConstraintSpec& s) {
  std::string key;
  append_key(s, key);
  return key;
}

const char* kind_name(ConstraintSpec::Kind k) {
  switch (k) {
    case ConstraintSpec::Kind::kJsonSchema: return "json_schema";
    case ConstraintSpec::Kind::kJsonObject: return "json_object";
    case ConstraintSpec::Kind::kRegex: return "regex";
    case ConstraintSpec::Kind::kGrammar: return "grammar";
    case ConstraintSpec::Kind::kChoice: return "choice";
    case ConstraintSpec::Kind::kLiteral: return "literal";
    case ConstraintSpec::Kind::kSequence: return "sequence";
    case ConstraintSpec::Kind::kAlternatives: return "alternatives";
    case ConstraintSpec::Kind::kTriggered: return "triggered";
  }
  return "constraint";
}

class XgCompiler final : public GrammarCompiler {
 public:
  XgCompiler(xgrammar::TokenizerInfo info, int32_t vocab_size, const std::vector<std::string>& vocab)
      : compiler_(info, /*max_threads=*/2, /*cache_enabled=*/false),
        vocab_size_(vocab_size),
        json_compact_(control_free(vocab, vocab_size, false)),
        json_ws_(control_free(vocab, vocab_size, true)) {}

  Result<std::shared_ptr<const CompiledConstraint>> compile(const ConstraintSpec& spec) override {
    const std::string key = spec_key(spec);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.second);
        return it->second.first;
      }
    }
    std::shared_ptr<const CompiledConstraint> compiled;
    try {
      const bool json = spec.kind == ConstraintSpec::Kind::kJsonSchema || spec.kind == ConstraintSpec::Kind::kJsonObject;
      // Tool calls hold JSON inside a larger text that needs \n: no raw control byte but whitespace.
      std::shared_ptr<const std::vector<uint32_t>> and_mask =
          json ? (spec.any_whitespace ? json_ws_ : json_compact_) : (holds_json(spec) ? json_ws_ : nullptr);
      compiled = std::make_shared<XgCompiled>(compile_uncached(spec), kind_name(spec.kind), vocab_size_,
                                              std::move(and_mask));
    } catch (const std::exception& e) {
      return invalid_argument(std::string(kind_name(spec.kind)) + ": " + e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.find(key) == cache_.end()) {
      lru_.push_front(key);
      cache_.emplace(key, std::make_pair(compiled, lru_.begin()));
      if (cache_.size() > kMaxCached) {
        cache_.erase(lru_.back());
        lru_.pop_back();
      }
    }
    return compiled;
  }
  int32_t vocab_size() const override { return vocab_size_; }

 private:
  xgrammar::CompiledGrammar compile_uncached(const ConstraintSpec& s) { return compiler_.CompileGrammar(grammar(s)); }

  static xgrammar::Grammar grammar(const ConstraintSpec& s) {
    switch (s.kind) {
      case ConstraintSpec::Kind::kJsonSchema:
        return json_schema(s);
      case ConstraintSpec::Kind::kJsonObject:
        return xgrammar::Grammar::FromJSONSchema(R"({"type": "object"})", s.any_whitespace, std::nullopt,
                                                 compact_separators(s), /*strict_mode=*/false);
      case ConstraintSpec::Kind::kRegex:
        return xgrammar::Grammar::FromRegex(s.text);
      case ConstraintSpec::Kind::kGrammar:
        return xgrammar::Grammar::FromEBNF(s.text, "root");
      case ConstraintSpec::Kind::kChoice:
        if (s.choices.empty()) throw std::invalid_argument("no choices");
        return xgrammar::Grammar::FromEBNF(choice_grammar(s.choices), "root");
      case ConstraintSpec::Kind::kLiteral:
        return xgrammar::Grammar::FromEBNF("root ::= " + ebnf_literal(s.text), "root");
      case ConstraintSpec::Kind::kSequence:
      case ConstraintSpec::Kind::kAlternatives: {
        if (s.parts.empty()) throw std::invalid_argument("no parts");
        std::vector<xgrammar::Grammar> parts;
        for (const ConstraintSpec& p : s.parts) parts.push_back(grammar(p));
        if (parts.size() == 1) return parts.front();
        return s.kind == ConstraintSpec::Kind::kSequence ? xgrammar::Grammar::Concat(parts)
                                                         : xgrammar::Grammar::Union(parts);
      }
      case ConstraintSpec::Kind::kTriggered:
        return triggered(s);
    }
    throw std::invalid_argument("unknown constraint kind");
  }
  // A schema whose ranged numbers XGrammar would not enforce is converted with placeholders in their place, and its
  // EBNF compiled with our range rules substituted (schema_number_ranges.h); strings with a length bound are
  // rewritten in that EBNF too (bounded_strings.h).
  static xgrammar::Grammar json_schema(const ConstraintSpec& s) {
    const SchemaNumberRanges ranges = extract_number_ranges(s.text);
    xgrammar::Grammar g = xgrammar::Grammar::FromJSONSchema(ranges.schema, s.any_whitespace, std::nullopt,
                                                            compact_separators(s), s.strict);
    UnrolledStrings strings = unroll_bounded_strings(g.ToString());
    if (ranges.ranges.empty() && strings.n_rewritten == 0) return g;
    const std::string ebnf = ranges.ranges.empty() ? std::move(strings.ebnf)
                                                   : substitute_number_ranges(strings.ebnf, ranges);
    return xgrammar::Grammar::FromEBNF(ebnf, "root");
  }
  static bool holds_json(const ConstraintSpec& s) {
    if (s.kind == ConstraintSpec::Kind::kJsonSchema || s.kind == ConstraintSpec::Kind::kJsonObject) return true;
    for (const ConstraintSpec& p : s.parts) {
      if (holds_json(p)) return true;
    }
    return false;
  }

  // Free text with tags: XGrammar's triggered_tags structural tag. Each part's opening and closing literals are the
  // tag's begin and end; what lies between is compiled as usual and handed over as EBNF (the structural tag's
  // "grammar" content), so it is the same grammar a forced call gets.
  static xgrammar::Grammar triggered(const ConstraintSpec& s) {
    using Kind = ConstraintSpec::Kind;
    if (s.text.empty()) throw std::invalid_argument("a triggered constraint needs a trigger");
    if (s.parts.empty()) throw std::invalid_argument("a triggered constraint needs at least one part");
    nlohmann::json tags = nlohmann::json::array();
    for (const ConstraintSpec& p : s.parts) {
      if (p.kind != Kind::kSequence || p.parts.size() < 2 || p.parts.front().kind != Kind::kLiteral ||
          p.parts.back().kind != Kind::kLiteral || !p.parts.front().text.starts_with(s.text)) {
        throw std::invalid_argument("each part of a triggered constraint must be a sequence from a literal opening "
                                    "that begins with the trigger to a literal closing");
      }
      ConstraintSpec middle;
      middle.kind = Kind::kSequence;
      middle.parts.assign(p.parts.begin() + 1, p.parts.end() - 1);
      std::ostringstream ebnf;
      if (middle.parts.empty()) {
        ebnf << "root ::= \"\"";
      } else {
        ebnf << grammar(middle);
      }
      tags.push_back({{"type", "tag"},
                      {"begin", p.parts.front().text},
                      {"content", {{"type", "grammar"}, {"grammar", ebnf.str()}}},
                      {"end", p.parts.back().text}});
    }
    const nlohmann::json tag = {{"type", "structural_tag"},
                                {"format",
                                 {{"type", "triggered_tags"},
                                  {"triggers", nlohmann::json::array({s.text})},
                                  {"tags", std::move(tags)},
                                  {"at_least_one", false},
                                  {"stop_after_first", s.single}}}};
    std::variant<xgrammar::Grammar, xgrammar::StructuralTagError> g = xgrammar::Grammar::FromStructuralTag(tag.dump());
    if (auto* ok = std::get_if<xgrammar::Grammar>(&g)) return *ok;
    throw std::invalid_argument(std::visit([](const auto& e) { return std::string(e.what()); },
                                           std::get<xgrammar::StructuralTagError>(g)));
  }
  // The compact form (no whitespace between JSON tokens) uses ", " and ": " as OpenAI's JSON mode output does.
  static std::optional<std::pair<std::string, std::string>> compact_separators(const ConstraintSpec& s) {
    if (s.any_whitespace) return std::nullopt;
    return std::make_pair(std::string(", "), std::string(": "));
  }

  xgrammar::GrammarCompiler compiler_;
  int32_t vocab_size_;
  std::shared_ptr<const std::vector<uint32_t>> json_compact_, json_ws_;
  std::mutex mu_;
  std::list<std::string> lru_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledConstraint>, std::list<std::string>::iterator>>
      cache_;
};

}  // namespace

Result<std::unique_ptr<GrammarCompiler>> GrammarCompiler::create(const Tokenizer& tokenizer, int32_t vocab_size,
                                                                 std::vector<int32_t> stop_ids) {
  if (vocab_size < tokenizer.vocab_size()) {
    return invalid_argument("grammar: the model's vocabulary (" + std::to_string(vocab_size) +
                            ") is smaller than the tokenizer's (" + std::to_string(tokenizer.vocab_size()) + ")");
  }
  // Raw bytes per id; special added tokens (and ids that are no token) are empty, which XGrammar treats as special:
  // never allowed inside a constraint, only as stop tokens once it is complete.
  std::vector<std::string> vocab(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) continue;
    vocab[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  }
  std::erase_if(stop_ids, [&](int32_t id) { return id < 0 || id >= vocab_size; });
  try {
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, vocab_size, stop_ids, false);
    return std::unique_ptr<GrammarCompiler>(new XgCompiler(std::move(info), vocab_size, vocab));
  } catch (const std::exception& e) {
    return invalid_argument(std::string("grammar: the vocabulary: ") + e.what());
  }
}

std::unique_ptr<ConstraintMatcher> make_matcher(const std::shared_ptr<const CompiledConstraint>& constraint) {
  const auto* c = dynamic_cast<const XgCompiled*>(constraint.get());
  if (c == nullptr) return nullptr;
  return std::make_unique<XgMatcher>(c->grammar, c->vocab_size_, c->and_mask);
}

}  // namespace voltserve
