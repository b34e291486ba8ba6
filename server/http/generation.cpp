// See generation.h.
#include "http/generation.h"

namespace voltserve::http {

Status Generation::submit(int choice, Request request) {
  if (static_cast<int>(ids_.size()) <= choice) {
    ids_.resize(choice + 1, 0);
    finished_.resize(choice + 1, true);
    epochs_.resize(choice + 1, 0);
  }
  std::shared_ptr<Queue> queue = queue_;
  int epoch = epochs_[choice];
  EventSink sink = [queue, choice, epoch](Event event) {
    {
      std::lock_guard<std::mutex> lock(queue->mu);
      queue->events.push_back(ChoiceEvent{choice, epoch, std::move(event)});
    }
    queue->cv.notify_one();
  };
  Result<RequestId> id = engine_.submit(std::move(request), std::move(sink));
  if (!id.is_ok()) return id.status();
  ids_[choice] = *id;
  finished_[choice] = false;
  return Status::ok();
}

Status Generation::resubmit(int choice, Request request) {
  cancel(choice);
  if (choice >= 0 && choice < static_cast<int>(epochs_.size())) ++epochs_[choice];
  return submit(choice, std::move(request));
}

std::optional<ChoiceEvent> Generation::next(std::chrono::milliseconds timeout, bool past_interrupt) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(queue_->mu);
  while (true) {
    queue_->cv.wait_until(lock, deadline,
                          [&] { return !queue_->events.empty() || (queue_->interrupted && !past_interrupt); });
    if (queue_->events.empty()) return std::nullopt;
    ChoiceEvent e = std::move(queue_->events.front());
    queue_->events.pop_front();
    bool stale = e.choice >= 0 && e.choice < static_cast<int>(epochs_.size()) && e.epoch != epochs_[e.choice];
    if (!stale) return e;
  }
}

std::function<void()> Generation::interrupter() const {
  std::shared_ptr<Queue> queue = queue_;
  return [queue] {
    {
      std::lock_guard<std::mutex> lock(queue->mu);
      queue->interrupted = true;
    }
    queue->cv.notify_all();
  };
}

bool Generation::interrupted() const {
  std::lock_guard<std::mutex> lock(queue_->mu);
  return queue_->interrupted;
}

void Generation::cancel(int choice) {
  if (choice < 0 || choice >= static_cast<int>(ids_.size()) || finished_[choice]) return;
  engine_.cancel(ids_[choice]);
  finished_[choice] = true;
}

std::vector<int> Generation::cancel_all() {
  std::vector<int> cancelled;
  for (int i = 0; i < static_cast<int>(ids_.size()); ++i) {
    if (!finished_[i]) cancelled.push_back(i);
    cancel(i);
  }
  return cancelled;
}

void Generation::mark_finished(int choice) {
  if (choice >= 0 && choice < static_cast<int>(finished_.size())) finished_[choice] = true;
}

}  // namespace voltserve::http
