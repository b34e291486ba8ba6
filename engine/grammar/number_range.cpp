// See number_range.h. The DFA reads `-? int (. frac)?` keeping, per bound, how the digits read so far compare with
// the bound's (less / equal / greater); the integer digit count is kept up to one past the longest bound (beyond
// it every bound is smaller), the fraction digit count up to the cap, and for an integer multipleOf the remainder.
// Dead states are dropped, equivalent ones merged (Moore), and each state printed as one rule.
#include "grammar/number_range.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace voltserve {

std::optional<Decimal> parse_decimal(std::string_view text) {
  size_t i = 0;
  Decimal d;
  bool neg = false;
  if (i < text.size() && text[i] == '-') {
    neg = true;
    ++i;
  }
  auto digit = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '9'; };
  std::string mantissa;
  int64_t point = 0;  // digits of `mantissa` before the decimal point
  if (!digit(i)) return std::nullopt;
  while (digit(i)) mantissa.push_back(text[i++]);
  point = static_cast<int64_t>(mantissa.size());
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digit(i)) return std::nullopt;
    while (digit(i)) mantissa.push_back(text[i++]);
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) eneg = text[i++] == '-';
    if (!digit(i)) return std::nullopt;
    int64_t e = 0;
    while (digit(i)) {
      e = e * 10 + (text[i++] - '0');
      if (e > 400) return std::nullopt;
    }
    point += eneg ? -e : e;
  }
  if (i != text.size()) return std::nullopt;
  const int64_t n = static_cast<int64_t>(mantissa.size());
  std::string int_part, frac_part;
  if (point <= 0) {
    frac_part = std::string(static_cast<size_t>(-point), '0') + mantissa;
  } else if (point >= n) {
    int_part = mantissa + std::string(static_cast<size_t>(point - n), '0');
  } else {
    int_part = mantissa.substr(0, static_cast<size_t>(point));
    frac_part = mantissa.substr(static_cast<size_t>(point));
  }
  int_part.erase(0, std::min(int_part.find_first_not_of('0'), int_part.size()));
  while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
  d.int_digits = int_part.empty() ? "0" : int_part;
  d.frac_digits = frac_part;
  d.negative = neg && !d.is_zero();
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  if (a.int_digits.size() != b.int_digits.size()) return a.int_digits.size() < b.int_digits.size() ? -sign : sign;
  if (int c = a.int_digits.compare(b.int_digits)) return c < 0 ? -sign : sign;
  if (int c = a.frac_digits.compare(b.frac_digits)) return c < 0 ? -sign : sign;  // no trailing zeros: lexicographic
  return 0;
}

namespace {

// A bound on the magnitude (the digits without the sign) of one sign's numbers.
struct Magnitude {
  std::string int_digits, frac_digits;
  bool exclusive = false;
};

struct Branch {
  bool empty = false;
  std::optional<Magnitude> lo, hi;
};

Magnitude magnitude(const NumberBound& b) { return {b.value.int_digits, b.value.frac_digits, b.exclusive}; }

// Value bounds turned into magnitude bounds for the numbers without '-' (value m) and with it (value -m).
void split_by_sign(const NumberRange& r, Branch& pos, Branch& neg) {
  if (r.lo) {
    const Decimal& v = r.lo->value;
    if (v.is_zero()) {
      if (r.lo->exclusive) {
        pos.lo = Magnitude{"0", "", true};  // m > 0
        neg.empty = true;                   // -m > 0 never
      } else {
        neg.empty = true;  // -m >= 0: m = 0, written "0"
      }
    } else if (v.negative) {
      neg.hi = magnitude(*r.lo);  // -m >= lo: m <= |lo|
    } else {
      pos.lo = magnitude(*r.lo);
      neg.empty = true;
    }
  }
  if (r.hi) {
    const Decimal& v = r.hi->value;
    if (v.is_zero()) {
      if (r.hi->exclusive) {
        pos.empty = true;                   // m < 0 never
        neg.lo = Magnitude{"0", "", true};  // -m < 0: m > 0
      } else {
        pos.hi = Magnitude{"0", "", false};  // m <= 0: m = 0
      }
    } else if (v.negative) {
      pos.empty = true;
      neg.lo = magnitude(*r.hi);  // -m <= hi: m >= |hi|
    } else {
      pos.hi = magnitude(*r.hi);
    }
  }
  // Zero is written without a sign: "-0" is valid JSON, but a client may well read it as negative.
  if (!neg.lo) neg.lo = Magnitude{"0", "", true};
}

enum Phase : int { kStart, kSign, kZero, kInt, kDot, kFrac };

// One DFA state. cmp_*: how the digits read so far compare with the bound's (-1, 0, 1); in kInt over the common
// prefix of the integer digits, from the '.' on over the whole magnitude.
struct State {
  int phase = kStart;
  bool neg = false;
  int n_int = 0;
  int n_frac = 0;
  int n_sig = 0;  // digits from the first non-zero one on
  int cmp_lo = 0, cmp_hi = 0;
  int64_t rem = 0;
  auto key() const { return std::make_tuple(phase, neg, n_int, n_frac, n_sig, cmp_lo, cmp_hi, rem); }
  bool operator<(const State& o) const { return key() < o.key(); }
};

constexpr char kAlphabet[] = "-.0123456789";
constexpr int kSymbols = 12;

class RangeDfa {
 public:
  explicit RangeDfa(const NumberRange& r) : range_(r) {
    split_by_sign(r, pos_, neg_);
    for (const Branch* b : {&pos_, &neg_}) {
      for (const auto* m : {&b->lo, &b->hi}) {
        if (*m) max_int_ = std::max(max_int_, static_cast<int>((*m)->int_digits.size()) + 1);
      }
    }
    multiple_ = r.integer_multiple > 1 ? r.integer_multiple : 0;
  }

