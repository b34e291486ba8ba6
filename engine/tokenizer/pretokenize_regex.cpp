// PCRE2-backed Split pre-tokenizer and the Oniguruma -> PCRE2 pattern translation (see pretokenize_regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize_regex.h"

#include <pcre2.h>

#include <string>

namespace voltserve::tokenizer {
namespace {

// Unicode White_Space (PropList.txt), which is what Oniguruma's \s matches in UTF-8 mode.
constexpr std::string_view kWhiteSpaceItems =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Code points that are \p{N} for HF's Oniguruma (Unicode 15) but unassigned in Debian's PCRE2 10.42 tables
// (Unicode 14): the Kaktovik numerals. An exhaustive check over all code points in several regex contexts found no
// other difference for the Qwen patterns; listing them is harmless once PCRE2 knows them too.
constexpr std::string_view kExtraNumberItems = "\\x{1D2C0}-\\x{1D2D3}";

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buf));
}

}  // namespace

Result<std::string> translate_hf_regex(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // index in `pattern` just after '[' or '[^'
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return invalid_argument("regex ends with a lone backslash");
      const char e = pattern[i + 1];
      ++i;
      if (e == 's') {
        if (in_class) {
          out.append(kWhiteSpaceItems);
        } else {
          out.append("[").append(kWhiteSpaceItems).append("]");
        }
        continue;
      }
      if (e == 'p' && pattern.substr(i + 1, 3) == "{N}") {
        i += 3;
        if (in_class) {
          out.append("\\p{N}").append(kExtraNumberItems);
        } else {
          out.append("[\\p{N}").append(kExtraNumberItems).append("]");
        }
        continue;
      }
      if (e == 'S') {
        if (in_class) return unimplemented("regex: \\S inside a character class is not supported");
        out.append("[^").append(kWhiteSpaceItems).append("]");
        continue;
      }
      if (e == 'h' || e == 'H' || e == 'R' || e == 'X' || e == 'K' || e == 'G' || e == 'g' || e == 'k' ||
          e == 'y' || e == 'Y' || e == 'O' || e == 'N') {
        // These mean different things (or nothing) in Oniguruma and PCRE2.
        return unimplemented(std::string("regex: escape \\") + e + " is not supported");
      }
      out.push_back('\\');
      out.push_back(e);
      continue;
    }
    if (in_class) {
      if (c == ']' && i > class_start) {
        in_class = false;
      } else if (c == '[') {
        if (i + 1 < pattern.size() && pattern[i + 1] == ':') {
          const size_t close = pattern.find(":]", i + 2);
          if (close == std::string_view::npos) return invalid_argument("regex: unterminated POSIX class");
          out.append(pattern.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
        return unimplemented("regex: nested character classes (Oniguruma syntax) are not supported");
      } else if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        return unimplemented("regex: class intersection && (Oniguruma syntax) is not supported");
      }
      out.push_back(c);
      continue;
    }
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out.push_back('^');
        ++i;
      }
      class_start = i + 1;  // a ']' right here is a literal
      continue;
    }
    if (c == '(' && i + 2 < pattern.size() && pattern[i + 1] == '?') {
      // Oniguruma's (?~...) absent operator and (?m) (dot-all there) have no PCRE2 equivalent.
      const char k = pattern[i + 2];
      if (k == '~') return unimplemented("regex: absent operator (?~...) is not supported");
      size_t j = i + 2;
      while (j < pattern.size() && (pattern[j] == 'i' || pattern[j] == 'm' || pattern[j] == 'x' || pattern[j] == '-')) {
        if (pattern[j] == 'm') return unimplemented("regex: option (?m) (Oniguruma dot-all) is not supported");
        ++j;
      }
    }
    out.push_back(c);
  }
  if (in_class) return invalid_argument("regex: unterminated character class");
  return out;
}

struct RegexSplitter::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

Result<RegexSplitter> RegexSplitter::compile(const std::string& pcre2_pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("regex does not compile at offset " + std::to_string(offset) + ": " +
                            pcre2_error_text(error) + " (pattern: " + pcre2_pattern + ")");
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  holder->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return RegexSplitter(std::move(holder));
}

namespace {

// Per-thread match state: a one-pair match block and a JIT stack large enough for long whitespace runs.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

}  // namespace

Status RegexSplitter::split(std::string_view text, size_t base,
                            std::vector<std::pair<size_t, size_t>>& pieces) const {
  thread_local MatchState state;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;     // where the next search starts
  size_t last = 0;    // end of the previous piece
  while (pos < text.size()) {
    const int rc = code_->jit ? pcre2_jit_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                                state.data, state.context)
                              : pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                            state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return internal_error("pre-tokenizer regex failed: " + pcre2_error_text(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (start > last) pieces.emplace_back(base + last, base + start);
    if (end > start) {
      pieces.emplace_back(base + start, base + end);
      last = end;
      pos = end;
    } else {
      // Empty match: nothing to emit; step over one code point.
      last = start;
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (text.size() > last) pieces.emplace_back(base + last, base + text.size());
  return Status::ok();
}

}  // namespace voltserve::tokenizer
