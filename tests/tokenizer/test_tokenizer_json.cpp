// Loading tokenizer.json / tokenizer_config.json (engine/tokenizer/tokenizer_json.cpp, tokenizer_config.cpp):
// a minimal valid file loads; each malformed or unsupported variant gives a clear error naming what is wrong and
// never crashes.
#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include "tokenizer/byte_level.h"
#include "voltserve/tokenizer.h"

using namespace voltserve;
using nlohmann::json;

namespace {

json minimal() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({json{{"id", 257}, {"content", "<|end|>"}, {"special", true}, {"normalized", false},
                                         {"lstrip", false}, {"rstrip", false}, {"single_word", false}}})},
      {"normalizer", json{{"type", "NFC"}}},
      {"pre_tokenizer",
       json{{"type", "Sequence"},
            {"pretokenizers", json::array({json{{"type", "Split"}, {"pattern", json{{"Regex", "\\p{L}+|\\s+"}}},
                                                {"behavior", "Isolated"}, {"invert", false}},
                                           json{{"type", "ByteLevel"}, {"add_prefix_space", false},
                                                {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", json{{"type", "ByteLevel"}}},
      {"model", json{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                     {"byte_fallback", false}, {"vocab", vocab}, {"merges", json::array({"a b"})}}},
  };
}

// Loads a mutated minimal tokenizer.json and returns the status.
Status load_with(const std::function<void(json&)>& mutate) {
  json j = minimal();
  mutate(j);
  return Tokenizer::from_json(j.dump()).status();
}

void expect_error(const std::function<void(json&)>& mutate, StatusCode code, const std::string& needle) {
  const Status s = load_with(mutate);
  INFO(s.to_string());
  CHECK(s.code() == code);
  CHECK(s.message().find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("minimal tokenizer.json loads and works", "[unit]") {
  auto tok = Tokenizer::from_json(minimal().dump());
  REQUIRE(tok.is_ok());
  CHECK(tok->vocab_size() == 258);
  auto ids = tok->encode("ab<|end|>");
  REQUIRE(ids.is_ok());
  CHECK(*ids == std::vector<int32_t>{256, 257});
  CHECK(tok->decode(*ids) == "ab<|end|>");
  CHECK(tok->decode(*ids, true) == "ab");
  // Merges written as [left, right] pairs (newer tokenizers) load the same.
  json j = minimal();
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  auto tok2 = Tokenizer::from_json(j.dump());
  REQUIRE(tok2.is_ok());
  CHECK(*tok2->encode("ab") == std::vector<int32_t>{256});
}

TEST_CASE("malformed tokenizer.json gives clear errors", "[unit]") {
  CHECK(Tokenizer::from_json("{not json").status().message().find("not valid JSON") != std::string::npos);
  CHECK(Tokenizer::from_json("[1,2]").status().code() == StatusCode::kInvalidArgument);
  CHECK(Tokenizer::from_json("").status().code() == StatusCode::kInvalidArgument);
  expect_error([](json& j) { j.erase("model"); }, StatusCode::kInvalidArgument, "model: missing");
  expect_error([](json& j) { j["model"].erase("vocab"); }, StatusCode::kInvalidArgument, "model.vocab");
  expect_error([](json& j) { j["model"]["vocab"]["a"] = "zero"; }, StatusCode::kInvalidArgument, "model.vocab[\"a\"]");
  expect_error([](json& j) { j["model"]["vocab"]["a"] = -5; }, StatusCode::kInvalidArgument, "non-negative");
  expect_error([](json& j) { j["model"]["merges"] = json::array({"ab"}); }, StatusCode::kInvalidArgument,
               "model.merges[0]");
  expect_error([](json& j) { j["model"]["merges"] = json::array({42}); }, StatusCode::kInvalidArgument, "model.merges[0]");
  expect_error([](json& j) { j["model"]["merges"] = json::array({"a q\xC3\xA9"}); }, StatusCode::kInvalidArgument,
               "is not in the vocab");
  expect_error([](json& j) { j["model"]["merges"] = "a b"; }, StatusCode::kInvalidArgument, "model.merges");
  expect_error([](json& j) { j["added_tokens"][0].erase("id"); }, StatusCode::kInvalidArgument, "added_tokens[0].id");
  expect_error([](json& j) { j["added_tokens"][0]["content"] = 5; }, StatusCode::kInvalidArgument,
               "added_tokens[0].content");
  expect_error([](json& j) { j["added_tokens"][0]["special"] = "yes"; }, StatusCode::kInvalidArgument,
               "added_tokens[0].special");
  expect_error([](json& j) { j["added_tokens"] = json::object(); }, StatusCode::kInvalidArgument, "added_tokens");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = json{{"Regex", "(a"}}; },
               StatusCode::kInvalidArgument, "does not compile");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0].erase("pattern"); }, StatusCode::kInvalidArgument,
               "pattern");
  expect_error([](json& j) { j["normalizer"] = json{{"kind", "NFC"}}; }, StatusCode::kInvalidArgument, "normalizer");
}

TEST_CASE("unsupported tokenizer.json features are rejected, not guessed", "[unit]") {
  expect_error([](json& j) { j["model"]["type"] = "WordPiece"; }, StatusCode::kUnimplemented, "\"WordPiece\"");
  expect_error([](json& j) { j["model"]["type"] = "Unigram"; }, StatusCode::kUnimplemented, "model.type");
  expect_error([](json& j) { j["model"]["dropout"] = 0.1; }, StatusCode::kUnimplemented, "model.dropout");
  expect_error([](json& j) { j["model"]["byte_fallback"] = true; }, StatusCode::kUnimplemented, "byte_fallback");
  expect_error([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }, StatusCode::kUnimplemented,
               "continuing_subword_prefix");
  expect_error([](json& j) { j["normalizer"] = json{{"type", "Lowercase"}}; }, StatusCode::kUnimplemented,
               "\"Lowercase\"");
  expect_error([](json& j) { j["normalizer"] = json{{"type", "NFKC"}}; }, StatusCode::kUnimplemented, "NFKC");
  expect_error([](json& j) { j["pre_tokenizer"] = json{{"type", "Whitespace"}}; }, StatusCode::kUnimplemented,
               "\"Whitespace\"");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
               StatusCode::kUnimplemented, "Removed");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }, StatusCode::kUnimplemented,
               "invert");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
               StatusCode::kUnimplemented, "add_prefix_space");
  expect_error([](json& j) { j["pre_tokenizer"] = nullptr; }, StatusCode::kUnimplemented, "ByteLevel");
  expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = json{{"Regex", "[^\\S]"}}; },
               StatusCode::kUnimplemented, "\\S inside a character class");
  expect_error([](json& j) { j["decoder"] = json{{"type", "WordPiece"}}; }, StatusCode::kUnimplemented, "decoder");
  expect_error([](json& j) { j["decoder"] = nullptr; }, StatusCode::kUnimplemented, "decoder");
  expect_error([](json& j) { j["post_processor"] = json{{"type", "TemplateProcessing"}}; }, StatusCode::kUnimplemented,
               "TemplateProcessing");
  expect_error([](json& j) { j["truncation"] = json{{"max_length", 5}}; }, StatusCode::kUnimplemented, "truncation");
}