  std::optional<State> step(const State& s, char c) const {
    const bool is_digit = c >= '0' && c <= '9';
    const Branch& b = s.neg ? neg_ : pos_;
    State t = s;
    if (is_digit && (s.n_sig > 0 || c != '0')) {
      if (s.n_sig >= range_.max_significant_digits) return std::nullopt;
      t.n_sig = s.n_sig + 1;
    }
    switch (s.phase) {
      case kStart:
        if (c == '-') {
          if (neg_.empty) return std::nullopt;
          t.phase = kSign;
          t.neg = true;
          return t;
        }
        if (!is_digit || pos_.empty) return std::nullopt;
        return first_digit(t, c);
      case kSign:
        if (!is_digit) return std::nullopt;
        return first_digit(t, c);
      case kZero:
        if (c != '.' || range_.max_fraction_digits == 0) return std::nullopt;
        t.phase = kDot;
        t.cmp_lo = b.lo ? zero_cmp(*b.lo) : 0;
        t.cmp_hi = b.hi ? zero_cmp(*b.hi) : 0;
        return t;
      case kInt:
        if (c == '.') {
          if (range_.max_fraction_digits == 0) return std::nullopt;
          t.phase = kDot;
          t.cmp_lo = b.lo ? int_cmp(s.n_int, s.cmp_lo, *b.lo) : 0;
          t.cmp_hi = b.hi ? int_cmp(s.n_int, s.cmp_hi, *b.hi) : 0;
          t.n_int = 0;
          return t;
        }
        if (!is_digit) return std::nullopt;
        if (multiple_) t.rem = (s.rem * 10 + (c - '0')) % multiple_;
        if (s.n_int >= max_int_) {  // longer than every bound: the prefix comparisons no longer matter
          t.cmp_lo = t.cmp_hi = 0;
          return t;
        }
        if (b.lo) t.cmp_lo = prefix_cmp(s.cmp_lo, s.n_int, c, b.lo->int_digits);
        if (b.hi) t.cmp_hi = prefix_cmp(s.cmp_hi, s.n_int, c, b.hi->int_digits);
        t.n_int = s.n_int + 1;
        return t;
      case kDot:
      case kFrac:
        if (!is_digit || s.n_frac >= range_.max_fraction_digits) return std::nullopt;
        if (b.lo) t.cmp_lo = frac_cmp(s.cmp_lo, s.n_frac, c, b.lo->frac_digits);
        if (b.hi) t.cmp_hi = frac_cmp(s.cmp_hi, s.n_frac, c, b.hi->frac_digits);
        t.phase = kFrac;
        t.n_frac = s.n_frac + 1;
        return t;
    }
    return std::nullopt;
  }

