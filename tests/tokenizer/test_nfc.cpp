// NFC through utf8proc and the quick check that skips it (engine/tokenizer/nfc.h). The soundness test walks every
// code point: a code point the quick check passes must be left alone by NFC and must never be the second part of
// a canonical composition.
#include <catch2/catch_test_macros.hpp>
#include <utf8proc.h>

#include "tokenizer/nfc.h"
#include "voltserve/utf8.h"

using namespace voltserve::tokenizer;

namespace {
std::string nfc(std::string_view s) {
  std::string out;
  REQUIRE(nfc_normalize(s, out));
  return out;
}
std::string cp_str(char32_t cp) {
  std::string s;
  append_utf8(cp, s);
  return s;
}
}  // namespace

TEST_CASE("NFC composes, reorders and maps singletons", "[unit]") {
  CHECK(nfc("e\xCC\x81") == "\xC3\xA9");                            // e + U+0301 -> é
  CHECK(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // jamo G A G -> 각
  CHECK(nfc("\xE0\xA5\x98") == "\xE0\xA4\x95\xE0\xA4\xBC");          // U+0958 is excluded from composition
  CHECK(nfc("q\xCC\x87\xCC\xA3") == "q\xCC\xA3\xCC\x87");            // canonical reordering (ccc 230 vs 220)
  CHECK(nfc("\xE2\x84\xAB") == "\xC3\x85");                          // Angstrom sign -> Å
  CHECK(nfc("plain") == "plain");
  CHECK(nfc("") == "");
}

TEST_CASE("NFC leaves code points HF's older tables do not know inert, as HF does", "[unit]") {
  // U+07FD NKO DANTAYALAN (Unicode 11, ccc 220): HF does not let a + U+0301 compose across it.
  CHECK(nfc("a\xDF\xBD\xCC\x81") == "a\xDF\xBD\xCC\x81");
  CHECK(nfc("e\xCC\x81\xDF\xBD" "e\xCC\x81") == "\xC3\xA9\xDF\xBD\xC3\xA9");  // the stretches around it still are
  // U+0898 (Unicode 14, ccc 230) is not reordered after U+0323 (ccc 220).
  CHECK(nfc("\xE0\xA2\x98\xCC\xA3") == "\xE0\xA2\x98\xCC\xA3");
}

TEST_CASE("NFC quick check", "[unit]") {
  CHECK(is_nfc_quick("hello world"));
  CHECK(is_nfc_quick("caf\xC3\xA9"));
  CHECK(is_nfc_quick("\xE4\xBD\xA0\xE5\xA5\xBD"));  // 你好
  CHECK_FALSE(is_nfc_quick("e\xCC\x81"));
  CHECK_FALSE(is_nfc_quick("\xE1\x85\xA1"));  // a medial jamo composes with a preceding initial one
}

TEST_CASE("NFC quick check is sound over all code points", "[unit]") {
  int n_inert = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string s = cp_str(cp);
    if (is_nfc_quick(s)) {
      ++n_inert;
      if (nfc(s) != s) FAIL("quick check passes U+" << std::hex << static_cast<uint32_t>(cp) << " but NFC changes it");
    }
    // Every code point after the first in a canonical decomposition must fail the quick check, or text holding
    // that decomposition would skip the composition NFC performs.
    utf8proc_int32_t buf[32];
    utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 32,
                                                 static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE), nullptr);
    if (n >= 2 && nfc(s) == s) {
      for (utf8proc_ssize_t i = 1; i < n; ++i) {
        if (is_nfc_quick(cp_str(static_cast<char32_t>(buf[i])))) {
          FAIL("U+" << std::hex << static_cast<uint32_t>(buf[i]) << " composes (into U+" << static_cast<uint32_t>(cp)
                    << ") but passes the quick check");
        }
      }
    }
  }
  CHECK(n_inert > 200000);  // the quick check must actually skip most code points
}
