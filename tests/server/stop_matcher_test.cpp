// Stop strings across token boundaries: held back while ambiguous, never emitted once matched.
#include <catch2/catch_test_macros.hpp>

#include "openai/stop_matcher.h"

using voltserve::openai::StopMatcher;

TEST_CASE("stop string split across pushes is not emitted", "[unit]") {
  StopMatcher m({"STOP"});
  std::string out;
  out += m.push("hello S");
  CHECK(out == "hello ");  // "S" held back
  out += m.push("TO");
  CHECK(out == "hello ");
  out += m.push("P and more");
  CHECK(m.matched());
  CHECK(m.matched_stop() == "STOP");
  CHECK(out == "hello ");
  CHECK(m.push("after").empty());
}

TEST_CASE("a false start is released", "[unit]") {
  StopMatcher m({"STOP"});
  std::string out = m.push("ST");
  CHECK(out.empty());
  out += m.push("ART");
  CHECK(out == "START");
  out += m.push("ST");
  out += m.flush();
  CHECK(out == "STARTST");
  CHECK_FALSE(m.matched());
}

TEST_CASE("earliest of several stops wins, include_stop keeps it", "[unit]") {
  StopMatcher m({"world", "lo w"}, /*include_stop=*/true);
  CHECK(m.push("hello world") == "hello w");
  CHECK(m.matched_stop() == "lo w");
}

TEST_CASE("no stops: pass-through", "[unit]") {
  StopMatcher m({});
  CHECK(m.push("abc") == "abc");
  CHECK(m.flush().empty());
}
