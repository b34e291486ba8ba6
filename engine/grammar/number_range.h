// A JSON-schema number range (minimum / maximum, exclusive or not, multipleOf 10^-d or an integer) as an EBNF
// grammar of the decimal JSON numbers inside it, exactly: built as a DFA over the characters and printed as rules.
// Tested by tests/grammar/number_range_test.cpp (driven byte by byte through XGrammar against a direct check).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace voltserve {

// An exact decimal: sign, integer digits without leading zeros ("0" for zero), fraction digits without trailing
// zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;
  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
};

// Parses a JSON number's text ("-1.5", "1e-3", "2.50E+2") exactly; nullopt when it is not one or its exponent is
// beyond +-400 (no double bound lies there).
std::optional<Decimal> parse_decimal(std::string_view text);
// -1, 0, 1 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

struct NumberRange {
  std::optional<NumberBound> lo, hi;
  // At most this many fraction digits (0: integers only), and this many digits from the first non-zero one on: a
  // model writing digits must end, and a number of at most 15 significant digits parsed into a double keeps its
  // place against bounds that were doubles (distinct such decimals are distinct doubles, in the same order).
  int max_fraction_digits = 15;
  int max_significant_digits = 15;
  // Values are integer multiples of this (0 or 1: no such rule; needs max_fraction_digits 0).
  int64_t integer_multiple = 0;
};

// Integer multipleOf above this is refused: the grammar tracks the remainder, one state per value.
constexpr int64_t kMaxIntegerMultiple = 1000;

// Rules `rule ::= ...` (and helpers `rule_<n>`) for the numbers `-?(0|[1-9][0-9]*)(.[0-9]{1,F})?` (no exponent,
// at most max_significant_digits, zero never with a '-') whose value lies in `range`. Throws std::invalid_argument when no such number
// exists.
std::string number_range_ebnf(const NumberRange& range, const std::string& rule);

}  // namespace voltserve
