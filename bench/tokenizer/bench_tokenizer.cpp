// bench_tokenizer: single-thread encode throughput of voltserve's tokenizer on a text file split into documents
// (one per line of a JSON-lines file, {"text": ...}). Prints JSON with MB/s for the first (cold-cache) pass and the
// best later pass, by thread CPU time (robust on a shared machine) and by wall time. Driven by tools/tokenizer_bench.py, which runs HF `tokenizers` on the same documents.
// Usage: bench_tokenizer TOKENIZER_DIR DOCS.jsonl [REPEATS]
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "voltserve/tokenizer.h"

namespace {
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bench_tokenizer TOKENIZER_DIR DOCS.jsonl [REPEATS]\n";
    return 2;
  }
  const int repeats = argc > 3 ? std::max(2, std::atoi(argv[3])) : 5;
  const auto t_load = std::chrono::steady_clock::now();
  auto tok = voltserve::Tokenizer::load(argv[1]);
  if (!tok.is_ok()) {
    std::cerr << tok.status().to_string() << "\n";
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  std::ifstream in(argv[2]);
  if (!in) {
    std::cerr << "cannot open " << argv[2] << "\n";
    return 1;
  }
  std::vector<std::string> docs;
  size_t n_bytes = 0;
  for (std::string line; std::getline(in, line);) {
    docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    n_bytes += docs.back().size();
  }
  std::vector<double> mbps, cpu_mbps;
  size_t n_tokens = 0;
  for (int r = 0; r < repeats; ++r) {
    n_tokens = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_s();
    for (const auto& d : docs) {
      auto ids = tok->encode(d);
      if (!ids.is_ok()) {
        std::cerr << ids.status().to_string() << "\n";
        return 1;
      }
      n_tokens += ids->size();
    }
    const double cpu = thread_cpu_s() - c0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mbps.push_back(static_cast<double>(n_bytes) / 1e6 / s);
    cpu_mbps.push_back(static_cast<double>(n_bytes) / 1e6 / cpu);
  }
  double best = 0, best_cpu = 0;
  for (int r = 1; r < repeats; ++r) {
    best = std::max(best, mbps[r]);
    best_cpu = std::max(best_cpu, cpu_mbps[r]);
  }
  std::cout << nlohmann::json{{"impl", "voltserve"}, {"bytes", n_bytes}, {"docs", docs.size()}, {"tokens", n_tokens},
                              {"load_s", load_s}, {"cold_mb_s", mbps[0]}, {"warm_mb_s", best},
                              {"cold_cpu_mb_s", cpu_mbps[0]}, {"warm_cpu_mb_s", best_cpu}}
                   .dump()
            << "\n";
  return 0;
}
