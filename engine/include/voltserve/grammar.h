// Structured output: a constraint on what a request may generate (a JSON schema, any JSON, a regex, an EBNF grammar,
// a fixed set of choices), compiled once against the model's vocabulary and handed to the engine with the request;
// the engine keeps one matcher per sequence and masks the sampler with it. Implementation over XGrammar in
// engine/grammar/ (no XGrammar header leaks here). Tested by tests/grammar/grammar_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "voltserve/status.h"
#include "voltserve/tokenizer.h"

namespace voltserve {

struct ConstraintSpec {
  enum class Kind {
    kJsonSchema,  // text: a JSON schema (an object); any_whitespace / strict below
    kJsonObject,  // any JSON value whose top level is an object (OpenAI's json_object)
    kRegex,       // text: a regular expression the whole output matches
    kGrammar,     // text: an EBNF grammar (XGrammar's dialect, which reads GBNF), root rule `root`
    kChoice,      // choices: the output is exactly one of them
    kLiteral,     // text, verbatim (the fixed parts of a tool call)
    kSequence,    // parts, one after the other
    kAlternatives,  // exactly one of parts
    // Free text in which the trigger `text` (e.g. "<tool_call>") may start one of `parts`, each a kSequence whose
    // first part is the literal opening (it begins with the trigger) and whose last part the literal closing; free
    // text again after it, ending anywhere outside a part. Tool calls under tool_choice "auto" with strict tools.
    kTriggered,
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
  std::vector<ConstraintSpec> parts;  // kSequence / kAlternatives
  // kJsonSchema: objects take no properties beyond the schema's unless it allows them (OpenAI strict semantics).
  bool strict = true;
  // Whitespace between JSON tokens: any (true) or the compact form (false).
  bool any_whitespace = true;
  // kTriggered: at most one part, and the output ends after it (tool calls with parallel_tool_calls false).
  bool single = false;
};

// A constraint compiled for one vocabulary; immutable and shared by every sequence that uses it.
class CompiledConstraint {
 public:
  virtual ~CompiledConstraint() = default;
  virtual std::string describe() const = 0;  // "json_schema", "regex", ... for logs
  virtual int32_t vocab_size() const = 0;    // the vocabulary it was compiled for (the engine checks it)
};

// Per-sequence state of a constraint (what the engine holds per sequence; engine thread only).
class ConstraintMatcher {
 public:
  virtual ~ConstraintMatcher() = default;
  // Fills `mask` ((vocab_size + 31) / 32 words) with the tokens the constraint allows next.
  virtual void fill_mask(uint32_t* mask) = 0;
  // Advances over a sampled token; false when the constraint does not allow it (a bug or a token forced past it).
  virtual bool accept(int32_t token) = 0;
  // Undoes the last n accepted tokens (speculative drafts that were rejected).
  virtual void rollback(int32_t n) = 0;
  // The constraint is complete and accepted a stop token: nothing more may be generated.
  virtual bool terminated() const = 0;
};

class GrammarCompiler {
 public:
  virtual ~GrammarCompiler() = default;
  // The vocabulary: each id's bytes from `tokenizer` (special added tokens are never allowed inside a constraint),
  // `vocab_size` the model's lm_head rows (ids past the tokenizer's are padding), `stop_ids` the tokens that end a
  // generation (allowed once the constraint is complete).
  static Result<std::unique_ptr<GrammarCompiler>> create(const Tokenizer& tokenizer, int32_t vocab_size,
                                                         std::vector<int32_t> stop_ids);
  // Compiles (or returns the cached result for an identical spec). kInvalidArgument with the grammar engine's
  // message when the schema / regex / grammar is malformed or unsupported. Thread-safe.
  virtual Result<std::shared_ptr<const CompiledConstraint>> compile(const ConstraintSpec& spec) = 0;
  virtual int32_t vocab_size() const = 0;
};

// A fresh matcher for one sequence.
std::unique_ptr<ConstraintMatcher> make_matcher(const std::shared_ptr<const CompiledConstraint>& constraint);

}  // namespace voltserve
