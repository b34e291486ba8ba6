// Added-token matching (see added_vocabulary.h).
#include "tokenizer/added_vocabulary.h"

#include <utf8proc.h>

#include <algorithm>

#include "voltserve/utf8.h"

namespace voltserve::tokenizer {
namespace {

bool is_white_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Rust regex's Unicode \w (HF uses it for single_word): letters, marks, decimal digits, letter numbers,
// connector punctuation, ZWNJ/ZWJ. (Other_Alphabetic symbols such as circled letters are not included.)
bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// The code point that ends at text[end) (text is valid UTF-8, end > 0).
char32_t code_point_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return next_code_point(text, start);
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view key, int32_t token) {
  if (nodes.empty()) nodes.emplace_back();
  first_byte[static_cast<uint8_t>(key[0])] = true;
  int32_t node = 0;
  for (char ch : key) {
    const auto b = static_cast<uint8_t>(ch);
    int32_t child = -1;
    for (const auto& [k, n] : nodes[node].children) {
      if (k == b) child = n;
    }
    if (child < 0) {
      child = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(b, child);
      nodes.emplace_back();
    }
    node = child;
  }
  nodes[node].token = token;  // the last token with this content wins, as in HF's content -> id map
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    int32_t child = -1;
    for (const auto& [k, n] : nodes[node].children) {
      if (k == b) {
        child = n;
        break;
      }
    }
    if (child < 0) break;
    node = child;
    if (nodes[node].token >= 0) best = {i + 1 - pos, nodes[node].token};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 const std::function<std::string(std::string_view)>& normalize)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (t.content.empty()) continue;  // HF ignores empty added tokens
    if (t.normalized) {
      const std::string key = normalize(t.content);
      if (!key.empty()) tries_[1].insert(key, static_cast<int32_t>(i));
    } else {
      tries_[0].insert(t.content, static_cast<int32_t>(i));
    }
  }
}

void AddedVocabulary::split(std::string_view text, Pass pass, bool parse_special, std::vector<Segment>& out) const {
  const Trie& trie = tries_[pass == Pass::kRaw ? 0 : 1];
  if (trie.nodes.empty() || text.empty()) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  size_t emitted = 0;  // HF's start_offset: end of the last segment pushed
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [len, index] = trie.longest(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;  // matches never overlap, even when one is then discarded
    const AddedToken& t = tokens_[index];
    if (t.special && !parse_special) continue;
    if (t.single_word) {
      const bool start_ok = start == 0 || !is_word_char(code_point_before(text, start));
      size_t after = stop;
      const bool stop_ok = stop == text.size() || !is_word_char(next_code_point(text, after));
      if (!start_ok || !stop_ok) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t prev = s - 1;
        while (prev > 0 && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) --prev;
        size_t p = prev;
        if (!is_white_space(next_code_point(text, p))) break;
        s = prev;
      }
      start = std::max(s, emitted);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t p = stop;
        if (!is_white_space(next_code_point(text, p))) break;
        stop = p;
      }
    }
    if (emitted < start) out.push_back({emitted, start, -1});
    out.push_back({start, stop, t.id});
    emitted = stop;
    pos = std::max(pos, stop);
  }
  if (emitted < text.size()) out.push_back({emitted, text.size(), -1});
}

}  // namespace voltserve::tokenizer
