// The parts of a loaded Tokenizer (private to engine/tokenizer): built by tokenizer_json.cpp from tokenizer.json,
// completed by tokenizer_config.cpp, used by tokenizer.cpp and incremental_decoder.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pretokenize_regex.h"
#include "voltserve/status.h"

namespace voltserve::tokenizer {

enum class TokenKind : uint8_t { kNone, kRegular, kAdded, kSpecial };

struct TokenizerImpl {
  std::unique_ptr<BpeModel> bpe;
  AddedVocabulary added;
  bool nfc = false;
  std::vector<RegexSplitter> splitters;  // applied in order, each splitting the pieces of the previous one

  // Indexed by id, 0..vocab_size-1.
  std::vector<std::string> token_text;   // vocab string / added-token content
  std::vector<std::string> token_bytes;  // what the ByteLevel decoder turns the token into
  std::vector<TokenKind> kind;
  std::unordered_map<std::string, int32_t> added_ids;  // added-token content -> id (wins over the vocab)

  std::string eos_token, bos_token, pad_token, chat_template;

  int32_t vocab_size() const { return static_cast<int32_t>(kind.size()); }
};

// tokenizer.json text -> TokenizerImpl (no config fields). `source` names the file in error messages.
Result<std::unique_ptr<TokenizerImpl>> parse_tokenizer_json(std::string_view json_text, const std::string& source);

// Reads tokenizer_config.json text into the eos/bos/pad/chat_template fields.
Status apply_tokenizer_config(std::string_view json_text, const std::string& source, TokenizerImpl& impl);

}  // namespace voltserve::tokenizer
