// Tokenizer: a Hugging Face `tokenizer.json` byte-level BPE (Qwen2/3/3.5 style) with its added tokens, plus the
// bits of tokenizer_config.json the server needs. Public: the server tokenizes and detokenizes, the engine sees ids
// only (implementation in engine/tokenizer/). Tested id-for-id against the `tokenizers` library on the real Qwen3
// tokenizer and the Qwen3.5-style fixture (tests/tokenizer/, tools/tokenizer_diff.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

namespace tokenizer {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // Reads dir/tokenizer.json (required) and dir/tokenizer_config.json (optional: eos/bos tokens, chat template);
  // dir/chat_template.jinja, when present, is the chat template (it wins over tokenizer_config.json, as in
  // transformers). Unsupported tokenizer.json features are rejected with kUnimplemented naming the feature;
  // malformed files give kInvalidArgument / kDataLoss naming the file and field.
  static Result<Tokenizer> load(const std::filesystem::path& dir);
  // Same, from the tokenizer.json text alone (no config: no eos/bos/template). For tests and tools.
  static Result<Tokenizer> from_json(std::string_view tokenizer_json);

  // Text -> ids, as HF `Tokenizer.encode(text, add_special_tokens=False)`. parse_special = true matches special
  // added tokens (special: true) in the text, as HF does by default; false treats their text as plain text (HF
  // `encode_special_tokens = True`, transformers `split_special_tokens=True`). Non-special added tokens
  // (e.g. Qwen's <think>, <tool_call>) are matched either way, as in HF. Invalid UTF-8: kInvalidArgument.
  Result<std::vector<int32_t>> encode(std::string_view utf8, bool parse_special = true) const;
  // Ids -> text, as HF `decode`: ids that are not tokens are dropped, bytes that do not form UTF-8 become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Token string (byte-level form for regular tokens, e.g. "Ġthe"; content for added tokens) -> id.
  std::optional<int32_t> token_id(std::string_view token) const;
  // Token string for an id ("" for an id that is not a token).
  const std::string& token_text(int32_t id) const;
  // 1 + the largest id (regular or added). The model's embedding may have more rows (padding).
  int32_t vocab_size() const;
  // An added token marked special: true (skipped by decode(skip_special = true)).
  bool is_special(int32_t id) const;
  // An added token of any kind (special or not).
  bool is_added(int32_t id) const;
  // The raw bytes an id decodes to before UTF-8 assembly (the ByteLevel decoder's per-token output).
  std::string_view token_bytes(int32_t id) const;

  const std::string& eos_token() const;
  const std::string& bos_token() const;  // "" when none
  const std::string& pad_token() const;  // "" when none
  const std::string& chat_template() const;  // "" when none

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer::TokenizerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const tokenizer::TokenizerImpl> impl_;  // shared: copies are cheap and share the piece cache
};

// Streams text while ids arrive one at a time: each push() returns the text that is complete so far and never
// splits a UTF-8 sequence (incomplete trailing bytes are held back until completed); flush() returns what is
// left (an incomplete sequence becomes U+FFFD, as decode() does). The concatenation of all chunks equals
// tokenizer.decode(all ids, skip_special). Holds its own (cheap, shared) copy of the tokenizer.
class IncrementalDecoder {
 public:
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special);
  std::string push(int32_t id);
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes: the start of a UTF-8 sequence that may still be completed
};

}  // namespace voltserve
