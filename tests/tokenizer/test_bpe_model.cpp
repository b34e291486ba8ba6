// The BPE model (engine/tokenizer/bpe_model.h): merge order by rank, the short-word and long-word merge loops
// against a naive reference implementation of the textbook algorithm, and build-time validation errors.
#include <catch2/catch_test_macros.hpp>

#include <climits>
#include <random>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"

using namespace voltserve;
using namespace voltserve::tokenizer;

namespace {

BpeSpec spec_with(std::vector<std::pair<std::string, std::string>> merges, std::vector<std::string> extra = {}) {
  BpeSpec spec;
  int32_t id = 0;
  for (int b = 0; b < 256; ++b) spec.vocab.emplace_back(byte_level_encode(std::string(1, static_cast<char>(b))), id++);
  for (const auto& [a, b] : merges) spec.vocab.emplace_back(a + b, id++);
  for (const auto& e : extra) spec.vocab.emplace_back(e, id++);
  spec.merges = std::move(merges);
  return spec;
}

std::vector<int32_t> encode(const BpeModel& m, std::string_view bytes) {
  std::vector<int32_t> out;
  m.encode_word(bytes, out);
  return out;
}

// Textbook BPE: repeatedly merge the adjacent pair with the lowest rank, leftmost first.
std::vector<std::string> reference_bpe(const std::string& word, const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> sym;
  for (char c : word) sym.push_back(std::string(1, c));
  while (sym.size() > 1) {
    int best_rank = INT_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      for (size_t r = 0; r < merges.size(); ++r) {
        if (merges[r].first == sym[i] && merges[r].second == sym[i + 1] && static_cast<int>(r) < best_rank) {
          best_rank = static_cast<int>(r);
          best = i;
        }
      }
    }
    if (best_rank == INT_MAX) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  return sym;
}

}  // namespace

TEST_CASE("BPE merges by rank, leftmost first", "[unit]") {
  auto m = BpeModel::build(spec_with({{"b", "c"}, {"a", "b"}, {"a", "bc"}}));
  REQUIRE(m.is_ok());
  const auto& bpe = **m;
  const int32_t a = *bpe.token_id("a"), bc = *bpe.token_id("bc"), abc = *bpe.token_id("abc");
  CHECK(encode(bpe, "abc") == std::vector<int32_t>{abc});  // b+c (rank 0) first, then a+bc
  CHECK(encode(bpe, "ab") == std::vector<int32_t>{*bpe.token_id("ab")});
  CHECK(encode(bpe, "aabc") == std::vector<int32_t>{a, abc});
  CHECK(encode(bpe, "bcbc") == std::vector<int32_t>{bc, bc});
  CHECK(encode(bpe, " ") == std::vector<int32_t>{*bpe.token_id("\xC4\xA0")});  // raw space -> "Ġ"
  CHECK(encode(bpe, "").empty());
}

TEST_CASE("BPE short and long words agree with the textbook algorithm", "[unit]") {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"b", "a"}, {"ab", "ab"}, {"a", "a"}, {"c", "ab"}, {"ba", "c"}, {"abab", "abab"}, {"aa", "a"},
      {"cab", "ab"}, {"b", "b"}, {"c", "c"}};
  auto m = BpeModel::build(spec_with(merges));
  REQUIRE(m.is_ok());
  std::mt19937 rng(42);
  for (int iter = 0; iter < 600; ++iter) {
    // Lengths up to 300 cover both merge loops (the heap one starts above BpeModel::kSmallWord symbols) and the
    // uncached path (above kCacheMaxPieceBytes). Each word is encoded twice to also hit the cache.
    const size_t len = 1 + rng() % (iter % 3 == 0 ? 300 : 40);
    std::string word;
    for (size_t i = 0; i < len; ++i) word.push_back("abc"[rng() % 3]);
    std::vector<int32_t> expect;
    for (const auto& s : reference_bpe(word, merges)) expect.push_back(*(*m)->token_id(s));
    REQUIRE(encode(**m, word) == expect);
    REQUIRE(encode(**m, word) == expect);
  }
}

TEST_CASE("BPE build reports bad vocab and merges", "[unit]") {
  auto missing_part = spec_with({{"a", "b"}});
  missing_part.merges.emplace_back("zz", "b");
  auto r1 = BpeModel::build(missing_part);
  REQUIRE_FALSE(r1.is_ok());
  CHECK(r1.status().message().find("model.merges[1]") != std::string::npos);
  CHECK(r1.status().message().find("'zz' is not in the vocab") != std::string::npos);

  auto missing_result = spec_with({});
  missing_result.merges.emplace_back("a", "b");
  auto r2 = BpeModel::build(missing_result);
  REQUIRE_FALSE(r2.is_ok());
  CHECK(r2.status().message().find("merged token 'ab'") != std::string::npos);

  auto dup = spec_with({});
  dup.vocab.emplace_back("xyz", 3);
  auto r3 = BpeModel::build(dup);
  REQUIRE_FALSE(r3.is_ok());
  CHECK(r3.status().message().find("id 3 is used by both") != std::string::npos);

  auto unk = spec_with({});
  unk.unk_token = "<unk>";
  CHECK(BpeModel::build(unk).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("BPE drops bytes missing from the vocab when there is no unk, else maps them to unk", "[unit]") {
  BpeSpec spec;
  spec.vocab = {{"a", 0}, {"b", 1}, {"ab", 2}, {"<unk>", 3}};
  spec.merges = {{"a", "b"}};
  auto no_unk = BpeModel::build(spec);
  REQUIRE(no_unk.is_ok());
  CHECK(encode(**no_unk, "a-b") == std::vector<int32_t>{2});  // '-' is dropped, then a+b merge
  spec.unk_token = "<unk>";
  spec.fuse_unk = true;
  auto with_unk = BpeModel::build(spec);
  REQUIRE(with_unk.is_ok());
  CHECK(encode(**with_unk, "a--b") == std::vector<int32_t>{0, 3, 1});
}

TEST_CASE("BPE cache overflow keeps results correct", "[unit]") {
  const std::vector<std::pair<std::string, std::string>> merges = {{"a", "b"}, {"c", "d"}, {"ab", "cd"}, {"e", "f"}};
  auto m = BpeModel::build(spec_with(merges));
  REQUIRE(m.is_ok());
  auto word = [](size_t i) {
    std::string w;
    for (size_t k = 0; k < 4; ++k, i /= 6) w.push_back("abcdef"[i % 6]);
    return w;
  };
  // More distinct pieces than the cache holds, so it fills and is emptied while in use; the second pass must give
  // the first pass's ids, and a sample is checked against the textbook algorithm.
  const size_t n_words = 6 * 6 * 6 * 6;
  const size_t n_reps = BpeModel::kCacheCapacity / n_words + 2;
  std::vector<std::vector<int32_t>> first;
  for (int pass = 0; pass < 2; ++pass) {
    size_t k = 0;
    for (size_t rep = 0; rep < n_reps; ++rep) {
      for (size_t i = 0; i < n_words; ++i, ++k) {
        const std::string w = word(i) + std::string(rep, 'e') + "ab";
        const auto ids = encode(**m, w);
        if (pass == 0) {
          first.push_back(ids);
          if (k % 97 == 0) {
            std::vector<int32_t> expect;
            for (const auto& s : reference_bpe(w, merges)) expect.push_back(*(*m)->token_id(s));
            REQUIRE(ids == expect);
          }
        } else {
          REQUIRE(ids == first[k]);
        }
      }
    }
  }
  CHECK(first.size() > BpeModel::kCacheCapacity);
}
