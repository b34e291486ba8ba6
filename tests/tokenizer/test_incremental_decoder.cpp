// IncrementalDecoder (engine/tokenizer/tokenizer.h) on the qwen35-mini fixture, whose small vocab splits CJK,
// emoji and ZWJ sequences into byte tokens: no chunk may end inside a UTF-8 sequence, incomplete bytes are held
// back until completed, flush() turns leftovers into U+FFFD, and the chunks concatenate to decode().
#include <catch2/catch_test_macros.hpp>

#include "tokenizer/byte_level.h"
#include "voltserve/tokenizer.h"
#include "voltserve/utf8.h"

using namespace voltserve;

namespace {

const Tokenizer& mini() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::load(std::filesystem::path(VOLTSERVE_SOURCE_DIR) / "tests/fixtures/tokenizers/qwen35-mini");
    if (!t.is_ok()) FAIL(t.status().to_string());
    return *t;
  }();
  return tok;
}

int32_t byte_token(uint8_t b) {
  auto id = mini().token_id(tokenizer::byte_level_encode(std::string(1, static_cast<char>(b))));
  REQUIRE(id.has_value());
  return *id;
}

}  // namespace

TEST_CASE("incremental decoding never splits a UTF-8 sequence", "[unit]") {
  const Tokenizer& t = mini();
  const std::string texts[] = {
      "中文字符的测试：你好，世界！", "emoji 😀👍🏽 and 👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈 flag", "한국어 텍스트",
      "ελληνικά και русский", "x\xCC\x81\xCC\x82 marks", "<think>思考</think>答案<|im_end|>", "𠀀𠀁 ext-B 𝐀"};
  for (const std::string& text : texts) {
    auto ids = t.encode(text);
    REQUIRE(ids.is_ok());
    for (bool skip : {false, true}) {
      IncrementalDecoder dec(t, skip);
      std::string all;
      size_t bytes_in = 0;
      int held_back = 0;  // pushes after which some bytes were still held back
      for (int32_t id : *ids) {
        const std::string chunk = dec.push(id);
        CHECK(tokenizer::find_invalid_utf8(chunk) == chunk.size());
        all += chunk;
        if (!(skip && t.is_special(id))) bytes_in += t.token_bytes(id).size();
        if (all.size() < bytes_in) ++held_back;
      }
      all += dec.flush();
      CHECK(all == t.decode(*ids, skip));
      // Multi-byte characters really are split across tokens here, so something must have been held back.
      CHECK(held_back > 0);
    }
  }
}

TEST_CASE("incremental decoding holds back, completes and flushes byte by byte", "[unit]") {
  const Tokenizer& t = mini();
  IncrementalDecoder dec(t, false);
  // U+1F600 as four byte tokens.
  CHECK(dec.push(byte_token(0xF0)).empty());
  CHECK(dec.push(byte_token(0x9F)).empty());
  CHECK(dec.push(byte_token(0x98)).empty());
  CHECK(dec.push(byte_token(0x80)) == "\xF0\x9F\x98\x80");
  // A stray continuation byte is invalid at once; the following text is not held back.
  CHECK(dec.push(byte_token(0x80)) == tokenizer::kReplacementChar);
  CHECK(dec.push(*t.token_id("a")) == "a");
  // An incomplete sequence at the end becomes one U+FFFD at flush, as decode() does.
  CHECK(dec.push(byte_token(0xE4)).empty());
  CHECK(dec.push(byte_token(0xBD)).empty());
  CHECK(dec.flush() == tokenizer::kReplacementChar);
  CHECK(dec.flush().empty());
  // A lead byte followed by a non-continuation: U+FFFD then the character.
  CHECK(dec.push(byte_token(0xE4)).empty());
  CHECK(dec.push(*t.token_id("b")) == std::string(tokenizer::kReplacementChar) + "b");
  const std::vector<int32_t> ids = {byte_token(0xF0), byte_token(0x9F), byte_token(0x98), byte_token(0x80),
                                    byte_token(0x80), *t.token_id("a"), byte_token(0xE4), byte_token(0xBD)};
  CHECK(t.decode(ids) == "\xF0\x9F\x98\x80" + std::string(tokenizer::kReplacementChar) + "a" +
                             std::string(tokenizer::kReplacementChar));
}

TEST_CASE("incremental decoding skips special tokens only when asked", "[unit]") {
  const Tokenizer& t = mini();
  IncrementalDecoder keep(t, false), skip(t, true);
  for (int32_t id : {3002, 3024}) {  // <|im_end|> (special), <think> (not special)
    const std::string k = keep.push(id), s = skip.push(id);
    CHECK(k == t.token_text(id));
    CHECK(s == (t.is_special(id) ? "" : t.token_text(id)));
  }
  CHECK(keep.push(-3).empty());  // not a token: dropped, as decode() does
}
