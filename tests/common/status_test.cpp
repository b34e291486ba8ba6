// Status / Result<T> behaviour.
#include <catch2/catch_test_macros.hpp>

#include "voltserve/status.h"

using namespace voltserve;

namespace {
Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("x must be positive, got " + std::to_string(x));
  return x;
}
Result<int> doubled(int x) {
  VS_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}
}  // namespace

TEST_CASE("Result carries a value or the status that explains its absence", "[unit]") {
  auto ok = doubled(21);
  REQUIRE(ok.is_ok());
  CHECK(*ok == 42);
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().to_string() == "InvalidArgument: x must be positive, got -1");
}
