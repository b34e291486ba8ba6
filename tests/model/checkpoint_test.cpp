// Checkpoint: single-file and sharded folders written by the test, typed lookups, and the failure modes
// (truncated file, lying header, missing tensor, wrong shape, wrong dtype, bad index) with their messages.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "model/checkpoint.h"
#include "safetensors_writer.h"

using namespace voltserve;
using namespace voltserve::testing;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("checkpoint: single file, typed lookup and to_f32", "[unit]") {
  const auto dir = temp_dir("single");
  write_file(dir / "model.safetensors",
             safetensors_bytes({f32_tensor("model.norm.weight", {3}, {0.5f, -1.0f, 2.0f}),
                                bf16_tensor("model.embed_tokens.weight", {2, 2}, {1.0f, -2.5f, 0.125f, 3.0f}),
                                u8_tensor("codes", "U8", {2}, {0x21, 0xF0}),
                                u8_tensor("fp8", "F8_E4M3", {3}, {0x38, 0xC0, 0x7E}),
                                u8_tensor("ids", "I64", {1}, {7, 0, 0, 0, 0, 0, 0, 0}),
                                u8_tensor("vision", "F64", {1}, std::vector<uint8_t>(8, 0))}));
  auto ckpt = Checkpoint::open(dir);
  REQUIRE(ckpt.is_ok());
  CHECK(ckpt->names().size() == 6);
  CHECK(ckpt->contains("model.norm.weight"));
  CHECK_FALSE(ckpt->contains("model.norm"));

  auto norm = ckpt->tensor("model.norm.weight", DType::kF32, {3});
  REQUIRE(norm.is_ok());
  CHECK(norm->file == "model.safetensors");
  CHECK(norm->numel() == 3);
  CHECK(norm->n_bytes == 12);
  auto nf = to_f32(*norm);
  REQUIRE(nf.is_ok());
  CHECK(*nf == std::vector<float>{0.5f, -1.0f, 2.0f});

  auto emb = ckpt->tensor("model.embed_tokens.weight", DType::kBF16, {2, 2});
  REQUIRE(emb.is_ok());
  CHECK(*to_f32(*emb) == std::vector<float>{1.0f, -2.5f, 0.125f, 3.0f});

  auto fp8 = ckpt->tensor("fp8");
  REQUIRE(fp8.is_ok());
  // 0x38 = 0.0111.000 = 1.0; 0xC0 = 1.1000.000 = -2.0; 0x7E = 0.1111.110 = 448
  CHECK(*to_f32(*fp8) == std::vector<float>{1.0f, -2.0f, 448.0f});

  auto codes = ckpt->tensor("codes", DType::kU8, {2});
  REQUIRE(codes.is_ok());
  CHECK(static_cast<uint8_t>(codes->data[1]) == 0xF0);
  auto codes_f = to_f32(*codes);
  REQUIRE_FALSE(codes_f.is_ok());
  CHECK_THAT(codes_f.status().message(), ContainsSubstring("no float conversion"));

  auto vision = ckpt->tensor("vision");
  REQUIRE_FALSE(vision.is_ok());
  CHECK(vision.status().code() == StatusCode::kUnimplemented);
  CHECK_THAT(vision.status().message(), ContainsSubstring("F64"));
}

TEST_CASE("checkpoint: missing tensor, wrong shape, wrong dtype name the file and the tensor", "[unit]") {
  const auto dir = temp_dir("errors");
  write_file(dir / "model.safetensors",
             safetensors_bytes({f32_tensor("model.language_model.norm.weight", {4}, {1, 2, 3, 4})}));
  auto ckpt = Checkpoint::open(dir);
  REQUIRE(ckpt.is_ok());

  auto missing = ckpt->tensor("model.norm.weight");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), ContainsSubstring("'model.norm.weight' not found"));
  CHECK_THAT(missing.status().message(), ContainsSubstring("'model.language_model.norm.weight' exists"));

  auto shape = ckpt->tensor("model.language_model.norm.weight", DType::kF32, {2, 2});
  REQUIRE_FALSE(shape.is_ok());
  CHECK_THAT(shape.status().message(), ContainsSubstring("model.safetensors"));
  CHECK_THAT(shape.status().message(), ContainsSubstring("'model.language_model.norm.weight'"));
  CHECK_THAT(shape.status().message(), ContainsSubstring("shape [4], expected [2, 2]"));

  auto dtype = ckpt->tensor("model.language_model.norm.weight", DType::kBF16, {4});
  REQUIRE_FALSE(dtype.is_ok());
  CHECK_THAT(dtype.status().message(), ContainsSubstring("model.safetensors"));
  CHECK_THAT(dtype.status().message(), ContainsSubstring("dtype F32, expected BF16"));
}

