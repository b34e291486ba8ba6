// One client connection: its socket, addresses and the bytes received and not yet consumed, plus the one fact that
// crosses threads while a worker answers it — the client hung up. The front end notices the hang-up (epoll) and
// runs the watches a generation registered, so a request whose client left is cancelled wherever it waits, on every
// route. current_connection() is the connection the calling worker thread is answering. Tested by
// tests/server/connection_test.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace voltserve::http {

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
 public:
  ClientConnection(int fd, std::string peer_ip, int peer_port, std::string local_ip, int local_port)
      : fd_(fd), peer_ip_(std::move(peer_ip)), peer_port_(peer_port), local_ip_(std::move(local_ip)),
        local_port_(local_port) {}
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  int fd() const { return fd_; }
  const std::string& peer_ip() const { return peer_ip_; }
  int peer_port() const { return peer_port_; }
  const std::string& local_ip() const { return local_ip_; }
  int local_port() const { return local_port_; }

  // Received bytes not yet consumed. Owned by whichever thread holds the connection (the front end while it reads,
  // one worker while it answers); handing the connection over is the synchronisation.
  std::string& buffer() { return buffer_; }
  uint64_t n_requests = 0;  // requests answered on this connection

  // Thread-safe. The client closed its side (or the socket failed): nobody will read an answer.
  bool peer_gone() const { return peer_gone_.load(std::memory_order_acquire); }
  // Marks the hang-up and runs every watch once (under the connection's lock, so that unwatch() returning means the
  // watch is not running and never will). Watches must be quick (wake a thread) and must not call back in here.
  void mark_peer_gone();

  using WatchId = uint64_t;
  // Registers `on_gone`; if the client is already gone it runs at once, on the calling thread.
  WatchId watch(std::function<void()> on_gone);
  void unwatch(WatchId id);

 private:
  const int fd_;
  const std::string peer_ip_;
  const int peer_port_;
  const std::string local_ip_;
  const int local_port_;
  std::string buffer_;
  std::atomic<bool> peer_gone_{false};
  std::mutex mu_;
  WatchId next_watch_ = 1;
  std::vector<std::pair<WatchId, std::function<void()>>> watches_;
};

// The connection the calling worker thread is answering (nullptr outside a request, e.g. in unit tests).
ClientConnection* current_connection();

// Sets current_connection() for the calling thread for its lifetime.
class CurrentConnection {
 public:
  explicit CurrentConnection(ClientConnection* conn);
  ~CurrentConnection();
  CurrentConnection(const CurrentConnection&) = delete;
  CurrentConnection& operator=(const CurrentConnection&) = delete;

 private:
  ClientConnection* previous_;
};

}  // namespace voltserve::http
