// The Split pre-tokenizer regex (engine/tokenizer/pretokenize_regex.h): Oniguruma -> PCRE2 translation and
// isolated splitting with the Qwen regexes. Expected pieces follow HF `pre_tokenize_str` on the same inputs.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "tokenizer/pretokenize_regex.h"

using namespace voltserve;
using namespace voltserve::tokenizer;

namespace {
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> split(const char* pattern, std::string_view text) {
  auto translated = translate_hf_regex(pattern);
  REQUIRE(translated.is_ok());
  auto re = RegexSplitter::compile(*translated);
  REQUIRE(re.is_ok());
  std::vector<std::pair<size_t, size_t>> pieces;
  REQUIRE(re->split(text, 0, pieces).is_ok());
  std::vector<std::string> out;
  size_t expect = 0;
  for (auto [b, e] : pieces) {
    CHECK(b == expect);  // pieces cover the text in order
    expect = e;
    out.emplace_back(text.substr(b, e - b));
  }
  CHECK(expect == text.size());
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("Qwen regex splits words, digits, contractions and whitespace", "[unit]") {
  CHECK(split(kQwen35, "Hello world's 123") == V{"Hello", " world", "'s", " ", "1", "2", "3"});
  CHECK(split(kQwen35, "a  b") == V{"a", " ", " b"});           // \s+(?!\S) leaves one space for the word
  CHECK(split(kQwen35, "I'M OK") == V{"I", "'M", " OK"});       // (?i:...) contractions
  CHECK(split(kQwen35, "x\r\n\r\ny") == V{"x", "\r\n\r\n", "y"});
  CHECK(split(kQwen35, "end.\n") == V{"end", ".\n"});
  CHECK(split(kQwen35, "  \n  x") == V{"  \n", " ", " x"});
  CHECK(split(kQwen35, "") == V{});
}

TEST_CASE("Qwen3.5 regex joins combining marks to letters; Qwen3's does not", "[unit]") {
  const std::string text = "x\xCC\x81\xCC\x82y";  // x + U+0301 + U+0302 + y
  CHECK(split(kQwen35, text) == V{text});
  CHECK(split(kQwen3, text) == V{"x", "\xCC\x81\xCC\x82", "y"});  // marks form a punctuation run
}

TEST_CASE("\\s means Unicode White_Space, as in Oniguruma", "[unit]") {
  // U+180E MONGOLIAN VOWEL SEPARATOR is in PCRE2's own \s but is not White_Space.
  CHECK(split(R"(\s+)", "a\xE1\xA0\x8E" "b") == V{"a\xE1\xA0\x8E" "b"});
  CHECK(split(R"(\s+)", "a\xE3\x80\x80" "b") == V{"a", "\xE3\x80\x80", "b"});  // U+3000 is
  CHECK(split(R"([^\s]+)", "ab\xC2\xA0" "cd") == V{"ab", "\xC2\xA0", "cd"});  // U+00A0 inside a class
}

TEST_CASE("\\p{N} includes the Kaktovik numerals, as HF's Unicode tables do", "[unit]") {
  // U+1D2C0, U+1D2C1 (Unicode 15): digits are split one by one.
  CHECK(split(kQwen3, "a \xF0\x9D\x8B\x80\xF0\x9D\x8B\x81") == V{"a", " ", "\xF0\x9D\x8B\x80", "\xF0\x9D\x8B\x81"});
  CHECK(split(R"([^\p{N}]+)", "x\xF0\x9D\x8B\x80y") == V{"x", "\xF0\x9D\x8B\x80", "y"});
}

TEST_CASE("translate_hf_regex rejects what it cannot translate", "[unit]") {
  CHECK(translate_hf_regex(R"([^\S])").status().code() == StatusCode::kUnimplemented);
  CHECK(translate_hf_regex(R"([a-z&&[^aeiou]])").status().code() == StatusCode::kUnimplemented);
  CHECK(translate_hf_regex(R"((?~abc))").status().code() == StatusCode::kUnimplemented);
  CHECK(translate_hf_regex(R"(\h+)").status().code() == StatusCode::kUnimplemented);
  CHECK(translate_hf_regex(R"([abc)").status().code() == StatusCode::kInvalidArgument);
  CHECK(translate_hf_regex("abc\\").status().code() == StatusCode::kInvalidArgument);
  auto bad = RegexSplitter::compile("(unclosed");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("offset") != std::string::npos);
}

TEST_CASE("long whitespace runs do not exhaust the JIT stack", "[unit]") {
  const std::string text = "a" + std::string(200000, ' ') + "b";
  CHECK(split(kQwen35, text) == V{"a", std::string(199999, ' '), " b"});
}
