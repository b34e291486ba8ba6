// ResponseStore: get/put/erase, least-recently-used eviction by entries and by bytes, oversized entries refused.
#include <catch2/catch_test_macros.hpp>

#include "http/response_store.h"

using voltserve::http::ResponseStore;
using voltserve::http::StoredResponse;
using voltserve::openai::Json;

namespace {

StoredResponse entry(const std::string& text) { return StoredResponse{Json{{"text", text}}, Json::array({text})}; }

}  // namespace

TEST_CASE("response store: put, get, erase", "[unit]") {
  ResponseStore s;
  CHECK(s.put("a", entry("one")));
  REQUIRE(s.get("a"));
  CHECK(s.get("a")->response["text"] == "one");
  CHECK(s.get("a")->conversation[0] == "one");
  CHECK_FALSE(s.get("b"));
  CHECK(s.put("a", entry("two")));
  CHECK(s.size() == 1);
  CHECK(s.get("a")->response["text"] == "two");
  CHECK(s.erase("a"));
  CHECK_FALSE(s.erase("a"));
  CHECK(s.size() == 0);
  CHECK(s.bytes() == 0);
}

TEST_CASE("response store: the least recently used entry goes first", "[unit]") {
  ResponseStore s;
  s.configure(2, 1 << 20);
  s.put("a", entry("1"));
  s.put("b", entry("2"));
  CHECK(s.get("a"));  // a is now the most recent
  s.put("c", entry("3"));
  CHECK(s.get("a"));
  CHECK_FALSE(s.get("b"));
  CHECK(s.get("c"));
  CHECK(s.size() == 2);
}

TEST_CASE("response store: the byte bound evicts and refuses", "[unit]") {
  ResponseStore s;
  const std::string big(1000, 'x');
  s.configure(100, 2500);
  CHECK(s.put("a", entry(big)));
  CHECK(s.put("b", entry(big)));  // a + b > 2500 bytes: a goes
  CHECK_FALSE(s.get("a"));
  CHECK(s.get("b"));
  CHECK(s.bytes() <= 2500);
  CHECK_FALSE(s.put("huge", entry(std::string(5000, 'y'))));
  CHECK_FALSE(s.get("huge"));
  CHECK(s.get("b"));
  s.configure(0, 2500);  // a store of no entries keeps nothing
  CHECK(s.size() == 0);
  CHECK_FALSE(s.put("c", entry("z")));
}
