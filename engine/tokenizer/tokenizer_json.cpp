// tokenizer.json -> TokenizerImpl: reads the pipeline HF `tokenizers` serializes and accepts exactly the parts this
// implementation reproduces (byte-level BPE with NFC, Split regexes and ByteLevel); anything else is rejected with
// kUnimplemented naming the field and its value. Tested by tests/tokenizer/test_tokenizer_json.cpp.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_impl.h"
#include "voltserve/utf8.h"

namespace voltserve::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pattern, which ByteLevel(use_regex=true) applies.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

std::string short_dump(const json& j) {
  std::string s = j.dump();
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// model.vocab and model.merges hold ~150k entries each in real tokenizers; building them as a DOM (std::map nodes)
// and then copying them out dominated load time, so the parse callback moves them straight into these vectors and
// leaves the DOM objects empty.
struct Captured {
  bool vocab_seen = false;
  bool merges_seen = false;
  std::vector<std::pair<std::string, json>> vocab;  // value kept as JSON only to report a bad one
  std::vector<json> merges;
};

class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  Status bad(const std::string& field, const std::string& what) const {
    return invalid_argument(source_ + ": " + field + ": " + what);
  }
  Status unsupported(const std::string& field, const std::string& what) const {
    return unimplemented(source_ + ": " + field + ": " + what + " is not supported");
  }

  // Optional boolean field with a default.
  Result<bool> get_bool(const json& obj, const char* key, bool def, const std::string& where) const {
    if (!obj.contains(key) || obj[key].is_null()) return def;
    if (!obj[key].is_boolean()) return bad(where + "." + key, "expected true/false, got " + short_dump(obj[key]));
    return obj[key].get<bool>();
  }

  Status parse_normalizer(const json& n, TokenizerImpl& impl) const {
    if (n.is_null()) return Status::ok();
    const std::string t = type_of(n);
    if (t == "NFC") {
      impl.nfc = true;
      return Status::ok();
    }
    if (t == "Sequence") {
      if (!n.contains("normalizers") || !n["normalizers"].is_array()) return bad("normalizer", "Sequence without a \"normalizers\" array");
      for (const auto& sub : n["normalizers"]) VS_RETURN_IF_ERROR(parse_normalizer(sub, impl));
      return Status::ok();
    }
    if (t.empty()) return bad("normalizer", "expected an object with a \"type\", got " + short_dump(n));
    return unsupported("normalizer", "type \"" + t + "\"");
  }

  Status add_regex(std::string_view pattern, const std::string& field, TokenizerImpl& impl) const {
    auto translated = translate_hf_regex(pattern);
    if (!translated.is_ok()) {
      return Status(translated.status().code(), source_ + ": " + field + ": " + translated.status().message());
    }
    auto splitter = RegexSplitter::compile(*translated);
    if (!splitter.is_ok()) return bad(field, splitter.status().message());
    impl.splitters.push_back(std::move(*splitter));
    return Status::ok();
  }

  // Sets *byte_level when the ByteLevel step was seen (it must be the last one).
  Status parse_pre_tokenizer(const json& p, const std::string& field, TokenizerImpl& impl, bool& byte_level) const {
    if (byte_level) return unsupported(field, "a pre-tokenizer after ByteLevel");
    const std::string t = type_of(p);
    if (t == "Sequence") {
      if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) return bad(field, "Sequence without a \"pretokenizers\" array");
      for (size_t i = 0; i < p["pretokenizers"].size(); ++i) {
        VS_RETURN_IF_ERROR(parse_pre_tokenizer(p["pretokenizers"][i], field + ".pretokenizers[" + std::to_string(i) + "]", impl, byte_level));
      }
      return Status::ok();
    }
    if (t == "Split") {
      if (!p.contains("pattern") || !p["pattern"].is_object()) return bad(field, "Split without a \"pattern\" object");
      const json& pat = p["pattern"];
      const std::string behavior = p.value("behavior", std::string());
      if (behavior != "Isolated") return unsupported(field + ".behavior", "\"" + behavior + "\" (only Isolated is)");
      VS_ASSIGN_OR_RETURN(bool invert, get_bool(p, "invert", false, field));
      if (invert) return unsupported(field + ".invert", "true");
      if (pat.contains("Regex") && pat["Regex"].is_string()) {
        return add_regex(pat["Regex"].get<std::string>(), field + ".pattern.Regex", impl);
      }
      if (pat.contains("String") && pat["String"].is_string()) {
        const std::string literal = pat["String"].get<std::string>();
        if (literal.empty()) return unsupported(field + ".pattern.String", "an empty string");
        if (literal.find("\\E") != std::string::npos) return unsupported(field + ".pattern.String", "a literal containing \\E");
        return add_regex("\\Q" + literal + "\\E", field + ".pattern.String", impl);
      }
      return bad(field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}, got " + short_dump(pat));
    }
    if (t == "ByteLevel") {
      VS_ASSIGN_OR_RETURN(bool add_prefix_space, get_bool(p, "add_prefix_space", true, field));
      if (add_prefix_space) return unsupported(field + ".add_prefix_space", "true");
      VS_ASSIGN_OR_RETURN(bool use_regex, get_bool(p, "use_regex", true, field));
      if (use_regex) VS_RETURN_IF_ERROR(add_regex(kGpt2Regex, field + " (ByteLevel use_regex)", impl));
      byte_level = true;
      return Status::ok();
    }
    if (t.empty()) return bad(field, "expected an object with a \"type\", got " + short_dump(p));
    return unsupported(field, "type \"" + t + "\"");
  }

  Status parse_decoder(const json& d) const {
    const std::string t = type_of(d);
    if (t == "ByteLevel") return Status::ok();  // its flags only affect offsets
    if (t == "Sequence" && d.contains("decoders") && d["decoders"].is_array() && d["decoders"].size() == 1) {
      return parse_decoder(d["decoders"][0]);
    }
    if (d.is_null()) return unsupported("decoder", "null (a byte-level BPE needs the ByteLevel decoder)");
    return unsupported("decoder", t.empty() ? short_dump(d) : "type \"" + t + "\"");
  }

  Status parse_post_processor(const json& p) const {
    if (p.is_null()) return Status::ok();
    const std::string t = type_of(p);
    if (t == "ByteLevel") return Status::ok();  // only touches offsets
    if (t == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
      for (const auto& sub : p["processors"]) VS_RETURN_IF_ERROR(parse_post_processor(sub));
      return Status::ok();
    }
    return unsupported("post_processor", t.empty() ? short_dump(p) : "type \"" + t + "\" (it adds tokens)");
  }

  Result<BpeSpec> parse_model(const json& m, Captured& cap) const {
    if (!m.is_object()) return bad("model", "expected an object");
    const std::string t = type_of(m);
    if (!t.empty() && t != "BPE") return unsupported("model.type", "\"" + t + "\" (only BPE is)");
    if (t.empty() && !m.contains("merges")) return bad("model", "no \"type\" and no \"merges\": not a BPE model");
    if (m.contains("dropout") && !m["dropout"].is_null()) {
      if (!m["dropout"].is_number()) return bad("model.dropout", "expected a number or null");
      if (m["dropout"].get<double>() != 0.0) return unsupported("model.dropout", short_dump(m["dropout"]));
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null()) {
        if (!m[key].is_string()) return bad(std::string("model.") + key, "expected a string or null");
        if (!m[key].get<std::string>().empty()) return unsupported(std::string("model.") + key, short_dump(m[key]));
      }
    }
    BpeSpec spec;
    VS_ASSIGN_OR_RETURN(bool byte_fallback, get_bool(m, "byte_fallback", false, "model"));
    if (byte_fallback) return unsupported("model.byte_fallback", "true");
    VS_ASSIGN_OR_RETURN(spec.fuse_unk, get_bool(m, "fuse_unk", false, "model"));
    VS_ASSIGN_OR_RETURN(spec.ignore_merges, get_bool(m, "ignore_merges", false, "model"));
    if (m.contains("unk_token") && !m["unk_token"].is_null()) {
      if (!m["unk_token"].is_string()) return bad("model.unk_token", "expected a string or null");
      spec.unk_token = m["unk_token"].get<std::string>();
    }
    if (!cap.vocab_seen || !m.contains("vocab") || !m["vocab"].is_object()) {
      return bad("model.vocab", "missing or not an object");
    }
    spec.vocab.reserve(cap.vocab.size());
    for (auto& [tok, id] : cap.vocab) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 30)) {
        return bad("model.vocab[\"" + tok + "\"]", "expected a non-negative integer id, got " + short_dump(id));
      }
      spec.vocab.emplace_back(std::move(tok), static_cast<int32_t>(id.get<int64_t>()));
    }
    if (!cap.merges_seen || !m.contains("merges") || !m["merges"].is_array()) {
      return bad("model.merges", "missing or not an array");
    }
    const std::vector<json>& merges = cap.merges;
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& e = merges[i];
      const std::string field = "model.merges[" + std::to_string(i) + "]";
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos) {
          return bad(field, "expected \"left right\", got " + short_dump(e));
        }
        spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      } else {
        return bad(field, "expected \"left right\" or [left, right], got " + short_dump(e));
      }
    }
    return spec;
  }

  Result<std::vector<AddedToken>> parse_added_tokens(const json& root) const {
    std::vector<AddedToken> out;
    if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return out;
    const json& arr = root["added_tokens"];
    if (!arr.is_array()) return bad("added_tokens", "expected an array");
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& e = arr[i];
      const std::string field = "added_tokens[" + std::to_string(i) + "]";
      if (!e.is_object()) return bad(field, "expected an object");
      AddedToken t;
      if (!e.contains("id") || !e["id"].is_number_integer() || e["id"].get<int64_t>() < 0 ||
          e["id"].get<int64_t>() >= (int64_t{1} << 30)) {
        return bad(field + ".id", "expected a non-negative integer");
      }
      t.id = static_cast<int32_t>(e["id"].get<int64_t>());
      if (!e.contains("content") || !e["content"].is_string()) return bad(field + ".content", "expected a string");
      t.content = e["content"].get<std::string>();
      if (find_invalid_utf8(t.content) != t.content.size()) return bad(field + ".content", "not valid UTF-8");
      VS_ASSIGN_OR_RETURN(t.special, get_bool(e, "special", false, field));
      VS_ASSIGN_OR_RETURN(t.normalized, get_bool(e, "normalized", !t.special, field));
      VS_ASSIGN_OR_RETURN(t.lstrip, get_bool(e, "lstrip", false, field));
      VS_ASSIGN_OR_RETURN(t.rstrip, get_bool(e, "rstrip", false, field));
      VS_ASSIGN_OR_RETURN(t.single_word, get_bool(e, "single_word", false, field));
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  std::string source_;
};

}  // namespace

