// Added-token matching (engine/tokenizer/added_vocabulary.h): leftmost-longest, special tokens as text, and the
// lstrip / rstrip / single_word flags, on cases modelled on HF's added_vocabulary.rs behaviour.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"

using namespace voltserve::tokenizer;

namespace {

AddedToken tok(int32_t id, std::string content, bool special, bool lstrip = false, bool rstrip = false,
               bool single_word = false) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  t.normalized = false;
  t.lstrip = lstrip;
  t.rstrip = rstrip;
  t.single_word = single_word;
  return t;
}

// Renders segments as "[id:text]" for tokens and the text otherwise.
std::vector<std::string> run(const AddedVocabulary& v, std::string_view text, bool parse_special = true) {
  std::vector<Segment> segs;
  v.split(text, AddedVocabulary::Pass::kRaw, parse_special, segs);
  std::vector<std::string> out;
  size_t expect = 0;
  for (const auto& s : segs) {
    CHECK(s.begin == expect);
    expect = s.end;
    const std::string piece(text.substr(s.begin, s.end - s.begin));
    if (s.id < 0) {
      out.push_back(piece);
      continue;
    }
    std::string rendered = "[";  // built with append: GCC 12 -Wrestrict misfires on chained operator+ at -O3
    rendered.append(std::to_string(s.id)).append(":").append(piece).append("]");
    out.push_back(rendered);
  }
  CHECK(expect == text.size());
  return out;
}
using V = std::vector<std::string>;
std::string identity(std::string_view s) { return std::string(s); }

}  // namespace

TEST_CASE("added tokens: leftmost-longest, never overlapping", "[unit]") {
  AddedVocabulary v({tok(1, "<a>", true), tok(2, "<a><b>", true), tok(3, "b>", false)}, identity);
  CHECK(run(v, "x<a><b>y") == V{"x", "[2:<a><b>]", "y"});
  CHECK(run(v, "<a>b>") == V{"[1:<a>]", "[3:b>]"});
  CHECK(run(v, "<a") == V{"<a"});
  CHECK(run(v, "") == V{});
}

TEST_CASE("added tokens: parse_special = false keeps special text but still matches the others", "[unit]") {
  AddedVocabulary v({tok(1, "<|im_end|>", true), tok(2, "<think>", false)}, identity);
  CHECK(run(v, "a<|im_end|><think>b", false) == V{"a<|im_end|>", "[2:<think>]", "b"});
  CHECK(run(v, "a<|im_end|><think>b", true) == V{"a", "[1:<|im_end|>]", "[2:<think>]", "b"});
}

TEST_CASE("added tokens: lstrip, rstrip and single_word", "[unit]") {
  AddedVocabulary strip({tok(7, "<mask>", false, true, true)}, identity);
  CHECK(run(strip, "Hi  <mask>\t there") == V{"Hi", "[7:  <mask>\t ]", "there"});
  CHECK(run(strip, "<mask> <mask>") == V{"[7:<mask> ]", "[7:<mask>]"});  // the spaces go to the first match only

  AddedVocabulary word({tok(9, "ony", false, false, false, true)}, identity);
  CHECK(run(word, "ony Anthony ony,") == V{"[9:ony]", " Anthony ", "[9:ony]", ","});
  CHECK(run(word, "_ony ony_") == V{"_ony ony_"});  // '_' is a word character
}
