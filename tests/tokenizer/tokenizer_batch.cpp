// tokenizer_batch: the C++ side of the differential tests (tools/tokenizer_diff.py). Reads JSON lines from stdin,
// one request each, and writes one JSON line per request:
//   {"text": T}    -> {"ids": encode(T), "ids_plain": encode(T, parse_special=false), "decoded": decode(ids),
//                      "decoded_skip": decode(ids, skip_special), "incremental": concatenated IncrementalDecoder
//                      chunks of ids, "incremental_skip": the same skipping special tokens, "split_ok": no chunk
//                      ends inside a UTF-8 sequence}  or {"error": message}
//   {"decode": [ids]} -> {"decoded", "decoded_skip", "incremental", "incremental_skip", "split_ok"}
// Usage: tokenizer_batch TOKENIZER_DIR < requests.jsonl > results.jsonl
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

#include "voltserve/tokenizer.h"
#include "voltserve/utf8.h"

namespace {

using nlohmann::json;

void add_decodes(const voltserve::Tokenizer& tok, const std::vector<int32_t>& ids, json& out) {
  out["decoded"] = tok.decode(ids);
  out["decoded_skip"] = tok.decode(ids, true);
  bool split_ok = true;
  for (bool skip : {false, true}) {
    voltserve::IncrementalDecoder dec(tok, skip);
    std::string all;
    for (int32_t id : ids) {
      const std::string chunk = dec.push(id);
      // A chunk must be valid UTF-8 on its own.
      if (voltserve::tokenizer::find_invalid_utf8(chunk) != chunk.size()) split_ok = false;
      all += chunk;
    }
    all += dec.flush();
    out[skip ? "incremental_skip" : "incremental"] = all;
  }
  out["split_ok"] = split_ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tokenizer_batch TOKENIZER_DIR < requests.jsonl\n";
    return 2;
  }
  auto tok = voltserve::Tokenizer::load(argv[1]);
  if (!tok.is_ok()) {
    std::cerr << "tokenizer_batch: " << tok.status().to_string() << "\n";
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    json out;
    try {
      const json req = json::parse(line);
      if (req.contains("text")) {
        const std::string text = req["text"].get<std::string>();
        auto ids = tok->encode(text);
        auto plain = tok->encode(text, false);
        if (!ids.is_ok() || !plain.is_ok()) {
          out["error"] = (ids.is_ok() ? plain.status() : ids.status()).to_string();
        } else {
          out["ids"] = *ids;
          out["ids_plain"] = *plain;
          add_decodes(*tok, *ids, out);
        }
      } else {
        add_decodes(*tok, req.at("decode").get<std::vector<int32_t>>(), out);
      }
    } catch (const json::exception& e) {
      out = json{{"error", std::string("bad request: ") + e.what()}};
    }
    std::cout << out.dump(-1, ' ', true, json::error_handler_t::replace) << "\n";
  }
  return 0;
}
