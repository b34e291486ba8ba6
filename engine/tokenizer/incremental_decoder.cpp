// IncrementalDecoder (see tokenizer.h): decode() in pieces. Because lossy UTF-8 assembly decides each maximal
// invalid subpart from the bytes so far, holding back only a trailing incomplete sequence keeps the chunks'
// concatenation equal to decode() of all ids. Tested in tests/tokenizer/test_incremental_decoder.cpp.
#include "voltserve/tokenizer.h"
#include "voltserve/utf8.h"

namespace voltserve {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  const std::string_view bytes = tokenizer_.token_bytes(id);
  if (bytes.empty()) return {};
  pending_.append(bytes);
  std::string out;
  const size_t used = tokenizer::append_utf8_lossy(pending_, /*final=*/false, out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  tokenizer::append_utf8_lossy(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace voltserve
