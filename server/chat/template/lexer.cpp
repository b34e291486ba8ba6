// Jinja lexer; each rule cites the jinja2/lexer.py (3.1) rule it mirrors so the whitespace handling stays exact.
#include "chat/template/lexer.h"

#include <cstdlib>
#include <optional>

#include "chat/template/py_text.h"
#include "chat/template/template_error.h"

namespace voltserve::chat {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's str.rstrip(): drop trailing Unicode whitespace.
std::string rstrip_ws(std::string_view s) { return py::strip(s, py::StripSide::kRight); }

// Length in bytes of the Python-whitespace run (`\s*`) starting at pos.
size_t whitespace_run(std::string_view s, size_t pos) {
  size_t i = pos;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (!py::is_space(c)) break;
      ++i;
      continue;
    }
    size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + n > s.size()) break;
    const std::u32string cp = py::decode(s.substr(i, n));
    if (cp.size() != 1 || !py::is_space(cp[0])) break;
    i += n;
  }
  return i - pos;
}

bool all_whitespace(std::string_view s) { return !s.empty() && whitespace_run(s, 0) == s.size(); }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    push(TokenType::kEof, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(message, line_, column()); }

  int column() const {
    const size_t nl = pos_ == 0 ? std::string::npos : src_.rfind('\n', pos_ - 1);
    const size_t start = nl == std::string::npos ? 0 : nl + 1;
    return static_cast<int>(py::length(std::string_view(src_).substr(start, pos_ - start))) + 1;
  }

  void push(TokenType type, std::string value) { tokens_.push_back(Token{type, std::move(value), line_, column()}); }

  // Moves pos_ forward by n bytes, counting lines.
  void advance(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (src_[pos_ + i] == '\n') ++line_;
    }
    pos_ += n;
  }

  void emit_data(std::string text, size_t consumed) {
    const int start_line = line_;
    advance(consumed);
    if (!text.empty()) tokens_.push_back(Token{TokenType::kData, std::move(text), start_line, 1});
  }

  // "root" state: text up to the next `{{`, `{%` or `{#`, then the tag.
  void lex_root() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit_data(src_.substr(pos_), src_.size() - pos_);
        return;
      }
      const char c = src_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    std::string text = src_.substr(pos_, tag - pos_);

    // root rule: `-` strips all whitespace before the tag; otherwise lstrip_blocks strips the spaces before a block
    // or comment tag when only whitespace separates it from the start of its line.
    if (sign == '-') {
      text = rstrip_ws(text);
    } else if (sign != '+' && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_whitespace(std::string_view(text).substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    emit_data(std::move(text), tag - pos_);
    const size_t open_len = sign ? 3 : 2;
    line_starting_ = false;

    if (kind == '#') {
      advance(open_len);
      lex_comment();
    } else if (kind == '%' && try_raw(open_len)) {
      return;
    } else {
      push(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "");
      advance(open_len);
      lex_tag(kind == '{');
    }
  }

  // Comment rule: `(.*?)((?:\+#}|\-#}\s*|#}\n?))`.
  void lex_comment() {
    for (size_t p = pos_; p + 1 < src_.size(); ++p) {
      if (src_[p] == '+' && src_.compare(p + 1, 2, "#}") == 0) {
        finish_tag(p - pos_ + 3, false);
        return;
      }
      if (src_[p] == '-' && src_.compare(p + 1, 2, "#}") == 0) {
        const size_t end = p + 3;
        finish_tag(end - pos_ + whitespace_run(src_, end), false);
        return;
      }
      if (src_[p] == '#' && src_[p + 1] == '}') {
        size_t end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
        finish_tag(end - pos_, false);
        return;
      }
    }
    fail("missing end of comment tag");
  }

  // Consumes n bytes ending a tag and records whether the next text starts a line.
  void finish_tag(size_t n, bool push_end, TokenType end_type = TokenType::kBlockEnd) {
    if (push_end) push(end_type, "");
    line_starting_ = n > 0 && src_[pos_ + n - 1] == '\n';
    advance(n);
  }

  // raw_begin rule: `{%[-+]?\s*raw\s*(?:-%}\s*|%})`; the body is data up to `{%[-+]?\s*endraw\s*(...)`.
  bool try_raw(size_t open_len) {
    size_t p = pos_ + open_len;
    p += whitespace_run(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < src_.size() && is_name_char(src_[p])) return false;  // e.g. `{% rawfoo %}`
    p += whitespace_run(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      p += whitespace_run(src_, p);
    } else if (src_.compare(p, 2, "%}") == 0) {
      p += 2;
    } else {
      return false;
    }
    const int raw_line = line_;
    advance(p - pos_);
    // Find `{%[-+]?\s*endraw\s*(\+%}|-%}\s*|%}\n?)`.
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      char sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) sign = src_[r++];
      r += whitespace_run(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      r += whitespace_run(src_, r);
      size_t end;
      if (src_.compare(r, 3, "+%}") == 0) {
        end = r + 3;
      } else if (src_.compare(r, 3, "-%}") == 0) {
        end = r + 3 + whitespace_run(src_, r + 3);
      } else if (src_.compare(r, 2, "%}") == 0) {
        end = r + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      std::string text = src_.substr(pos_, q - pos_);
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && all_whitespace(std::string_view(text).substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      emit_data(std::move(text), q - pos_);
      line_starting_ = false;
      finish_tag(end - pos_, false);
      return true;
    }
    line_ = raw_line;
    fail("missing end of raw directive");
  }

  // Inside `{{ }}` or `{% %}`: expression tokens until the end tag (only matched while brackets are balanced).
  void lex_tag(bool variable) {
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) fail(variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (balance.empty()) {
        if (variable) {
          if (src_.compare(pos_, 3, "-}}") == 0) {
            finish_tag(3 + whitespace_run(src_, pos_ + 3), true, TokenType::kVarEnd);
            return;
          }
          if (src_.compare(pos_, 2, "}}") == 0) {
            finish_tag(2, true, TokenType::kVarEnd);
            return;
          }
        } else {
          if (src_.compare(pos_, 3, "+%}") == 0) {
            finish_tag(3, true);
            return;
          }
          if (src_.compare(pos_, 3, "-%}") == 0) {
            finish_tag(3 + whitespace_run(src_, pos_ + 3), true);
            return;
          }
          if (src_.compare(pos_, 2, "%}") == 0) {
            size_t n = 2;
            if (pos_ + 2 < src_.size() && src_[pos_ + 2] == '\n') ++n;  // trim_blocks
            finish_tag(n, true);
            return;
          }
        }
      }
      if (const size_t ws = whitespace_run(src_, pos_); ws > 0) {
        advance(ws);
        continue;
      }
      const char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        push(TokenType::kName, src_.substr(pos_, e - pos_));
        advance(e - pos_);
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(balance);
      }
    }
  }

  void lex_operator(std::vector<char>& balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        push(TokenType::kOperator, op);
        advance(2);
        return;
      }
    }
    const char c = src_[pos_];
    static const std::string kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string::npos) {
      const std::u32string cp = py::decode(std::string_view(src_).substr(pos_, 4));
      std::string shown;
      py::append_utf8(shown, cp.empty() ? U'?' : cp[0]);
      fail("unexpected character '" + shown + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    push(TokenType::kOperator, std::string(1, c));
    advance(1);
  }

  // Digits with optional single underscores between them: `(\d+_)*\d+`.
  size_t digit_run(size_t p) const {
    const size_t start = p;
    while (p < src_.size() && is_digit(src_[p])) {
      ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) ++p;
    }
    return p - start;
  }

  void lex_number() {
    // float_re first: digits, then `.digits` and/or an exponent.
    size_t p = pos_ + digit_run(pos_);
    bool is_float = false;
    size_t q = p;
    if (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) {
      q += 1 + digit_run(q + 1);
      is_float = true;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < src_.size() && is_digit(src_[r])) {
        q = r + digit_run(r);
        is_float = true;
      }
    }
    if (is_float) {
      std::string text;
      for (size_t i = pos_; i < q; ++i) {
        if (src_[i] != '_') text += src_[i];
      }
      push(TokenType::kFloat, text);
      advance(q - pos_);
      return;
    }
    // integer_re: 0b / 0o / 0x prefixes, `[1-9](_?\d)*` or `0(_?0)*`.
    if (src_[pos_] == '0' && pos_ + 1 < src_.size()) {
      const char x = static_cast<char>(src_[pos_ + 1] | 0x20);
      int base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 0;
      if (base) {
        auto ok = [&](char d) {
          d = static_cast<char>(d | 0x20);
          if (base == 2) return d == '0' || d == '1';
          if (base == 8) return d >= '0' && d <= '7';
          return is_digit(d) || (d >= 'a' && d <= 'f');
        };
        size_t r = pos_ + 2;
        std::string digits;
        while (r < src_.size()) {
          if (src_[r] == '_' && r + 1 < src_.size() && ok(src_[r + 1])) ++r;
          if (r < src_.size() && ok(src_[r])) {
            digits += src_[r++];
          } else {
            break;
          }
        }
        if (!digits.empty()) {
          push_integer(digits, base);
          advance(r - pos_);
          return;
        }
      }
      size_t r = pos_ + 1;  // `0(_?0)*`
      while (r < src_.size()) {
        if (src_[r] == '0') {
          ++r;
        } else if (src_[r] == '_' && r + 1 < src_.size() && src_[r + 1] == '0') {
          r += 2;
        } else {
          break;
        }
      }
      push_integer("0", 10);
      advance(r - pos_);
      return;
    }
    std::string digits;
    for (size_t i = pos_; i < p; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    push_integer(digits, 10);
    advance(p - pos_);
  }

  void push_integer(const std::string& digits, int base) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(digits.c_str(), &end, base);
    if (errno == ERANGE || end != digits.c_str() + digits.size()) {
      fail("integer literal " + digits + " does not fit in 64 bits");
    }
    push(TokenType::kInteger, std::to_string(v));
  }

  static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    c = static_cast<char>(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  }

  // string_re plus Python's "unicode-escape" decoding, which jinja2 applies to every string literal.
  void lex_string() {
    const char quote = src_[pos_];
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) {
      p += src_[p] == '\\' ? 2 : 1;
    }
    if (p >= src_.size()) fail("unterminated string literal");
    const std::string_view body(src_.data() + pos_ + 1, p - pos_ - 1);
    std::string out;
    for (size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      const char e = body[i + 1];  // the string regex guarantees a character after a backslash
      i += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': case 'u': case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int k = 0; k < n; ++k) {
            const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
            if (h < 0) fail(std::string("truncated \\") + e + " escape in string literal");
            v = v * 16 + static_cast<uint32_t>(h);
          }
          if (v > 0x10FFFF) fail("illegal Unicode character in string literal");
          if (v >= 0xD800 && v <= 0xDFFF) fail("surrogate escape in string literal is not supported");
          py::append_utf8(out, v);
          i += static_cast<size_t>(n);
          break;
        }
        case 'N':
          fail("\\N{...} escapes in string literals are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
              v = v * 8 + static_cast<uint32_t>(body[i++] - '0');
            }
            py::append_utf8(out, v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // jinja2 encodes with backslashreplace before decoding, so `\é` becomes the text `\xe9`.
            size_t start = i - 1;
            size_t len = 1;
            while (start + len < body.size() && (static_cast<unsigned char>(body[start + len]) & 0xC0) == 0x80) ++len;
            const std::u32string cp = py::decode(body.substr(start, len));
            char buf[16];
            const uint32_t v = cp.empty() ? 0xFFFD : cp[0];
            if (v <= 0xFF) {
              std::snprintf(buf, sizeof(buf), "\\x%02x", v);
            } else if (v <= 0xFFFF) {
              std::snprintf(buf, sizeof(buf), "\\u%04x", v);
            } else {
              std::snprintf(buf, sizeof(buf), "\\U%08x", v);
            }
            out += buf;
            i = start + len;
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    push(TokenType::kString, std::move(out));
    advance(p + 1 - pos_);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

// Newlines (\r\n, \r, \n) become \n and, as keep_trailing_newline=False, one final newline is dropped.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (const size_t bad = py::find_invalid_utf8(source); bad != std::string_view::npos) {
    throw TemplateError("template is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace voltserve::chat
