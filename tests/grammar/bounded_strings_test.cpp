// The bounded-string rewrite (engine/grammar/bounded_strings.h) on the EBNF XGrammar 0.1.34 prints: each
// `"\"" c{m, n} "\""` of its string-character rule becomes a chain of rules, one per count of characters still
// allowed; other repetitions (arrays), other character rules and bounds past kMaxUnrolledStringLength are left alone.
// What the rules admit is checked through XGrammar in grammar_test.cpp.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "grammar/bounded_strings.h"

using namespace voltserve;

namespace {

// XGrammar's print of {"s": {maxLength 3}, "u": {minLength 2}, "v": {maxLength 100}} in an array of at least 2.
const std::string kPrinted = R"(root_prop_0 ::= (("\"" root_prop_0_1{0, 3} "\"")))" "\n"
                             R"(root_prop_1 ::= (("\"" root_prop_1_1{2, -1} "\"")))" "\n"
                             R"(root_prop_2 ::= (("\"" root_prop_2_1{0, 100} "\"")))" "\n"
                             R"(root ::= (("[" root_item root_1{1, -1} "]")))" "\n"
                             R"(root_prop_0_1 ::= (([^\"\\\r\n])))" "\n"
                             R"(root_prop_1_1 ::= (([^\"\\\r\n])))" "\n"
                             R"(root_prop_2_1 ::= (([^\"\\\r\n])))" "\n"
                             R"(root_1 ::= (("," root_item)))" "\n";

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("bounded strings: XGrammar's repetitions become chains of rules", "[unit]") {
  const UnrolledStrings u = unroll_bounded_strings(kPrinted);
  CHECK(u.n_rewritten == 2);
  INFO(u.ebnf);
  // maxLength 3: the start rule, then one per remaining count down to the closing quote alone.
  CHECK(has(u.ebnf, R"(root_prop_0 ::= (("\"" vs_string_0_3)))"));
  CHECK(has(u.ebnf, R"(vs_string_0_3 ::= (("\"") | ([^\0-\x1f\"\\] vs_string_0_2) | ("\\" vs_json_escape vs_string_0_2)))"));
  CHECK(has(u.ebnf, R"(vs_string_0_1 ::= (("\"") | ([^\0-\x1f\"\\] vs_string_0_0) | ("\\" vs_json_escape vs_string_0_0)))"));
  CHECK(has(u.ebnf, R"(vs_string_0_0 ::= (("\"")))"));
  // minLength 2 only: two characters that must come, then a loop that may close.
  CHECK(has(u.ebnf, R"(root_prop_1 ::= (("\"" vs_string_2_n)))"));
  CHECK(has(u.ebnf, R"(vs_string_2_n ::= (([^\0-\x1f\"\\] vs_string_1_n) | ("\\" vs_json_escape vs_string_1_n)))"));
  CHECK(has(u.ebnf, R"(vs_string_0_n ::= (("\"") | ([^\0-\x1f\"\\] vs_string_0_n) | ("\\" vs_json_escape vs_string_0_n)))"));
  CHECK(has(u.ebnf, "vs_json_escape ::= "));
  // Left as printed: a bound past the unrolled lengths, the array's repetition.
  CHECK(has(u.ebnf, R"(root_prop_2_1{0, 100})"));
  CHECK(has(u.ebnf, R"(root_1{1, -1})"));
}

TEST_CASE("bounded strings: a grammar without them is returned as it is", "[unit]") {
  const std::string plain = R"(root ::= (("[" root_1{0, 3} "]")))" "\n" R"(root_1 ::= (([0-9])))" "\n";
  const UnrolledStrings u = unroll_bounded_strings(plain);
  CHECK(u.n_rewritten == 0);
  CHECK(u.ebnf == plain);
  // A repetition of another rule between quotes is not a string body.
  const std::string other = R"(root ::= (("\"" digit{0, 3} "\"")))" "\n" R"(digit ::= (([0-9])))" "\n";
  CHECK(unroll_bounded_strings(other).n_rewritten == 0);
}