TEST_CASE("checkpoint: truncated file and lying header name the file and tensor", "[unit]") {
  const auto dir = temp_dir("truncated");
  auto bytes = safetensors_bytes({f32_tensor("a", {2}, {1, 2}), f32_tensor("layer.weight", {64}, std::vector<float>(64, 1.0f))});
  bytes.resize(bytes.size() - 100);
  write_file(dir / "model.safetensors", bytes);
  auto ckpt = Checkpoint::open(dir);
  REQUIRE_FALSE(ckpt.is_ok());
  CHECK(ckpt.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(ckpt.status().message(), ContainsSubstring("model.safetensors"));
  CHECK_THAT(ckpt.status().message(), ContainsSubstring("'layer.weight'"));

  const auto dir2 = temp_dir("lying");
  write_file(dir2 / "model.safetensors",
             safetensors_with_header(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16));
  auto lying = Checkpoint::open(dir2);
  REQUIRE_FALSE(lying.is_ok());
  CHECK_THAT(lying.status().message(), ContainsSubstring("'w'"));
  CHECK_THAT(lying.status().message(), ContainsSubstring("needs 16"));

  const auto dir3 = temp_dir("empty");
  write_file(dir3 / "model.safetensors", "");
  auto empty = Checkpoint::open(dir3);
  REQUIRE_FALSE(empty.is_ok());
  CHECK_THAT(empty.status().message(), ContainsSubstring("shorter than the 8-byte"));
}

TEST_CASE("checkpoint: no checkpoint files", "[unit]") {
  const auto dir = temp_dir("nofiles");
  auto ckpt = Checkpoint::open(dir);
  REQUIRE_FALSE(ckpt.is_ok());
  CHECK(ckpt.status().code() == StatusCode::kNotFound);
  CHECK_THAT(ckpt.status().message(), ContainsSubstring("model.safetensors.index.json"));
}

TEST_CASE("checkpoint: sharded with an index", "[unit]") {
  const auto dir = temp_dir("sharded");
  write_file(dir / "model-00001-of-00002.safetensors", safetensors_bytes({f32_tensor("a", {1}, {1.0f})}));
  write_file(dir / "model-00002-of-00002.safetensors",
             safetensors_bytes({f32_tensor("b", {2}, {2.0f, 3.0f}), f32_tensor("c", {1}, {4.0f})}));
  const nlohmann::json index = {{"metadata", {{"total_size", 16}}},
                                {"weight_map",
                                 {{"a", "model-00001-of-00002.safetensors"},
                                  {"b", "model-00002-of-00002.safetensors"},
                                  {"c", "model-00002-of-00002.safetensors"}}}};
  write_file(dir / "model.safetensors.index.json", index.dump());
  auto ckpt = Checkpoint::open(dir);
  REQUIRE(ckpt.is_ok());
  CHECK(ckpt->names() == std::vector<std::string>{"a", "b", "c"});
  auto b = ckpt->tensor("b", DType::kF32, {2});
  REQUIRE(b.is_ok());
  CHECK(b->file == "model-00002-of-00002.safetensors");
  CHECK(*to_f32(*b) == std::vector<float>{2.0f, 3.0f});
  // Views stay valid in a copy after the original is gone.
  Checkpoint copy = *ckpt;
  ckpt = Result<Checkpoint>(not_found("dropped"));
  auto c = copy.tensor("c");
  REQUIRE(c.is_ok());
  CHECK(*to_f32(*c) == std::vector<float>{4.0f});
}

TEST_CASE("checkpoint: bad indexes are clear errors", "[unit]") {
  const auto dir = temp_dir("badindex");
  write_file(dir / "shard1.safetensors", safetensors_bytes({f32_tensor("a", {1}, {1.0f})}));
  write_file(dir / "shard2.safetensors", safetensors_bytes({f32_tensor("a", {1}, {1.0f})}));

  SECTION("index names a tensor its shard lacks") {
    write_file(dir / "model.safetensors.index.json",
               nlohmann::json{{"weight_map", {{"a", "shard1.safetensors"}, {"zz", "shard1.safetensors"}}}}.dump());
    auto r = Checkpoint::open(dir);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), ContainsSubstring("'zz'"));
    CHECK_THAT(r.status().message(), ContainsSubstring("shard1.safetensors"));
  }
  SECTION("index names a shard that does not exist") {
    write_file(dir / "model.safetensors.index.json",
               nlohmann::json{{"weight_map", {{"a", "missing.safetensors"}}}}.dump());
    auto r = Checkpoint::open(dir);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::kNotFound);
    CHECK_THAT(r.status().message(), ContainsSubstring("missing.safetensors"));
  }
  SECTION("a tensor in two shards") {
    write_file(dir / "model.safetensors.index.json",
               nlohmann::json{{"weight_map", {{"a", "shard1.safetensors"}, {"b", "shard2.safetensors"}}}}.dump());
    auto r = Checkpoint::open(dir);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), ContainsSubstring("'a' also appears in shard1.safetensors"));
  }
  SECTION("a shard path outside the folder") {
    write_file(dir / "model.safetensors.index.json",
               nlohmann::json{{"weight_map", {{"a", "../shard1.safetensors"}}}}.dump());
    auto r = Checkpoint::open(dir);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), ContainsSubstring("inside the model folder"));
  }
  SECTION("index is not JSON") {
    write_file(dir / "model.safetensors.index.json", "{weight_map:");
    auto r = Checkpoint::open(dir);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), ContainsSubstring("model.safetensors.index.json"));
  }
}
