// See client_connection.h.
#include "http/client_connection.h"

namespace voltserve::http {

namespace {
thread_local ClientConnection* t_current = nullptr;
}  // namespace

void ClientConnection::mark_peer_gone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (peer_gone_.exchange(true, std::memory_order_acq_rel)) return;
  for (auto& [id, fn] : watches_) fn();
  watches_.clear();
}

ClientConnection::WatchId ClientConnection::watch(std::function<void()> on_gone) {
  std::lock_guard<std::mutex> lock(mu_);
  const WatchId id = next_watch_++;
  if (peer_gone_.load(std::memory_order_acquire)) {
    on_gone();
    return id;
  }
  watches_.emplace_back(id, std::move(on_gone));
  return id;
}

void ClientConnection::unwatch(WatchId id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = watches_.begin(); it != watches_.end(); ++it) {
    if (it->first == id) {
      watches_.erase(it);
      return;
    }
  }
}

ClientConnection* current_connection() { return t_current; }

CurrentConnection::CurrentConnection(ClientConnection* conn) : previous_(t_current) { t_current = conn; }

CurrentConnection::~CurrentConnection() { t_current = previous_; }

}  // namespace voltserve::http
