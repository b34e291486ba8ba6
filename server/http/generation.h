// The bridge from one HTTP request to its engine requests (one per choice): submits them, receives their events
// on a thread-safe queue (the engine thread only pushes), and cancels whatever is unfinished when the request
// goes away (client disconnect, timeout, error). A waiter can be woken from another thread (interrupt(): the client
// hung up). Tested by tests/server/connection_test.cpp and the e2e suites (tests/e2e/).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "voltserve/engine.h"

namespace voltserve::http {

struct ChoiceEvent {
  int choice = 0;
  int epoch = 0;  // which submission of the choice produced it (resubmit() starts a new one)
  Event event;
};

class Generation {
 public:
  explicit Generation(Engine& engine) : engine_(engine), queue_(std::make_shared<Queue>()) {}
  ~Generation() { cancel_all(); }
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits the request of choice `choice` (0, 1, ... in order).
  Status submit(int choice, Request request);
  // Replaces the engine request of `choice` by `request` (a continuation, e.g. after a reasoning budget closed
  // </think>): the old one is cancelled and its events still in flight are dropped by next().
  Status resubmit(int choice, Request request);
  // The next event of any choice (never one of a replaced submission), or nullopt after `timeout` (or at once when
  // interrupted, unless `past_interrupt`: then interruption does not end the wait).
  std::optional<ChoiceEvent> next(std::chrono::milliseconds timeout, bool past_interrupt = false);
  // A callable for any thread (it outlives this object safely) that wakes next() and makes interrupted() true.
  std::function<void()> interrupter() const;
  bool interrupted() const;
  // Cancels one choice (e.g. a stop string matched) or all unfinished ones; cancel_all returns those it cancelled.
  void cancel(int choice);
  std::vector<int> cancel_all();
  // Marks a choice as finished from the caller's side (its final event was seen or it was cancelled by us).
  void mark_finished(int choice);

 private:
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<ChoiceEvent> events;
    bool interrupted = false;
  };
  Engine& engine_;
  std::shared_ptr<Queue> queue_;  // shared with the sinks: events may arrive after this object is gone
  std::vector<RequestId> ids_;
  std::vector<bool> finished_;
  std::vector<int> epochs_;
};

}  // namespace voltserve::http
