// Tokenizer (engine/tokenizer/tokenizer.h) on the committed qwen35-mini fixture and the real Qwen3 tokenizer: the
// config fields, added/special token handling, parse_special, invalid input, and thread safety. Expected ids come
// from HF `tokenizers` on the same files (the differential test tools/tokenizer_diff.py checks thousands more).
#include <catch2/catch_test_macros.hpp>

#include <thread>

#include "voltserve/tokenizer.h"

using namespace voltserve;

namespace {

const std::filesystem::path kMini = std::filesystem::path(VOLTSERVE_SOURCE_DIR) / "tests/fixtures/tokenizers/qwen35-mini";

// tests/fixtures/tokenizers/qwen3 keeps tokenizer.json compressed; configuring the build unpacks it here.
std::filesystem::path qwen3_dir() { return std::filesystem::path(VOLTSERVE_BINARY_DIR) / "fixtures/tokenizers/qwen3"; }

const Tokenizer& mini() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::load(kMini);
    if (!t.is_ok()) FAIL("cannot load " << kMini << ": " << t.status().to_string());
    return *t;
  }();
  return tok;
}

std::vector<int32_t> enc(const Tokenizer& t, std::string_view s, bool special = true) {
  auto r = t.encode(s, special);
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace

TEST_CASE("qwen35-mini: config and added tokens", "[unit]") {
  const Tokenizer& t = mini();
  CHECK(t.vocab_size() == 3033);
  CHECK(t.eos_token() == "<|im_end|>");
  CHECK(t.pad_token() == "<|endoftext|>");
  CHECK(t.bos_token().empty());
  CHECK(t.chat_template().empty());
  CHECK(t.token_id("<|endoftext|>") == 3000);
  CHECK(t.token_id("<|im_end|>") == 3002);
  CHECK(t.token_id("<think>") == 3024);
  CHECK(t.token_id("<|audio_pad|>") == 3032);
  CHECK(t.token_id("\xC4\xA0") == 220);  // "Ġ"
  CHECK_FALSE(t.token_id("no such token").has_value());
  CHECK(t.is_special(3002));
  CHECK_FALSE(t.is_special(3024));  // <think> is special: false in Qwen3.5, like <tool_call>
  CHECK_FALSE(t.is_special(3014));
  CHECK(t.is_added(3024));
  CHECK_FALSE(t.is_added(100));
  CHECK(t.token_text(3024) == "<think>");
  CHECK(t.token_text(99999).empty());
}

TEST_CASE("qwen35-mini: special tokens parsed or kept as text", "[unit]") {
  const Tokenizer& t = mini();
  CHECK(enc(t, "<|im_end|>") == std::vector<int32_t>{3002});
  const auto plain = enc(t, "<|im_end|>", false);
  CHECK(plain.size() > 1);
  CHECK(t.decode(plain) == "<|im_end|>");
  // Non-special added tokens are matched either way, as HF does.
  CHECK(enc(t, "<think>", false) == std::vector<int32_t>{3024});
  const auto ids = enc(t, "<|im_start|>user\nhi<think>x</think><|im_end|>");
  CHECK(ids.front() == 3001);
  CHECK(ids.back() == 3002);
  CHECK(t.decode(ids) == "<|im_start|>user\nhi<think>x</think><|im_end|>");
  CHECK(t.decode(ids, true) == "user\nhi<think>x</think>");
}

TEST_CASE("qwen35-mini: round trips, NFC, edge cases", "[unit]") {
  const Tokenizer& t = mini();
  CHECK(enc(t, "").empty());
  for (const std::string& s : std::vector<std::string>{"Hello, world!", "  spaces\t\ttabs\r\n", "你好世界 👨\u200d👩\u200d👧", "I'M 12345", std::string(5000, 'z')}) {
    CHECK(t.decode(enc(t, s)) == s);
  }
  CHECK(t.decode(enc(t, "Cafe\xCC\x81")) == "Caf\xC3\xA9");  // NFC before BPE
  CHECK(t.decode(std::vector<int32_t>{-1, 5000000, 72}) == "i");  // ids that are not tokens are dropped, as in HF
}

TEST_CASE("encode rejects invalid UTF-8 with the offset", "[unit]") {
  auto r = mini().encode("abc\xFF" "def");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("byte 3") != std::string::npos);
  CHECK_FALSE(mini().encode("\xED\xA0\x80").is_ok());  // a surrogate
  CHECK_FALSE(mini().encode("x\xE4\xBD").is_ok());     // truncated at the end
}

TEST_CASE("encode is thread-safe and gives the same ids in every thread", "[unit]") {
  const Tokenizer& t = mini();
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("text " + std::to_string(i * 7919) + " with wörds ünd 文字 #" + std::to_string(i));
  std::vector<std::vector<int32_t>> expect;
  for (const auto& s : texts) expect.push_back(enc(t, s));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 5; ++rep) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto r = t.encode(texts[i]);
          if (!r.is_ok() || *r != expect[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == 0);
}

TEST_CASE("real Qwen3 tokenizer loads and matches known HF ids", "[unit]") {
  const auto dir = qwen3_dir();
  auto t = Tokenizer::load(dir);
  if (!t.is_ok()) FAIL("the real Qwen3 tokenizer is required (" << dir << "): " << t.status().to_string());
  CHECK(t->vocab_size() == 151669);
  CHECK(t->eos_token() == "<|im_end|>");
  CHECK(t->token_id("<|im_end|>") == 151645);
  CHECK_FALSE(t->chat_template().empty());
  // HF: Tokenizer.from_file(...).encode("Hello world! I'M fine <think>x</think><|im_end|>").ids
  CHECK(enc(*t, "Hello world! I'M fine <think>x</think><|im_end|>") ==
        std::vector<int32_t>{9707, 1879, 0, 358, 27603, 6915, 220, 151667, 87, 151668, 151645});
}
