// See stop_matcher.h. Input is UTF-8 from the incremental decoder; cuts happen where a stop string would start,
// which is a character boundary, so emitted pieces never split a code point.
#include "openai/stop_matcher.h"

#include <algorithm>

namespace voltserve::openai {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  stops_.erase(std::remove_if(stops_.begin(), stops_.end(), [](const std::string& s) { return s.empty(); }),
               stops_.end());
}

std::string StopMatcher::push(std::string_view text) {
  if (matched_) return {};
  if (stops_.empty()) return std::string(text);
  pending_.append(text);
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& stop : stops_) {
    size_t pos = pending_.find(stop);
    if (pos != std::string::npos && pos < best) {
      best = pos;
      best_stop = &stop;
    }
  }
  if (best_stop) {
    matched_ = true;
    matched_stop_ = *best_stop;
    std::string out = pending_.substr(0, best);
    if (include_stop_) out += *best_stop;
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    size_t max_k = std::min(stop.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace voltserve::openai
