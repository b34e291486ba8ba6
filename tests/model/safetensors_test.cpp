// The safetensors header parser on hand-written good and malformed headers; every error must name the problem.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "model/safetensors.h"
#include "safetensors_writer.h"

using namespace voltserve;
using namespace voltserve::testing;
using Catch::Matchers::ContainsSubstring;

namespace {
Result<SafetensorsHeader> parse(const std::string& bytes) {
  return parse_safetensors_header(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "x.safetensors");
}
std::string error_of(const std::string& bytes) {
  auto r = parse(bytes);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(r.status().message(), ContainsSubstring("x.safetensors"));
  return r.status().message();
}
}  // namespace

TEST_CASE("a well-formed header parses, __metadata__ is ignored", "[unit]") {
  const auto bytes = safetensors_bytes({f32_tensor("a", {2, 3}, {1, 2, 3, 4, 5, 6}), bf16_tensor("b", {}, {1.5f}),
                                        u8_tensor("c", "F64", {1}, std::vector<uint8_t>(8, 0))},
                                       nlohmann::json{{"format", "pt"}});
  auto r = parse(bytes);
  REQUIRE(r.is_ok());
  REQUIRE(r->tensors.size() == 3);
  CHECK(r->tensors[0].name == "a");
  CHECK(r->tensors[0].dtype == DType::kF32);
  CHECK(r->tensors[0].shape == std::vector<int64_t>{2, 3});
  CHECK(r->tensors[0].begin == 0);
  CHECK(r->tensors[0].end == 24);
  CHECK(r->tensors[1].shape.empty());
  CHECK(r->tensors[1].end - r->tensors[1].begin == 2);
  CHECK_FALSE(r->tensors[2].dtype.has_value());  // F64: recorded, not readable
  CHECK(r->data_offset % 8 == 0);
  CHECK(r->data_offset + 24 + 2 + 8 == bytes.size());
}

TEST_CASE("safetensors: file shorter than the length field", "[unit]") {
  CHECK_THAT(error_of("abc"), ContainsSubstring("shorter than the 8-byte"));
}

TEST_CASE("safetensors: header length beyond the file (truncated)", "[unit]") {
  auto bytes = safetensors_bytes({f32_tensor("a", {4}, {1, 2, 3, 4})});
  const size_t header_len = bytes.size() - 16 - 8;
  bytes.resize(8 + header_len / 2);
  CHECK_THAT(error_of(bytes), ContainsSubstring("header length"));
}

TEST_CASE("safetensors: data area truncated", "[unit]") {
  auto bytes = safetensors_bytes({f32_tensor("weight", {4}, {1, 2, 3, 4})});
  bytes.resize(bytes.size() - 3);
  const auto msg = error_of(bytes);
  CHECK_THAT(msg, ContainsSubstring("'weight'"));
  CHECK_THAT(msg, ContainsSubstring("beyond the data area"));
}

TEST_CASE("safetensors: invalid JSON, non-object, and deep nesting", "[unit]") {
  CHECK_THAT(error_of(safetensors_with_header("{\"a\": ", 0)), ContainsSubstring("not valid JSON"));
  CHECK_THAT(error_of(safetensors_with_header("[1, 2]", 0)), ContainsSubstring("not a JSON object"));
  CHECK_THAT(error_of(safetensors_with_header(std::string(5000, '[') + std::string(5000, ']'), 0)),
             ContainsSubstring("nests deeper"));
}

TEST_CASE("safetensors: entries with missing or mistyped fields", "[unit]") {
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4)),
             ContainsSubstring("\"dtype\""));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4)),
             ContainsSubstring("\"shape\""));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"dtype": "F32", "shape": [1]}})", 4)),
             ContainsSubstring("data_offsets"));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
             ContainsSubstring("negative or non-integer"));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4)),
             ContainsSubstring("negative or non-integer"));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", 4)),
             ContainsSubstring("non-negative integers"));
  CHECK_THAT(error_of(safetensors_with_header(R"({"t": 3})", 4)), ContainsSubstring("not a JSON object"));
}

TEST_CASE("safetensors: a header that lies about offsets", "[unit]") {
  SECTION("begin > end") {
    const auto msg = error_of(safetensors_with_header(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8));
    CHECK_THAT(msg, ContainsSubstring("'w'"));
    CHECK_THAT(msg, ContainsSubstring("begin > end"));
  }
  SECTION("byte count does not match shape x dtype") {
    const auto msg = error_of(safetensors_with_header(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", 8));
    CHECK_THAT(msg, ContainsSubstring("'w'"));
    CHECK_THAT(msg, ContainsSubstring("needs 12"));
  }
  SECTION("offsets past the end of the file") {
    const auto msg = error_of(safetensors_with_header(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [100, 116]}})", 16));
    CHECK_THAT(msg, ContainsSubstring("beyond the data area"));
  }
  SECTION("overlapping tensors") {
    const auto msg = error_of(safetensors_with_header(
        R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
        16));
    CHECK_THAT(msg, ContainsSubstring("overlap"));
    CHECK_THAT(msg, ContainsSubstring("'a'"));
    CHECK_THAT(msg, ContainsSubstring("'b'"));
  }
  SECTION("shape whose element count overflows") {
    const auto msg = error_of(safetensors_with_header(
        R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})", 0));
    CHECK_THAT(msg, ContainsSubstring("overflows"));
  }
  SECTION("shape whose byte count overflows") {
    const auto msg = error_of(safetensors_with_header(
        R"({"w": {"dtype": "I64", "shape": [4611686018427387904], "data_offsets": [0, 0]}})", 0));
    CHECK_THAT(msg, ContainsSubstring("overflows the byte count"));
  }
  SECTION("offsets beyond int64") {
    const auto msg = error_of(safetensors_with_header(
        R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 0]}})", 0));
    CHECK_THAT(msg, ContainsSubstring("non-negative integers"));
  }
}

TEST_CASE("safetensors: zero-size tensors may share an offset", "[unit]") {
  auto r = parse(safetensors_with_header(
      R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
      4));
  REQUIRE(r.is_ok());
  CHECK(r->tensors.size() == 2);
}
