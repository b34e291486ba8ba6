// DType names, sizes and safetensors spellings.
#include <catch2/catch_test_macros.hpp>

#include "model/safetensors_dtype.h"

using namespace voltserve;

TEST_CASE("dtype names round-trip through the safetensors spelling", "[unit]") {
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3, DType::kU8, DType::kI8, DType::kI32,
                  DType::kI64}) {
    const auto parsed = parse_dtype(dtype_name(d));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == d);
  }
  CHECK(std::string(dtype_name(DType::kF8E4M3)) == "F8_E4M3");
  CHECK(dtype_size_bytes(DType::kBF16) == 2);
  CHECK(dtype_size_bytes(DType::kF32) == 4);
  CHECK(dtype_size_bytes(DType::kF8E4M3) == 1);
  CHECK(dtype_size_bytes(DType::kI64) == 8);
}

TEST_CASE("dtypes voltserve does not read are recognised but not parsed", "[unit]") {
  CHECK_FALSE(parse_dtype("F64").has_value());
  CHECK_FALSE(parse_dtype("bf16").has_value());  // case matters in safetensors
  CHECK(safetensors_dtype_size("F64") == 8u);
  CHECK(safetensors_dtype_size("BOOL") == 1u);
  CHECK(safetensors_dtype_size("F8_E5M2") == 1u);
  CHECK_FALSE(safetensors_dtype_size("NOPE").has_value());
}