TEST_CASE("Tokenizer::load reports missing folders and bad configs", "[unit]") {
  const auto dir = std::filesystem::temp_directory_path() / ("vs_tok_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto missing = Tokenizer::load(dir);
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find(dir.string()) != std::string::npos);

  std::filesystem::create_directories(dir);
  auto no_json = Tokenizer::load(dir);
  CHECK(no_json.status().code() == StatusCode::kNotFound);
  CHECK(no_json.status().message().find("tokenizer.json") != std::string::npos);

  std::ofstream(dir / "tokenizer.json") << minimal().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|end|>", "bos_token": null,
      "pad_token": {"content": "<|end|>"}, "chat_template": "{{ messages }}"})";
  auto ok = Tokenizer::load(dir);
  REQUIRE(ok.is_ok());
  CHECK(ok->eos_token() == "<|end|>");
  CHECK(ok->bos_token().empty());
  CHECK(ok->pad_token() == "<|end|>");
  CHECK(ok->chat_template() == "{{ messages }}");

  std::ofstream(dir / "chat_template.jinja") << "from the jinja file";
  CHECK(Tokenizer::load(dir)->chat_template() == "from the jinja file");

  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|nope|>"})";
  auto bad_eos = Tokenizer::load(dir);
  CHECK(bad_eos.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad_eos.status().message().find("<|nope|>") != std::string::npos);

  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": )";
  auto bad_json = Tokenizer::load(dir);
  CHECK(bad_json.status().message().find("tokenizer_config.json") != std::string::npos);

  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": [{"name": "tool_use", "template": "x"}]})";
  CHECK(Tokenizer::load(dir).status().message().find("default") != std::string::npos);
  std::filesystem::remove_all(dir);
}
