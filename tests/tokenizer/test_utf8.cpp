// UTF-8 validation and lossy assembly (engine/tokenizer/utf8.h), checked against the Unicode Standard's
// "U+FFFD substitution of maximal subparts" examples (Chapter 3, Table 3-8) and a streaming property test.
#include <catch2/catch_test_macros.hpp>

#include <random>
#include <string>

#include "voltserve/utf8.h"

using namespace voltserve::tokenizer;

namespace {
std::string lossy(std::string_view bytes) {
  std::string out;
  REQUIRE(append_utf8_lossy(bytes, true, out) == bytes.size());
  return out;
}
const std::string R(kReplacementChar);
}  // namespace

TEST_CASE("find_invalid_utf8 accepts valid text and points at the first bad byte", "[unit]") {
  CHECK(find_invalid_utf8("") == 0);
  CHECK(find_invalid_utf8("plain ascii text, long enough for the 8-byte path") == 49);
  CHECK(find_invalid_utf8("h\xC3\xA9llo \xE4\xBD\xA0 \xF0\x9F\x98\x80") == 15);
  CHECK(find_invalid_utf8("abc\x80") == 3);             // lone continuation byte
  CHECK(find_invalid_utf8("abcdefghij\xC0\xAF") == 10);  // overlong '/'
  CHECK(find_invalid_utf8("\xED\xA0\x80") == 0);         // UTF-16 surrogate
  CHECK(find_invalid_utf8("x\xF4\x90\x80\x80") == 1);    // above U+10FFFF
  CHECK(find_invalid_utf8("xy\xE4\xBD") == 2);           // truncated at the end
  CHECK(find_invalid_utf8("\xFF") == 0);
}

TEST_CASE("append_utf8_lossy replaces maximal subparts like from_utf8_lossy", "[unit]") {
  // Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  CHECK(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + R + R + R + "b" + R + "c" + R + R + "d");
  CHECK(lossy("\xED\xA0\x80") == R + R + R);  // surrogates: ED is a maximal subpart alone
  CHECK(lossy("\xF0\x9F\x98") == R);          // truncated emoji at the end: one replacement
  CHECK(lossy("\xC0\xAF") == R + R);
  CHECK(lossy("ok \xE4\xBD\xA0") == "ok \xE4\xBD\xA0");
}

TEST_CASE("append_utf8_lossy holds back only an incomplete tail when not final", "[unit]") {
  std::string out;
  CHECK(append_utf8_lossy("ab\xF0\x9F", false, out) == 2);
  CHECK(out == "ab");
  out.clear();
  CHECK(append_utf8_lossy("ab\xF0\x41", false, out) == 4);  // F0 41 is already known to be invalid
  CHECK(out == "ab" + R + "A");
}

TEST_CASE("streaming lossy assembly equals one-shot assembly", "[unit]") {
  std::mt19937 rng(7);
  const unsigned char interesting[] = {0x41, 0x80, 0xBF, 0xC2, 0xC3, 0xA9, 0xE0, 0xE4, 0xED, 0xA0, 0x9F,
                                       0xF0, 0xF4, 0x8F, 0x90, 0xF5, 0xFF, 0x20, 0x98, 0xBD};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<char>(interesting[rng() % sizeof(interesting)]));
    const std::string whole = lossy(bytes);
    std::string streamed, pending;
    size_t pos = 0;
    while (pos < bytes.size()) {
      const size_t step = 1 + rng() % 3;
      pending += bytes.substr(pos, step);
      pos += step;
      const size_t used = append_utf8_lossy(pending, false, streamed);
      pending.erase(0, used);
      CHECK(pending.size() <= 3);
    }
    append_utf8_lossy(pending, true, streamed);
    REQUIRE(streamed == whole);
    CHECK(find_invalid_utf8(whole) == whole.size());
  }
}
