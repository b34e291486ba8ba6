// UTF-8 helpers with Python str semantics; Unicode properties come from utf8proc (Debian libutf8proc).
#include "chat/template/py_text.h"

#include <utf8proc.h>

#include "voltserve/utf8.h"

namespace voltserve::chat::py {
namespace {

// Length of the UTF-8 sequence at s[i] and its code point; 0 when the bytes there are not valid UTF-8.
size_t decode_one(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t n = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

utf8proc_category_t category(char32_t cp) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
}

template <class F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : decode(s)) append_utf8(out, f(cp));
  return out;
}

char32_t to_upper(char32_t cp) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_lower(char32_t cp) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))); }
char32_t to_title(char32_t cp) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))); }

// Python's str.title()/capitalize() treat "cased" characters (letters with case) as word characters.
bool is_cased(char32_t cp) { return is_upper(cp) || is_lower(cp) || category(cp) == UTF8PROC_CATEGORY_LT; }

}  // namespace

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = decode_one(s, i, cp);
    if (n == 0) {
      out.push_back(0xFFFD);
      ++i;
    } else {
      out.push_back(cp);
      i += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) { tokenizer::append_utf8(cp, out); }

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t n = decode_one(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

int64_t length(std::string_view s) {
  int64_t n = 0;
  for (char c : s) {
    // Count every byte that is not a continuation byte; valid UTF-8 gives the code-point count.
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_alpha(char32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_digit(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_ND; }
bool is_alnum(char32_t cp) {
  const auto c = category(cp);
  return is_alpha(cp) || c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}
bool is_upper(char32_t cp) { return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp)) != 0; }
bool is_lower(char32_t cp) { return utf8proc_islower(static_cast<utf8proc_int32_t>(cp)) != 0; }

std::string strip(std::string_view s, StripSide side, const std::string* chars) {
  const std::u32string cps = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strippable = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : is_space(cp); };
  size_t b = 0, e = cps.size();
  if (side != StripSide::kRight) {
    while (b < e && strippable(cps[b])) ++b;
  }
  if (side != StripSide::kLeft) {
    while (e > b && strippable(cps[e - 1])) --e;
  }
  if (b == 0 && e == cps.size() && find_invalid_utf8(s) == std::string_view::npos) return std::string(s);
  return encode(std::u32string_view(cps).substr(b, e - b));
}

std::string upper(std::string_view s) { return map_code_points(s, to_upper); }
std::string lower(std::string_view s) { return map_code_points(s, to_lower); }
std::string swapcase(std::string_view s) {
  return map_code_points(s, [](char32_t cp) { return is_upper(cp) ? to_lower(cp) : is_lower(cp) ? to_upper(cp) : cp; });
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (char32_t cp : decode(s)) {
    append_utf8(out, previous_cased ? to_lower(cp) : to_title(cp));
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t cp : decode(s)) {
    append_utf8(out, first ? to_title(cp) : to_lower(cp));
    first = false;
  }
  return out;
}

}  // namespace voltserve::chat::py