Result<std::unique_ptr<TokenizerImpl>> parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  json root;
  Captured cap;
  try {
    std::string k1, k2;  // current keys at depth 1 and 2
    std::string vocab_key;
    json::parser_callback_t capture = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key) {
        if (depth == 1) k1 = parsed.get<std::string>();
        if (depth == 2) {
          k2 = parsed.get<std::string>();
          if (k1 == "model" && k2 == "vocab") cap.vocab_seen = true;
          if (k1 == "model" && k2 == "merges") cap.merges_seen = true;
        }
        if (depth == 3 && k1 == "model" && k2 == "vocab") vocab_key = std::move(parsed.get_ref<std::string&>());
        return true;
      }
      const bool element_done = event == json::parse_event_t::value || event == json::parse_event_t::array_end ||
                                event == json::parse_event_t::object_end;
      if (depth == 3 && element_done && k1 == "model") {
        if (k2 == "vocab") {
          cap.vocab.emplace_back(std::move(vocab_key), std::move(parsed));
          return false;
        }
        if (k2 == "merges") {
          cap.merges.push_back(std::move(parsed));
          return false;
        }
      }
      return true;
    };
    root = json::parse(json_text, capture);
  } catch (const json::exception& e) {
    return invalid_argument(source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(source + ": expected a JSON object at the top level");
  Parser p(source);
  auto impl = std::make_unique<TokenizerImpl>();
  try {
    for (const char* key : {"truncation", "padding"}) {
      if (root.contains(key) && !root[key].is_null()) return p.unsupported(key, "a non-null value");
    }
    if (!root.contains("model")) return p.bad("model", "missing");
    VS_ASSIGN_OR_RETURN(BpeSpec spec, p.parse_model(root["model"], cap));
    VS_RETURN_IF_ERROR(p.parse_normalizer(root.value("normalizer", json()), *impl));
    bool byte_level = false;
    const json pre = root.value("pre_tokenizer", json());
    if (!pre.is_null()) VS_RETURN_IF_ERROR(p.parse_pre_tokenizer(pre, "pre_tokenizer", *impl, byte_level));
    if (!byte_level) return p.unsupported("pre_tokenizer", "a pipeline without a ByteLevel step (not a byte-level BPE)");
    VS_RETURN_IF_ERROR(p.parse_post_processor(root.value("post_processor", json())));
    VS_RETURN_IF_ERROR(p.parse_decoder(root.value("decoder", json())));
    VS_ASSIGN_OR_RETURN(std::vector<AddedToken> added, p.parse_added_tokens(root));

    auto bpe = BpeModel::build(std::move(spec));
    if (!bpe.is_ok()) return Status(bpe.status().code(), source + ": " + bpe.status().message());
    impl->bpe = std::move(*bpe);

    int32_t max_id = impl->bpe->max_id();
    for (const auto& t : added) max_id = std::max(max_id, t.id);
    const auto n = static_cast<size_t>(max_id + 1);
    impl->token_text.assign(n, std::string());
    impl->token_bytes.assign(n, std::string());
    impl->kind.assign(n, TokenKind::kNone);
    // The ByteLevel decoder maps a token char by char back to bytes; a token with a character outside the
    // alphabet (an added token such as "<a b>") is taken as its UTF-8 bytes instead.
    auto bytes_of = [](const std::string& text) {
      auto b = byte_level_decode(text);
      return b ? std::move(*b) : text;
    };
    for (int32_t id = 0; id <= impl->bpe->max_id(); ++id) {
      if (const std::string* tok = impl->bpe->token(id)) {
        impl->token_text[id] = *tok;
        impl->token_bytes[id] = bytes_of(*tok);
        impl->kind[id] = TokenKind::kRegular;
      }
    }
    for (const auto& t : added) {
      if (t.content.empty()) continue;
      impl->token_text[t.id] = t.content;
      impl->token_bytes[t.id] = bytes_of(t.content);
      impl->kind[t.id] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
      impl->added_ids[t.content] = t.id;
    }
    const bool nfc = impl->nfc;
    impl->added = AddedVocabulary(std::move(added), [nfc](std::string_view s) {
      std::string out(s);
      if (nfc && !is_nfc_quick(s)) nfc_normalize(s, out);
      return out;
    });
  } catch (const json::exception& e) {
    return invalid_argument(source + ": unexpected structure: " + e.what());
  }
  return impl;
}

}  // namespace voltserve::tokenizer
