// The GPT-2 "ByteLevel" alphabet: each of the 256 byte values is written as one printable code point (printable
// Latin-1 bytes as themselves, the rest as U+0100 + n), so BPE vocab entries are strings of those characters.
// Tested in tests/tokenizer/test_byte_level.cpp (round trip, known pairs such as ' ' <-> 'Ġ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace voltserve::tokenizer {

// The code point that stands for byte b.
char32_t byte_level_char(uint8_t b);

// The byte a code point stands for, or -1 when it is not in the alphabet.
int byte_level_byte(char32_t cp);

// Maps a vocab string in the ByteLevel alphabet back to raw bytes; nullopt when the string is not valid UTF-8 or
// uses a character outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view token);

// Raw bytes -> ByteLevel alphabet string (the form tokens take in tokenizer.json).
std::string byte_level_encode(std::string_view bytes);

}  // namespace voltserve::tokenizer
