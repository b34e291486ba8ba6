// The connection front end: one epoll thread owns the listening socket and every connection that no worker is
// answering. It accepts (a cap on connections in all and per client address; at the cap the longest-idle, else the
// slowest connection makes room), reads each request until it is complete — header within --header-timeout, body
// within --body-timeout, request bytes held within one budget — answers malformed, oversized and late requests
// itself, and only then hands the request to a worker (dispatch). While a worker answers, it watches the socket
// for the client hanging up (ClientConnection::mark_peer_gone). Idle keep-alive connections cost a descriptor and a
// few hundred bytes, no thread. Tested by tests/server/connection_test.cpp and tests/e2e/test_slow_clients.py.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/client_connection.h"
#include "http/request_framing.h"
#include "voltserve/status.h"

namespace voltserve::http {

struct FrontEndOptions {
  double header_timeout_s = 10;        // accept (or the first byte after an idle period) -> complete header
  double body_timeout_s = 60;          // complete header -> complete body
  double keep_alive_timeout_s = 60;    // idle time between requests on one connection
  int max_connections = 4096;          // open connections in all (lowered to what the open-file limit allows)
  int max_connections_per_address = 0; // 0 = no limit (a reverse proxy is one address)
  size_t max_buffered_bytes = 256u << 20;  // bytes of requests still arriving, over all connections
  FramingLimits framing;
};

// Read by /metrics; written by the front end thread.
struct FrontEndCounters {
  std::atomic<int64_t> open{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> header_timeouts{0};   // no complete header in time (including connections that sent nothing)
  std::atomic<uint64_t> body_timeouts{0};
  std::atomic<uint64_t> idle_closed{0};       // keep-alive connections closed after --keep-alive-timeout
  std::atomic<uint64_t> evicted{0};           // closed at the connection cap to make room for a new one
  std::atomic<uint64_t> malformed{0};         // requests refused before a worker saw them (400, 413, 414, 431)
  // Refused for capacity (with Retry-After): the connection cap, the per-address cap, the request-byte budget, and
  // requests no worker could take.
  std::atomic<uint64_t> shed_connection_limit{0};
  std::atomic<uint64_t> shed_address_limit{0};
  std::atomic<uint64_t> shed_buffer_limit{0};
  std::atomic<uint64_t> shed_workers_busy{0};
};

class ConnectionFrontEnd {
 public:
  // A complete request is conn->buffer()[0, frame.total_bytes). The callee owns the connection until it calls
  // finished(); false = no worker can take it now (the front end answers 503 with Retry-After).
  using Dispatch = std::function<bool(std::shared_ptr<ClientConnection> conn, const Frame& frame)>;
  // The whole HTTP response for a request refused here: status, the request target ("" when unknown), message.
  using Reject = std::function<std::string(int status, const std::string& target, const std::string& message)>;

  ConnectionFrontEnd(FrontEndOptions options, FrontEndCounters& counters, Reject reject);
  ~ConnectionFrontEnd();
  ConnectionFrontEnd(const ConnectionFrontEnd&) = delete;
  ConnectionFrontEnd& operator=(const ConnectionFrontEnd&) = delete;

  // Listens on host:port (0 = any free port) and returns the port. Raises the open-file limit to its hard limit
  // and lowers max_connections to what it allows.
  Result<int> bind(const std::string& host, int port);
  // Serves until stop(); connections still with a worker are closed by finished().
  void run(Dispatch dispatch);
  void stop();  // any thread
  // A worker is done with `conn`. keep_alive: wait for its next request (one already buffered is served at once).
  void finished(std::shared_ptr<ClientConnection> conn, bool keep_alive);

  int max_connections() const { return max_connections_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class State { kReading, kDispatched, kIdle, kLingering };
  struct Conn {
    std::shared_ptr<ClientConnection> conn;
    State state = State::kReading;
    RequestFramer framer;
    Clock::time_point since;      // when it entered its state (eviction order)
    Clock::time_point deadline;   // of its state's timeout
    bool any_bytes = false;       // a byte of the current request arrived
    bool body_deadline = false;   // the deadline is the body's
    bool continue_sent = false;
    size_t counted = 0;           // bytes of it in buffered_
    std::string address;
  };

  void accept_all();
  void admit(int fd, std::string peer_ip, int peer_port, std::string local_ip, int local_port);
  bool evict_one();
  void on_event(int fd, uint32_t events);
  void read_from(Conn& c);
  void advance(Conn& c);
  void dispatch_request(Conn& c);
  void take_finished();
  void sweep();
  void reject(Conn& c, int status, const std::string& target, const std::string& message);
  void reject_fresh(int fd, int status, const std::string& message);
  void close_conn(int fd);
  void set_interest(int fd, uint32_t events);
  void uncount(Conn& c);

  FrontEndOptions options_;
  FrontEndCounters& counters_;
  Reject reject_;
  Dispatch dispatch_;
  int max_connections_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;   // given up to accept (and refuse) a connection when the process is out of descriptors
  Clock::time_point now_;
  std::unordered_map<int, Conn> conns_;
  std::unordered_map<std::string, int> per_address_;
  size_t buffered_ = 0;
  int n_lingering_ = 0;
  std::vector<int> close_later_;  // closed after the current batch of events, so no descriptor is reused inside it
  std::atomic<bool> stop_requested_{false};
  std::mutex finished_mu_;
  bool stopped_ = false;
  std::vector<std::pair<std::shared_ptr<ClientConnection>, bool>> finished_;
};

}  // namespace voltserve::http
