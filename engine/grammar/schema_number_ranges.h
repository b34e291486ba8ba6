// Ranged numbers in a JSON schema, swapped for `const` placeholders before XGrammar converts it and for our exact
// rules (number_range.h) in the EBNF it prints: XGrammar 0.1.34 gets float ranges wrong (exclusive taken inclusive,
// bounds rounded to 6 digits) and ignores multipleOf. Tested by tests/grammar/number_range_test.cpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "grammar/number_range.h"

namespace voltserve {

struct SchemaNumberRanges {
  std::string schema;  // the schema with each ranged number replaced (unchanged when `ranges` is empty)
  std::vector<std::pair<std::string, NumberRange>> ranges;  // placeholder string -> its range
};

// Throws std::invalid_argument naming the keyword and its JSON pointer for a range that cannot be enforced
// (multipleOf other than 10^-d or an integer up to kMaxIntegerMultiple, a bound that is not a number, an empty
// range). A schema that is not JSON is returned unchanged (XGrammar reports it).
SchemaNumberRanges extract_number_ranges(const std::string& schema);

// `ebnf` (XGrammar's print of the rewritten schema) with each placeholder literal replaced by its rule, the rules
// appended.
std::string substitute_number_ranges(const std::string& ebnf, const SchemaNumberRanges& ranges);

}  // namespace voltserve
