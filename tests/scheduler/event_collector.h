// Test helper: an EventSink per stream that records every event, checks the one-final-event-last rule, and lets
// the test thread wait for tokens or the end of a stream.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "voltserve/request.h"

namespace voltserve::testing {

struct Stream {
  std::vector<Event> events;
  std::vector<int32_t> tokens;
  int n_final = 0;
  int n_after_final = 0;  // events that arrived after the final one (must stay 0)
  int64_t first_event_seq = -1;  // global order of this stream's first and final events
  int64_t final_event_seq = -1;
  Event final_event;
};

class EventCollector {
 public:
  EventSink sink(int key) {
    return [this, key](Event ev) { on_event(key, std::move(ev)); };
  }

  Stream get(int key) {
    std::lock_guard lk(mutex_);
    return streams_[key];
  }

  // Waits until the stream has at least n tokens or has finished; false on timeout.
  bool wait_tokens(int key, size_t n, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, timeout, [&] { return streams_[key].tokens.size() >= n || streams_[key].n_final > 0; });
  }

  bool wait_final(int key, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock lk(mutex_);
    return cv_.wait_for(lk, timeout, [&] { return streams_[key].n_final > 0; });
  }

 private:
  void on_event(int key, Event ev) {
    {
      std::lock_guard lk(mutex_);
      Stream& s = streams_[key];
      const int64_t order = next_seq_++;
      if (s.first_event_seq < 0) s.first_event_seq = order;
      if (s.n_final > 0) ++s.n_after_final;
      s.tokens.insert(s.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finished) {
        ++s.n_final;
        s.final_event_seq = order;
        s.final_event = ev;
      }
      s.events.push_back(std::move(ev));
    }
    cv_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<int, Stream> streams_;
  int64_t next_seq_ = 0;
};

}  // namespace voltserve::testing
