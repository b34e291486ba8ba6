// JSON strings with minLength / maxLength, rewritten in the EBNF XGrammar prints for a schema. XGrammar 0.1.34
// writes such a string as `"\"" c{m, n} "\""` with c ::= [^"\\\r\n]: a repetition that its token-mask cache cannot
// classify, so every step inside the string checks most of the vocabulary at run time (on a 151k vocabulary about
// 0.5 ms per token on average and 10-17 ms at the string's start: longer than a 27B decode step, bench/RESULTS.md),
// and a class that lets raw control characters (tab, U+0000-U+001F) into the JSON and escapes out of it. The
// rewrite spells the same lengths as a chain of rules, one per number of characters still allowed, each written
// like XGrammar's own free string (a character, or a backslash escape counted as one character, then the next rule;
// the closing quote where the length allows it), which the cache handles: tens of microseconds per token.
// Repetitions of more than kMaxUnrolledStringLength are left as XGrammar wrote them. Tested by
// tests/grammar/bounded_strings_test.cpp.
#pragma once

#include <string>

namespace voltserve {

inline constexpr int kMaxUnrolledStringLength = 64;

struct UnrolledStrings {
  std::string ebnf;  // the grammar, with each bounded string rewritten
  int n_rewritten = 0;
};

UnrolledStrings unroll_bounded_strings(const std::string& ebnf);

}  // namespace voltserve
