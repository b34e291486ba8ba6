// Added tokens (tokenizer.json "added_tokens"): found in the text before normalization and BPE and never split,
// with HF's rules: leftmost-longest matching, special tokens optionally treated as text, and the lstrip / rstrip /
// single_word flags. Tokens marked normalized: true are matched in the normalized text instead. Mirrors HF
// `AddedVocabulary::find_matches`; tested in tests/tokenizer/test_added_vocabulary.cpp and the differential tests.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace voltserve::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = true;  // HF's default for a token given without flags
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A piece of the input: an added token (id >= 0) or text to normalize and tokenize (id < 0), as [begin, end).
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `normalize` maps a normalized: true token's content to the form it is matched in.
  AddedVocabulary(std::vector<AddedToken> tokens, const std::function<std::string(std::string_view)>& normalize);

  // Splits `text` on the non-normalized (pass = kRaw) or normalized (pass = kNormalized) added tokens. With
  // parse_special = false, special tokens are not matched (their text stays text). Appends covering segments.
  enum class Pass { kRaw, kNormalized };
  void split(std::string_view text, Pass pass, bool parse_special, std::vector<Segment>& out) const;
  bool has_normalized_tokens() const { return !tries_[1].nodes.empty(); }

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node
      int32_t token = -1;                                 // index into tokens_ when a token ends here
    };
    std::vector<Node> nodes;  // nodes[0] is the root when non-empty
    std::array<bool, 256> first_byte{};
    void insert(std::string_view key, int32_t token);
    // Length and token of the longest key that starts at text[pos], or token -1.
    std::pair<size_t, int32_t> longest(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::array<Trie, 2> tries_;  // [0] raw, [1] normalized
};

}  // namespace voltserve::tokenizer
