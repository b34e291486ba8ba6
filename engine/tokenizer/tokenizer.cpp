// Tokenizer: loading and the encode/decode pipeline (see tokenizer.h). encode = added-token split on the raw text,
// NFC per remaining segment, normalized added-token split, regex pre-tokenization, BPE per piece (as HF
// `Tokenizer::encode`); decode = per-token ByteLevel bytes, then lossy UTF-8 (as HF `Tokenizer::decode`).
#include "voltserve/tokenizer.h"

#include <fstream>
#include <sstream>

#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_impl.h"
#include "voltserve/utf8.h"

namespace voltserve {

using tokenizer::AddedVocabulary;
using tokenizer::Segment;
using tokenizer::TokenKind;

namespace {

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return data_loss("error reading " + path.string());
  return std::move(ss).str();
}

// Pre-tokenizes one normalized segment and runs BPE on each piece.
Status encode_normalized(const tokenizer::TokenizerImpl& impl, std::string_view text, std::vector<int32_t>& ids) {
  thread_local std::vector<std::pair<size_t, size_t>> pieces, next;
  pieces.clear();
  pieces.emplace_back(0, text.size());
  for (const auto& splitter : impl.splitters) {
    next.clear();
    for (const auto& [b, e] : pieces) VS_RETURN_IF_ERROR(splitter.split(text.substr(b, e - b), b, next));
    pieces.swap(next);
  }
  for (const auto& [b, e] : pieces) impl.bpe->encode_word(text.substr(b, e - b), ids);
  return Status::ok();
}

Status encode_segment(const tokenizer::TokenizerImpl& impl, std::string_view raw, bool parse_special,
                      std::vector<int32_t>& ids) {
  std::string normalized_storage;
  std::string_view text = raw;
  if (impl.nfc && !tokenizer::is_nfc_quick(raw)) {
    if (!tokenizer::nfc_normalize(raw, normalized_storage)) return internal_error("NFC normalization failed");
    text = normalized_storage;
  }
  if (!impl.added.has_normalized_tokens()) return encode_normalized(impl, text, ids);
  std::vector<Segment> segments;
  impl.added.split(text, AddedVocabulary::Pass::kNormalized, parse_special, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      VS_RETURN_IF_ERROR(encode_normalized(impl, text.substr(s.begin, s.end - s.begin), ids));
    }
  }
  return Status::ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json) {
  VS_ASSIGN_OR_RETURN(auto impl, tokenizer::parse_tokenizer_json(tokenizer_json, "tokenizer.json"));
  return Tokenizer(std::shared_ptr<const tokenizer::TokenizerImpl>(std::move(impl)));
}

Result<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return not_found("tokenizer directory " + dir.string() + " does not exist");
  const auto json_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(json_path, ec)) return not_found(json_path.string() + " does not exist");
  VS_ASSIGN_OR_RETURN(std::string text, read_file(json_path));
  VS_ASSIGN_OR_RETURN(auto impl, tokenizer::parse_tokenizer_json(text, json_path.string()));
  const auto config_path = dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path, ec)) {
    VS_ASSIGN_OR_RETURN(std::string config, read_file(config_path));
    VS_RETURN_IF_ERROR(tokenizer::apply_tokenizer_config(config, config_path.string(), *impl));
  }
  const auto template_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(template_path, ec)) {
    VS_ASSIGN_OR_RETURN(impl->chat_template, read_file(template_path));
  }
  return Tokenizer(std::shared_ptr<const tokenizer::TokenizerImpl>(std::move(impl)));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view utf8, bool parse_special) const {
  const size_t bad = tokenizer::find_invalid_utf8(utf8);
  if (bad != utf8.size()) {
    return invalid_argument("text is not valid UTF-8 (byte " + std::to_string(bad) + " of " +
                            std::to_string(utf8.size()) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(utf8.size() / 3 + 4);
  std::vector<Segment> segments;
  impl_->added.split(utf8, AddedVocabulary::Pass::kRaw, parse_special, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      VS_RETURN_IF_ERROR(encode_segment(*impl_, utf8.substr(s.begin, s.end - s.begin), parse_special, ids));
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= impl_->vocab_size()) continue;
    const TokenKind k = impl_->kind[id];
    if (k == TokenKind::kNone || (skip_special && k == TokenKind::kSpecial)) continue;
    bytes.append(impl_->token_bytes[id]);
  }
  std::string out;
  out.reserve(bytes.size());
  tokenizer::append_utf8_lossy(bytes, /*final=*/true, out);
  return out;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  auto it = impl_->added_ids.find(std::string(token));
  if (it != impl_->added_ids.end()) return it->second;
  return impl_->bpe->token_id(token);
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < impl_->vocab_size() ? impl_->token_text[id] : kEmpty;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size()) return {};
  return impl_->token_bytes[id];
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size() && impl_->kind[id] == TokenKind::kSpecial;
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size() &&
         (impl_->kind[id] == TokenKind::kSpecial || impl_->kind[id] == TokenKind::kAdded);
}

const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::pad_token() const { return impl_->pad_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace voltserve
