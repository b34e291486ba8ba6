// A fixed set of choices (vLLM's `choice`) as an EBNF grammar whose root is exactly one of them. Pure string work,
// tested by tests/grammar/choice_grammar_test.cpp.
#pragma once

#include <string>
#include <vector>

namespace voltserve {

// root ::= "a" | "b" | ...; each choice an EBNF string literal (quotes, backslashes and control bytes escaped).
std::string choice_grammar(const std::vector<std::string>& choices);
// `text` as an EBNF string literal, quotes included.
std::string ebnf_literal(const std::string& text);

}  // namespace voltserve
