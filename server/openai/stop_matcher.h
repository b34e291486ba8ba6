// Stop strings matched across token boundaries: text that could still become a stop string is held back, and
// the matched stop string itself is never emitted. Tested by tests/server/stop_matcher_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace voltserve::openai {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

  // Appends decoded text; returns the part that is safe to emit now. Once a stop string matched, returns only
  // the text before it (plus the stop itself when include_stop) and "" afterwards.
  std::string push(std::string_view text);
  // End of generation without a match: releases what was held back.
  std::string flush();

  bool matched() const { return matched_; }
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  std::vector<std::string> stops_;
  bool include_stop_;
  std::string pending_;
  bool matched_ = false;
  std::string matched_stop_;
};

}  // namespace voltserve::openai
