// See bounded_strings.h.
#include "grammar/bounded_strings.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

namespace voltserve {
namespace {

// XGrammar's print of one character of a bounded string, and of its use.
const std::regex kCharRule(R"(^(\w+) ::= \(\(\[\^\\"\\\\\\r\\n\]\)\)$)");
const std::regex kBoundedUse(R"re("\\"" (\w+)\{(\d+), ?(-?\d+)\} "\\"")re");

constexpr const char* kEscapeRule = "vs_json_escape";
constexpr const char* kEscape = R"((([\"\\/bfnrt]) | ("u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9])))";
// One JSON string character: anything but a control character, a quote or a backslash, or an escape.
constexpr const char* kChar = R"([^\0-\x1f\"\\])";

// The rule for "at least `min` and at most `max` (-1: any number) more characters, then the closing quote".
std::string rule_name(int min, int max) { return fmt::format("vs_string_{}_{}", min, max < 0 ? "n" : std::to_string(max)); }

}  // namespace

UnrolledStrings unroll_bounded_strings(const std::string& ebnf) {
  std::set<std::string> char_rules;
  {
    std::istringstream in(ebnf);
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_match(line, m, kCharRule)) char_rules.insert(m[1]);
    }
  }
  UnrolledStrings out;
  if (char_rules.empty()) {
    out.ebnf = ebnf;
    return out;
  }
  std::set<std::pair<int, int>> needed;  // (min, max) of every rule the rewritten uses start from
  std::string rewritten;
  auto it = ebnf.cbegin();
  for (std::sregex_iterator m(ebnf.begin(), ebnf.end(), kBoundedUse), end; m != end; ++m) {
    const std::smatch& u = *m;
    if (u[2].length() > 6 || u[3].length() > 6) continue;  // far beyond the unrolled lengths (and int)
    const int min = std::stoi(u[2]);
    const int max = std::stoi(u[3]);
    const bool ours = char_rules.count(u[1]) != 0 && min <= kMaxUnrolledStringLength &&
                      max <= kMaxUnrolledStringLength && (max < 0 || min <= max);
    if (!ours) continue;
    rewritten.append(it, u[0].first);
    rewritten += "\"\\\"\" " + rule_name(min, max);
    it = u[0].second;
    needed.insert({min, max});
    ++out.n_rewritten;
  }
  rewritten.append(it, ebnf.cend());
  if (out.n_rewritten == 0) {
    out.ebnf = ebnf;
    return out;
  }
  // Each start state's chain: (min, max) -> (min - 1, max - 1), down to (0, 0) or to (0, any), which loops.
  std::set<std::pair<int, int>> defined;
  std::string rules = fmt::format("\n{} ::= {}\n", kEscapeRule, kEscape);
  for (std::pair<int, int> state : needed) {
    while (defined.insert(state).second) {
      const auto [min, max] = state;
      const std::pair<int, int> next{std::max(min - 1, 0), max < 0 ? -1 : max - 1};
      std::string body;
      if (min == 0) body = R"(("\""))";
      if (max != 0) {
        if (!body.empty()) body += " | ";
        body += fmt::format(R"(({} {}) | ("\\" {} {}))", kChar, rule_name(next.first, next.second), kEscapeRule,
                            rule_name(next.first, next.second));
      }
      rules += fmt::format("{} ::= ({})\n", rule_name(min, max), body);
      if (max == 0) break;
      state = next;
    }
  }
  out.ebnf = rewritten + rules;
  return out;
}

}  // namespace voltserve
