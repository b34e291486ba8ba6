// UTF-8 validation and lossy assembly (see utf8.h). The byte-range table is the one in the Unicode Standard,
// Table 3-7 "Well-Formed UTF-8 Byte Sequences".
#include "voltserve/utf8.h"

namespace voltserve::tokenizer {
namespace {

// Length of the sequence a lead byte starts (0 = never valid as a lead) and the allowed range of the second byte;
// later continuation bytes are always 80..BF.
struct LeadInfo {
  uint8_t length;
  uint8_t lo;
  uint8_t hi;
};

constexpr LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

enum class SeqState { kValid, kInvalid, kIncomplete };

// Examines the sequence at bytes[pos]: kValid with n = its length; kInvalid with n = the length of the maximal
// invalid subpart (>= 1); kIncomplete when the input ends inside a so-far valid sequence (n = bytes left).
SeqState examine(std::string_view bytes, size_t pos, size_t& n) {
  const auto b0 = static_cast<uint8_t>(bytes[pos]);
  const LeadInfo info = lead_info(b0);
  if (info.length == 1) {
    n = 1;
    return SeqState::kValid;
  }
  if (info.length == 0) {
    n = 1;
    return SeqState::kInvalid;
  }
  const size_t left = bytes.size() - pos;
  for (size_t i = 1; i < info.length; ++i) {
    if (i >= left) {
      n = left;
      return SeqState::kIncomplete;
    }
    const auto b = static_cast<uint8_t>(bytes[pos + i]);
    const uint8_t lo = i == 1 ? info.lo : 0x80;
    const uint8_t hi = i == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) {
      n = i;
      return SeqState::kInvalid;
    }
  }
  n = info.length;
  return SeqState::kValid;
}

}  // namespace

size_t find_invalid_utf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (pos + 8 <= bytes.size()) {
      uint64_t word = 0;
      for (int i = 0; i < 8; ++i) word |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[pos + i])) << (8 * i);
      if (word & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= bytes.size()) break;
    size_t n = 0;
    if (examine(bytes, pos, n) != SeqState::kValid) return pos;
    pos += n;
  }
  return bytes.size();
}

size_t append_utf8_lossy(std::string_view bytes, bool final, std::string& out) {
  size_t pos = 0;
  size_t run_start = 0;  // start of the valid run not yet copied
  while (pos < bytes.size()) {
    size_t n = 0;
    const SeqState state = examine(bytes, pos, n);
    if (state == SeqState::kValid) {
      pos += n;
      continue;
    }
    out.append(bytes.substr(run_start, pos - run_start));
    if (state == SeqState::kIncomplete && !final) return pos;
    out.append(kReplacementChar);
    pos += n;
    run_start = pos;
  }
  out.append(bytes.substr(run_start, pos - run_start));
  return pos;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view valid, size_t& pos) {
  const auto b0 = static_cast<uint8_t>(valid[pos]);
  auto cont = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(valid[pos + i]) & 0x3F); };
  char32_t cp;
  if (b0 < 0x80) {
    cp = b0;
    pos += 1;
  } else if (b0 < 0xE0) {
    cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | cont(1);
    pos += 2;
  } else if (b0 < 0xF0) {
    cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2);
    pos += 3;
  } else {
    cp = (static_cast<char32_t>(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    pos += 4;
  }
  return cp;
}

}  // namespace voltserve::tokenizer
