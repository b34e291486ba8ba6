// UTF-8 text helpers with Python `str` semantics (code-point indexing, str.isspace(), case mapping, isprintable),
// which Jinja templates inherit from Python. Tested by tests/chat/template_engine_test.cpp and the differential tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace voltserve::chat::py {

// Decodes UTF-8 into code points; an invalid byte becomes U+FFFD so no input can make this fail.
std::u32string decode(std::string_view utf8);
void append_utf8(std::string& out, char32_t cp);
std::string encode(std::u32string_view cps);

// Byte offset of the first invalid UTF-8 sequence, or npos when the text is valid.
size_t find_invalid_utf8(std::string_view utf8);

bool is_ascii(std::string_view s);
// len(s): the number of code points.
int64_t length(std::string_view s);

// str.isspace() for one code point (also what Python's `\s` matches in str patterns).
bool is_space(char32_t cp);
// str.isprintable() for one code point.
bool is_printable(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
bool is_alnum(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip() / lstrip() / rstrip(); `chars` == nullptr strips whitespace, otherwise the given characters.
std::string strip(std::string_view s, StripSide side, const std::string* chars = nullptr);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);

}  // namespace voltserve::chat::py
