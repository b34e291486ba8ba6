// The `Split` pre-tokenizer's regex, run with PCRE2 (UTF + UCP, JIT). tokenizer.json patterns are written for
// Oniguruma, which HF `tokenizers` uses; translate_hf_regex() rewrites the few constructs whose meaning differs in
// PCRE2 (\s, \S: Oniguruma means exactly Unicode White_Space, PCRE2 adds U+180E; \p{N}: Oniguruma's newer
// Unicode tables know the Kaktovik numerals) and rejects Oniguruma-only syntax. Tested in tests/tokenizer/test_pretokenize_regex.cpp and by the differential tests against HF.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "voltserve/status.h"

namespace voltserve::tokenizer {

// Oniguruma pattern (as in tokenizer.json) -> equivalent PCRE2 pattern, or kUnimplemented naming the construct.
Result<std::string> translate_hf_regex(std::string_view pattern);

// A compiled pattern that splits text the way `Split(pattern, behavior="isolated")` does: every match is a piece
// and every stretch between matches is a piece; empty pieces are dropped.
class RegexSplitter {
 public:
  // Compiles an already translated PCRE2 pattern; kInvalidArgument with PCRE2's message and offset on failure.
  static Result<RegexSplitter> compile(const std::string& pcre2_pattern);

  // Appends the [begin, end) byte ranges of the pieces of `text` (valid UTF-8) to `pieces`, offset by `base`.
  // Fails only if PCRE2 does (e.g. its JIT stack limit on pathological input).
  Status split(std::string_view text, size_t base, std::vector<std::pair<size_t, size_t>>& pieces) const;

 private:
  struct Code;
  explicit RegexSplitter(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
  std::shared_ptr<const Code> code_;
};

}  // namespace voltserve::tokenizer
