// The draft vocabulary (engine/model/draft_vocab.h): which ids (a listed draft_vocab.json, or the tokenizer's added
// tokens and the lowest ids), the errors a bad list gets, and the gathered rows of a weight in every stored format
// (each row equal to the source row, dequantized through the one reference).
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/draft_vocab.h"
#include "support/test_rng.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / ("voltserve-draft-vocab-" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& file, const std::string& text) const { std::ofstream(path / file) << text; }
};

std::vector<float> row_of(const kernels::HostWeightRef& w, int64_t row) {
  std::vector<float> out(static_cast<size_t>(w.k));
  kernels::dequantize_row_ref(w, row, out.data());
  return out;
}

}  // namespace

TEST_CASE("draft vocabulary: the first N listed ids, ascending; the whole vocabulary when N covers it", "[unit]") {
  TempDir d("listed");
  d.write("draft_vocab.json", "[7, 3, 90, 12, 5]");
  auto ids = load_draft_vocab(d.path, 3, 100);
  REQUIRE(ids.is_ok());
  CHECK(*ids == std::vector<int32_t>{3, 7, 90});  // the three most frequent, ascending
  d.write("draft_vocab.json", R"({"token_ids": [7, 3, 90, 12, 5]})");
  ids = load_draft_vocab(d.path, 10, 100);  // fewer listed than asked: all of them
  REQUIRE(ids.is_ok());
  CHECK(*ids == std::vector<int32_t>{3, 5, 7, 12, 90});
  CHECK(load_draft_vocab(d.path, 0, 100)->empty());    // off
  CHECK(load_draft_vocab(d.path, 100, 100)->empty());  // covers the vocabulary: draft over all of it
}

TEST_CASE("draft vocabulary: a bad list is an error naming the file and the entry", "[unit]") {
  TempDir d("bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[1, 2, 2]", "listed twice"},      {"[1, 100]", "entry 1"},         {"[1, -3]", "entry 1"},
      {"[1, \"a\"]", "entry 1"},          {"[]", "non-empty array"},       {"{\"ids\": [1]}", "token_ids"},
      {"[1, 2", "not valid JSON"},
  };
  for (const auto& [text, what] : cases) {
    INFO(text);
    d.write("draft_vocab.json", text);
    const auto ids = load_draft_vocab(d.path, 4, 100);
    REQUIRE_FALSE(ids.is_ok());
    CHECK(ids.status().message().find(what) != std::string::npos);
    CHECK(ids.status().message().find("draft_vocab.json") != std::string::npos);
  }
}

TEST_CASE("draft vocabulary without a list: the tokenizer's added tokens, then the lowest ids", "[unit]") {
  TempDir d("derived");
  d.write("tokenizer.json", R"({"added_tokens": [{"id": 95, "content": "<|im_end|>"}, {"id": 97, "content": "<think>"},
                                {"id": 500, "content": "<padding past the real vocabulary>"}]})");
  auto ids = load_draft_vocab(d.path, 6, 100);
  REQUIRE(ids.is_ok());
  CHECK(*ids == std::vector<int32_t>{0, 1, 2, 3, 95, 97});
  // No tokenizer.json (a synthetic model): the lowest ids.
  ids = load_draft_vocab(fs::path{}, 4, 100);
  REQUIRE(ids.is_ok());
  CHECK(*ids == std::vector<int32_t>{0, 1, 2, 3});
  // Fewer rows than added tokens: an error, not a list without the chat's special tokens.
  const auto small = load_draft_vocab(d.path, 1, 100);
  REQUIRE_FALSE(small.is_ok());
  CHECK(small.status().message().find("added tokens") != std::string::npos);
}

TEST_CASE("gathered rows equal the source rows in every stored format", "[unit]") {
  testing::TestRng rng(77);
  const int64_t n = 40, k = 64;
  std::vector<uint8_t> nv_codes(static_cast<size_t>(n * k / 2)), nv_scales(static_cast<size_t>(n * k / 16));
  std::vector<uint8_t> f8_codes(static_cast<size_t>(n * k)), dense(static_cast<size_t>(n * k * 2));
  std::vector<float> f32(static_cast<size_t>(n * k)), row_scales(static_cast<size_t>(n));
  for (uint8_t& c : nv_codes) c = static_cast<uint8_t>(rng.next_u64());
  for (uint8_t& c : nv_scales) c = static_cast<uint8_t>(rng.next_u64() % 0x7e);  // finite e4m3
  for (uint8_t& c : f8_codes) c = static_cast<uint8_t>(rng.next_u64() % 0x7e);
  for (uint8_t& c : dense) c = static_cast<uint8_t>(rng.next_u64() % 0x7f);
  for (float& x : f32) x = static_cast<float>(rng.next_double() - 0.5);
  for (float& x : row_scales) x = static_cast<float>(0.5 + rng.next_double());
  std::vector<kernels::HostWeightRef> weights(5);
  weights[0].format = WeightFormat::kNvfp4;
  weights[0].codes = nv_codes.data();
  weights[0].scales = nv_scales.data();
  weights[0].global_scale = 0.03f;
  weights[1].format = WeightFormat::kFp8;
  weights[1].codes = f8_codes.data();
  weights[1].tensor_scale = 0.7f;
  weights[1].channel_scales = row_scales.data();
  weights[2].format = WeightFormat::kDense;
  weights[2].dense_dtype = DType::kBF16;
  weights[2].codes = dense.data();
  weights[3].format = WeightFormat::kDense;
  weights[3].dense_dtype = DType::kF32;
  weights[3].codes = reinterpret_cast<const uint8_t*>(f32.data());
  weights[4] = weights[0];
  weights[4].channel_scales = row_scales.data();
  const std::vector<int32_t> ids = {0, 3, 17, 18, 39};
  for (size_t f = 0; f < weights.size(); ++f) {
    kernels::HostWeightRef& w = weights[f];
    w.n = n;
    w.k = k;
    INFO("format case " << f);
    auto g = gather_weight_rows(w, ids);
    REQUIRE(g.is_ok());
    const kernels::HostWeightRef& r = (*g)->ref;
    REQUIRE(r.n == static_cast<int64_t>(ids.size()));
    REQUIRE(r.format == w.format);
    for (size_t i = 0; i < ids.size(); ++i) CHECK(row_of(r, static_cast<int64_t>(i)) == row_of(w, ids[i]));
  }
  CHECK_FALSE(gather_weight_rows(weights[0], std::vector<int32_t>{40}).is_ok());  // past the rows
  // A synthetic weight stays synthetic, with the draft vocabulary's row count.
  kernels::HostWeightRef synthetic;
  synthetic.format = WeightFormat::kNvfp4;
  synthetic.n = 1000;
  synthetic.k = 64;
  synthetic.synthetic_seed = 5;
  auto s = gather_weight_rows(synthetic, ids);
  REQUIRE(s.is_ok());
  CHECK((*s)->ref.codes == nullptr);
  CHECK((*s)->ref.n == 5);
}

}  // namespace voltserve