  bool accepting(const State& s) const {
    if (s.phase != kZero && s.phase != kInt && s.phase != kFrac) return false;
    if (multiple_ && s.rem != 0) return false;
    const Branch& b = s.neg ? neg_ : pos_;
    auto final_cmp = [&](const Magnitude& m, int cmp) {
      int c = 0;
      if (s.phase == kZero) {
        c = zero_cmp(m);
      } else if (s.phase == kInt) {
        c = int_cmp(s.n_int, cmp, m);
      } else {
        c = cmp;
      }
      // Equal so far but the bound has fraction digits left (the last one non-zero): the number is smaller.
      const int n_frac = s.phase == kFrac ? s.n_frac : 0;
      if (c == 0 && n_frac < static_cast<int>(m.frac_digits.size())) c = -1;
      return c;
    };
    if (b.lo) {
      const int c = final_cmp(*b.lo, s.cmp_lo);
      if (c < 0 || (c == 0 && b.lo->exclusive)) return false;
    }
    if (b.hi) {
      const int c = final_cmp(*b.hi, s.cmp_hi);
      if (c > 0 || (c == 0 && b.hi->exclusive)) return false;
    }
    return true;
  }

 private:
  State first_digit(State t, char c) const {
    const Branch& b = t.neg ? neg_ : pos_;
    if (c == '0') {
      t.phase = kZero;
      return t;
    }
    t.phase = kInt;
    t.n_int = 1;
    t.rem = multiple_ ? (c - '0') % multiple_ : 0;
    t.cmp_lo = b.lo ? prefix_cmp(0, 0, c, b.lo->int_digits) : 0;
    t.cmp_hi = b.hi ? prefix_cmp(0, 0, c, b.hi->int_digits) : 0;
    return t;
  }
  // The integer part "0" against a bound's magnitude.
  static int zero_cmp(const Magnitude& m) { return m.int_digits == "0" ? 0 : -1; }
  // The non-zero integer part of n digits (their comparison over the common prefix `cmp`) against the bound's.
  static int int_cmp(int n, int cmp, const Magnitude& m) {
    const int len = m.int_digits == "0" ? 0 : static_cast<int>(m.int_digits.size());
    if (n != len) return n < len ? -1 : 1;
    return cmp;
  }
  static int prefix_cmp(int cmp, int at, char c, const std::string& digits) {
    if (cmp != 0 || at >= static_cast<int>(digits.size())) return cmp;
    return c < digits[static_cast<size_t>(at)] ? -1 : (c > digits[static_cast<size_t>(at)] ? 1 : 0);
  }
  static int frac_cmp(int cmp, int at, char c, const std::string& digits) {
    if (cmp != 0) return cmp;
    const char d = at < static_cast<int>(digits.size()) ? digits[static_cast<size_t>(at)] : '0';
    return c < d ? -1 : (c > d ? 1 : 0);
  }

  NumberRange range_;
  Branch pos_, neg_;
  int max_int_ = 1;
  int64_t multiple_ = 0;
};

std::string digit_class(const std::vector<char>& chars) {
  std::string out = "[";
  for (size_t i = 0; i < chars.size();) {
    size_t j = i;
    while (j + 1 < chars.size() && chars[j + 1] == chars[j] + 1) ++j;
    out.push_back(chars[i]);
    if (j > i) {
      if (j > i + 1) out.push_back('-');
      out.push_back(chars[j]);
    }
    i = j + 1;
  }
  return out + "]";
}

}  // namespace

