// The GPT-2 ByteLevel alphabet (engine/tokenizer/byte_level.h): known pairs from tokenizer.json files and the
// round trip over all 256 bytes.
#include <catch2/catch_test_macros.hpp>

#include <set>

#include "tokenizer/byte_level.h"

using namespace voltserve::tokenizer;

TEST_CASE("byte-level alphabet: known characters", "[unit]") {
  CHECK(byte_level_char(' ') == U'\u0120');   // Ġ
  CHECK(byte_level_char('\n') == U'\u010A');  // Ċ
  CHECK(byte_level_char('\t') == U'\u0109');  // ĉ
  CHECK(byte_level_char('a') == U'a');
  CHECK(byte_level_char(0xAD) == U'\u0143');  // soft hyphen is not printable: Ń
  CHECK(byte_level_char(0xE4) == U'\u00E4');
  CHECK(byte_level_encode(" hello\n") == "\xC4\xA0hello\xC4\x8A");
}

TEST_CASE("byte-level alphabet: a bijection on 256 bytes", "[unit]") {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_level_char(static_cast<uint8_t>(b));
    CHECK(byte_level_byte(c) == b);
    seen.insert(c);
  }
  CHECK(seen.size() == 256);
  CHECK(byte_level_byte(U' ') == -1);
  CHECK(byte_level_byte(U'\u4E2D') == -1);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  CHECK(byte_level_decode(byte_level_encode(all)) == all);
  CHECK_FALSE(byte_level_decode("has space").has_value());
  CHECK_FALSE(byte_level_decode("\xFF").has_value());
}
