// ByteLevel alphabet tables (see byte_level.h), built once from the GPT-2 rule.
#include "tokenizer/byte_level.h"

#include <array>

#include "voltserve/utf8.h"

namespace voltserve::tokenizer {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // every alphabet code point is < 256 + 68

  Tables() {
    to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      to_char[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

char32_t byte_level_char(uint8_t b) { return tables().to_char[b]; }

int byte_level_byte(char32_t cp) {
  const auto& t = tables().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  if (find_invalid_utf8(token) != token.size()) return std::nullopt;
  std::string out;
  out.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const int b = byte_level_byte(next_code_point(token, pos));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_level_char(static_cast<uint8_t>(c)), out);
  return out;
}

}  // namespace voltserve::tokenizer
