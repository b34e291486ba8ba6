// `voltserve tokenize --tokenizer DIR (--text T | --file F) [--special]` -> {"ids": [...]} and
// `voltserve detokenize --tokenizer DIR --ids 1,2,3 [--skip-special]` -> {"text": "..."}: the engine's tokenizer
// from the command line. Tested by tests/tokenizer/cli_tokenize_test.py against HF `tokenizers`.
#include <CLI/CLI.hpp>

#include <charconv>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "voltserve/tokenizer.h"

namespace voltserve::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  std::string file;
  bool special = false;
  std::string ids;
  bool skip_special = false;
};

[[noreturn]] void fail(const std::string& command, const std::string& message) {
  std::cerr << "voltserve " << command << ": " << message << "\n";
  throw CLI::RuntimeError(1);
}

Tokenizer load_or_fail(const std::string& command, const std::string& dir) {
  auto tok = Tokenizer::load(dir);
  if (!tok.is_ok()) fail(command, tok.status().to_string());
  return std::move(tok).value();
}

std::string read_input(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenize", "cannot open --file " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// "1,2, 3" -> ids; every id must be a token of `tok`.
std::vector<int32_t> parse_ids(const std::string& list, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      if (list.find_first_not_of(" \t") == std::string::npos) break;  // --ids "" is an empty sequence
      fail("detokenize", "--ids: empty item at position " + std::to_string(ids.size()) + " in \"" + list + "\"");
    }
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size()) {
      fail("detokenize", "--ids: \"" + item + "\" is not an integer");
    }
    if (value < 0 || value >= tok.vocab_size() || tok.token_text(static_cast<int32_t>(value)).empty()) {
      fail("detokenize", "--ids: " + item + " is not a token id of this tokenizer (vocab size " +
                             std::to_string(tok.vocab_size()) + ")");
    }
    ids.push_back(static_cast<int32_t>(value));
    pos = end + 1;
  }
  return ids;
}

}  // namespace

void register_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();

  auto* tok_cmd = app.add_subcommand("tokenize", "Text -> token ids, as HF tokenizers' encode (prints {\"ids\": [...]})");
  tok_cmd->add_option("--tokenizer", args->tokenizer, "Folder with tokenizer.json (a model folder works)")->required();
  auto* text_opt = tok_cmd->add_option("--text", args->text, "Text to tokenize");
  auto* file_opt = tok_cmd->add_option("--file", args->file, "File with the text to tokenize (- for stdin)");
  text_opt->excludes(file_opt);
  tok_cmd->add_flag("--special", args->special,
                    "Parse special-token text (e.g. <|im_end|>) as the special token, as HF does by default; "
                    "without it, it is plain text");
  tok_cmd->callback([args, text_opt, file_opt] {
    if (text_opt->count() == 0 && file_opt->count() == 0) fail("tokenize", "give --text or --file");
    const Tokenizer tok = load_or_fail("tokenize", args->tokenizer);
    const std::string text = file_opt->count() ? read_input(args->file) : args->text;
    auto ids = tok.encode(text, args->special);
    if (!ids.is_ok()) fail("tokenize", ids.status().to_string());
    std::cout << nlohmann::json{{"ids", *ids}}.dump() << "\n";
  });

  auto* detok_cmd = app.add_subcommand("detokenize", "Token ids -> text, as HF tokenizers' decode (prints {\"text\": ...})");
  detok_cmd->add_option("--tokenizer", args->tokenizer, "Folder with tokenizer.json (a model folder works)")->required();
  detok_cmd->add_option("--ids", args->ids, "Comma-separated token ids, e.g. 9707,1879")->required();
  detok_cmd->add_flag("--skip-special", args->skip_special, "Leave out special tokens (special: true)");
  detok_cmd->callback([args] {
    const Tokenizer tok = load_or_fail("detokenize", args->tokenizer);
    const std::vector<int32_t> ids = parse_ids(args->ids, tok);
    std::cout << nlohmann::json{{"text", tok.decode(ids, args->skip_special)}}.dump() << "\n";
  });
}

}  // namespace voltserve::cli