std::string number_range_ebnf(const NumberRange& range, const std::string& rule) {
  if (range.integer_multiple > 1 && range.max_fraction_digits != 0) {
    throw std::invalid_argument("an integer multipleOf needs integers (no fraction digits)");
  }
  const RangeDfa dfa(range);
  // Every reachable state and its transitions (-1: none).
  std::vector<State> states{State{}};
  std::map<State, int> ids{{State{}, 0}};
  std::vector<std::array<int, kSymbols>> next;
  for (size_t at = 0; at < states.size(); ++at) {
    if (states.size() > 200000) throw std::invalid_argument("the number range needs too large a grammar");
    std::array<int, kSymbols> row;
    row.fill(-1);
    for (int c = 0; c < kSymbols; ++c) {
      std::optional<State> t = dfa.step(states[at], kAlphabet[c]);
      if (!t) continue;
      auto [it, added] = ids.emplace(*t, static_cast<int>(states.size()));
      if (added) states.push_back(*t);
      row[static_cast<size_t>(c)] = it->second;
    }
    next.push_back(row);
  }
  const size_t n = states.size();
  std::vector<bool> accept(n);
  for (size_t i = 0; i < n; ++i) accept[i] = dfa.accepting(states[i]);
  // Live: an accepting state is reachable (fixed point over the reverse edges).
  std::vector<bool> live = accept;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (live[i]) continue;
      for (int t : next[i]) {
        if (t >= 0 && live[static_cast<size_t>(t)]) {
          live[i] = changed = true;
          break;
        }
      }
    }
  }
  if (!live[0]) throw std::invalid_argument("no number lies in the range");
  for (auto& row : next) {
    for (int& t : row) {
      if (t >= 0 && !live[static_cast<size_t>(t)]) t = -1;
    }
  }
  // Moore minimization over the live states: split blocks by (accepting, block of each transition's target).
  std::vector<int> block(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (live[i]) block[i] = accept[i] ? 1 : 0;
  }
  for (size_t n_blocks = 0;;) {
    std::map<std::vector<int>, int> sig_ids;
    std::vector<int> refined(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (!live[i]) continue;
      std::vector<int> sig{block[i]};
      for (int t : next[i]) sig.push_back(t < 0 ? -1 : block[static_cast<size_t>(t)]);
      refined[i] = sig_ids.emplace(std::move(sig), static_cast<int>(sig_ids.size())).first->second;
    }
    block = std::move(refined);
    if (sig_ids.size() == n_blocks) break;
    n_blocks = sig_ids.size();
  }
  // One representative per block; the start's block is the rule itself.
  std::map<int, size_t> rep;
  for (size_t i = 0; i < n; ++i) {
    if (live[i]) rep.emplace(block[i], i);
  }
  auto has_edges = [&](size_t i) {
    return std::any_of(next[i].begin(), next[i].end(), [](int t) { return t >= 0; });
  };
  auto rule_name = [&](int b) { return b == block[0] ? rule : fmt::format("{}_{}", rule, b); };
  // A free tail of length n: up to n more digits, any of them, then the end (the fraction digits left under the
  // caps). Printed inline as [0-9]{0,n} instead of a chain of n rules (fewer rules: faster for XGrammar to compile).
  std::map<int, int> tail;  // block -> n; 0 for a final state
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [b, i] : rep) {
      if (tail.count(b) || !accept[i]) continue;
      if (!has_edges(i)) {
        tail[b] = 0;
        changed = true;
        continue;
      }
      const int t0 = next[i][2];  // '0'
      bool free = t0 >= 0 && next[i][0] < 0 && next[i][1] < 0;
      for (int c = 2; c < kSymbols && free; ++c) free = next[i][static_cast<size_t>(c)] == t0;
      const int tb = free ? block[static_cast<size_t>(t0)] : -1;
      if (free && tb != b && tail.count(tb)) {
        tail[b] = tail[tb] + 1;
        changed = true;
      }
    }
  }
  auto target = [&](int tb) {
    if (!tail.count(tb)) return fmt::format(" {}", rule_name(tb));
    const int len = tail.at(tb);
    return len == 0 ? std::string() : (len == 1 ? std::string(" [0-9]?") : fmt::format(" [0-9]{{0,{}}}", len));
  };
  std::string out;
  for (const auto& [b, i] : rep) {
    if (tail.count(b)) continue;  // printed where it is used
    std::map<int, std::vector<char>> digits_to;  // target block -> digits
    std::vector<std::string> alts;
    std::vector<char> self_loop;
    for (int c = 0; c < kSymbols; ++c) {
      const int t = next[i][static_cast<size_t>(c)];
      if (t < 0) continue;
      const int tb = block[static_cast<size_t>(t)];
      const char ch = kAlphabet[c];
      if (tb == b) {
        self_loop.push_back(ch);
      } else if (ch >= '0' && ch <= '9') {
        digits_to[tb].push_back(ch);
      } else {
        alts.push_back(fmt::format("\"{}\"{}", ch, target(tb)));
      }
    }
    for (const auto& [tb, chars] : digits_to) alts.push_back(digit_class(chars) + target(tb));
    // S ::= C S | A | "" (when accepting) is S ::= C* (A)?; digits are the only characters that loop.
    std::string body;
    if (!self_loop.empty()) body = digit_class(self_loop) + "* ";
    std::string joined;
    for (size_t k = 0; k < alts.size(); ++k) joined += (k ? " | " : "") + alts[k];
    if (alts.empty()) {
      body += "\"\"";
    } else {
      body += "(" + joined + ")" + (accept[i] ? "?" : "");
    }
    out += fmt::format("{} ::= {}\n", rule_name(b), body);
  }
  return out;
}

}  // namespace voltserve
