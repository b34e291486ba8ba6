// NFC via utf8proc (see nfc.h).
#include "tokenizer/nfc.h"

#include <utf8proc.h>

#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace voltserve::tokenizer {
namespace {

// A code point that NFC leaves alone whatever surrounds it, as long as its neighbours are such code points too:
// a starter (combining class 0) without a canonical decomposition that never composes with anything.
bool is_inert(char32_t cp) {
  if (cp < 0x300) return true;  // below U+0300: starters that can only be the first half of a composition
  // Hangul jamo that compose algorithmically with a preceding L jamo / LV syllable.
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;  // canonical decomposition
  return p->comb_index == UINT16_MAX;
}

}  // namespace

bool is_nfc_quick(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // Lead bytes below 0xCC start code points below U+0300.
    if (static_cast<uint8_t>(text[pos]) < 0xCC) {
      ++pos;
      continue;
    }
    if (!is_inert(next_code_point(text, pos))) return false;
  }
  return true;
}

bool nfc_normalize(std::string_view text, std::string& out) {
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  thread_local std::vector<utf8proc_int32_t> buffer;
  if (buffer.size() < text.size() + 16) buffer.resize(text.size() + 16);
  const auto* src = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  auto n = utf8proc_decompose(src, static_cast<utf8proc_ssize_t>(text.size()), buffer.data(),
                              static_cast<utf8proc_ssize_t>(buffer.size()), options);
  if (n < 0) return false;
  if (static_cast<size_t>(n) > buffer.size()) {
    buffer.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(src, static_cast<utf8proc_ssize_t>(text.size()), buffer.data(),
                           static_cast<utf8proc_ssize_t>(buffer.size()), options);
    if (n < 0) return false;
  }
  n = utf8proc_normalize_utf32(buffer.data(), n, options);
  if (n < 0) return false;
  out.clear();
  out.reserve(text.size() + 8);
  for (utf8proc_ssize_t i = 0; i < n; ++i) append_utf8(static_cast<char32_t>(buffer[i]), out);
  return true;
}

}  // namespace voltserve::tokenizer
