// UTF-8 helpers of the tokenizer, public for the server's text handling (chat templates): validation, and lossy
// assembly of byte strings into text with the same replacement rule as Rust's String::from_utf8_lossy (one U+FFFD
// per maximal invalid subpart), which HF decode uses.
// Tested in tests/tokenizer/test_utf8.cpp against hand-made byte sequences from the Unicode "best practice" table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace voltserve::tokenizer {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Offset of the first byte that does not start a valid UTF-8 sequence (overlongs, surrogates and code points
// above U+10FFFF are invalid), or bytes.size() when all of it is valid.
size_t find_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out` as valid UTF-8, replacing each maximal invalid subpart by U+FFFD. With final = false,
// a trailing incomplete-but-so-far-valid sequence is not consumed; the return value is the number of bytes
// consumed (always bytes.size() when final is true). Feeding a stream in pieces (carrying the unconsumed tail
// over) gives the same text as one call with final = true on the whole stream.
size_t append_utf8_lossy(std::string_view bytes, bool final, std::string& out);

// Appends the UTF-8 encoding of a code point (which must be a valid scalar value).
void append_utf8(char32_t cp, std::string& out);

// Decodes one code point from valid UTF-8 at `pos` (no checks) and advances pos.
char32_t next_code_point(std::string_view valid, size_t& pos);

}  // namespace voltserve::tokenizer
