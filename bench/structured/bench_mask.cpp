// The host cost of structured output per generated token: XGrammar's mask fill (the mask worker's job, hidden
// behind the forward while it is shorter) and the token accept (on the engine thread between steps, not hidden),
// for the schemas of bench_structured.py, over a real tokenizer. Each step fills the mask, draws one allowed
// non-stop token at random and accepts it.
//   bench_mask --tokenizer DIR [--vocab N] [--tokens 512] [--schema bounded|free|enum|all] [--ebnf FILE]
// (--ebnf: an EBNF grammar, root rule `root`, timed instead of the schemas.)
// DIR holds tokenizer.json (e.g. tests/fixtures/tokenizers/qwen3, its tokenizer.json.tar.xz unpacked there).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "voltserve/grammar.h"
#include "voltserve/tokenizer.h"

using namespace voltserve;

namespace {

nlohmann::json records(const nlohmann::json& name) {
  return {{"type", "array"},
          {"minItems", 200},
          {"items",
           {{"type", "object"},
            {"properties", {{"id", {{"type", "integer"}}}, {"name", name}, {"ok", {{"type", "boolean"}}}}},
            {"required", {"id", "name", "ok"}},
            {"additionalProperties", false}}}};
}

nlohmann::json schema(const std::string& name) {
  if (name == "bounded") return records({{"type", "string"}, {"maxLength", 8}});
  if (name == "free") return records({{"type", "string"}});
  if (name == "enum") return records({{"enum", {"alpha", "beta", "gamma", "delta"}}});
  std::fprintf(stderr, "bench_mask: unknown schema '%s' (bounded, free, enum, all)\n", name.c_str());
  std::exit(2);
}

struct Stats {
  std::vector<double> us;
  double mean() const {
    double s = 0;
    for (double x : us) s += x;
    return us.empty() ? 0 : s / static_cast<double>(us.size());
  }
  double pct(double p) {
    if (us.empty()) return 0;
    std::vector<double> c = us;
    std::sort(c.begin(), c.end());
    return c[std::min(c.size() - 1, static_cast<size_t>(p * static_cast<double>(c.size())))];
  }
};

double since_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, which = "all", ebnf_file;
  int32_t vocab = 0;
  int tokens = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokenizer") dir = argv[i + 1];
    else if (a == "--vocab") vocab = std::atoi(argv[i + 1]);
    else if (a == "--tokens") tokens = std::atoi(argv[i + 1]);
    else if (a == "--schema") which = argv[i + 1];
    else if (a == "--ebnf") ebnf_file = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_mask: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: bench_mask --tokenizer DIR [--vocab N] [--tokens 512] [--schema bounded|free|enum|all]\n");
    return 2;
  }
  Result<Tokenizer> tok = Tokenizer::load(dir);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "bench_mask: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  if (vocab <= 0) vocab = static_cast<int32_t>(tok->vocab_size());
  std::vector<int32_t> stops;
  if (auto eos = tok->token_id(tok->eos_token())) stops.push_back(*eos);
  auto compiler = GrammarCompiler::create(*tok, vocab, stops);
  if (!compiler.is_ok()) {
    std::fprintf(stderr, "bench_mask: %s\n", compiler.status().to_string().c_str());
    return 1;
  }
  std::vector<std::string> names =
      which == "all" ? std::vector<std::string>{"bounded", "free", "enum"} : std::vector<std::string>{which};
  if (!ebnf_file.empty()) names = {"ebnf"};
  std::printf("vocabulary %d ids, %d tokens per schema\n", vocab, tokens);
  for (const std::string& name : names) {
    ConstraintSpec spec;
    if (name == "ebnf") {
      std::ifstream in(ebnf_file);
      if (!in) {
        std::fprintf(stderr, "bench_mask: cannot read %s\n", ebnf_file.c_str());
        return 1;
      }
      spec.kind = ConstraintSpec::Kind::kGrammar;
      spec.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else {
      spec.kind = ConstraintSpec::Kind::kJsonSchema;
      spec.text = schema(name).dump();
      spec.any_whitespace = false;  // compact, as the server generates JSON
    }
    const auto t_compile = std::chrono::steady_clock::now();
    auto compiled = (*compiler)->compile(spec);
    const double compile_ms = since_us(t_compile) / 1000;
    if (!compiled.is_ok()) {
      std::fprintf(stderr, "bench_mask: %s\n", compiled.status().to_string().c_str());
      return 1;
    }
    std::unique_ptr<ConstraintMatcher> m = make_matcher(*compiled);
    std::vector<uint32_t> mask(static_cast<size_t>((vocab + 31) / 32));
    std::mt19937 rng(7);
    Stats fill, accept;
    std::vector<int32_t> allowed;
    std::string text;
    for (int t = 0; t < tokens; ++t) {
      auto t0 = std::chrono::steady_clock::now();
      m->fill_mask(mask.data());
      fill.us.push_back(since_us(t0));
      allowed.clear();
      for (int32_t id = 0; id < vocab; ++id) {
        if ((mask[static_cast<size_t>(id / 32)] >> (id % 32) & 1u) &&
            std::find(stops.begin(), stops.end(), id) == stops.end()) {
          allowed.push_back(id);
        }
      }
      if (allowed.empty()) break;
      // Uniform draws alone would stay inside an integer forever (a thousand digit tokens against one ','): a third
      // of the draws take the lowest allowed id instead, a single punctuation byte that moves the structure on.
      const int32_t id = std::uniform_int_distribution<int>(0, 2)(rng) == 0
                             ? allowed.front()
                             : allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      text += tok->decode(std::span<const int32_t>(&id, 1));
      t0 = std::chrono::steady_clock::now();
      if (!m->accept(id)) {
        std::fprintf(stderr, "bench_mask: %s: the matcher refused a token of its own mask\n", name.c_str());
        return 1;
      }
      accept.us.push_back(since_us(t0));
    }
    const auto slow = std::count_if(fill.us.begin(), fill.us.end(), [](double us) { return us > 1000.0; });
    std::printf("%-8s compile %7.1f ms | fill us/token mean %7.1f p50 %7.1f p90 %7.1f p99 %7.1f, %td over 1 ms | "
                "accept mean %6.1f p99 %6.1f (%zu tokens)\n",
                name.c_str(), compile_ms, fill.mean(), fill.pct(0.5), fill.pct(0.9), fill.pct(0.99), slow, accept.mean(),
                accept.pct(0.99), accept.us.size());
    std::printf("         output starts: %.200s\n", text.c_str());
  }
  return 0;
}
