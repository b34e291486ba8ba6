// See front_end.h. Level-triggered epoll for reading (EPOLLIN | EPOLLRDHUP); a connection with a worker is watched
// for the hang-up only (EPOLLRDHUP | EPOLLONESHOT: one report, no spinning while the worker owns the socket).
#include "http/front_end.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "http/server_log.h"

namespace voltserve::http {

namespace {

constexpr uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP;
constexpr uint32_t kWatchEvents = EPOLLRDHUP | EPOLLONESHOT;
constexpr int kReservedFds = 128;              // model shards, logs, epoll, the engine: not for connections
constexpr int kMaxLingering = 256;             // refused connections being closed, beyond max_connections
constexpr auto kLinger = std::chrono::seconds(2);  // after an error answer: read and discard, then close
constexpr auto kSweepEvery = std::chrono::milliseconds(100);
constexpr size_t kReadPerEvent = 1u << 20;     // fairness: at most this much from one connection per event
const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

void send_best_effort(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // a full socket buffer or a gone peer: an error answer is not worth waiting for
    }
  }
}

// Discards whatever the client already sent, so that close() ends with FIN rather than RST (which would make the
// client lose the answer written just before).
void drain_input(int fd) {
  char buf[4096];
  for (int i = 0; i < 16; ++i) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && errno == EINTR)) return;
  }
}

// "1.2.3.4" or "::1"; IPv4 clients of a dual-stack socket come as ::ffff:1.2.3.4 and are shown as IPv4.
std::pair<std::string, int> address_of(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    return {text, ntohs(a->sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    }
    return {text, ntohs(a->sin6_port)};
  }
  return {"", 0};
}

// Raises the soft open-file limit to the hard one (as nginx's worker_rlimit_nofile or Go's runtime do): every
// connection is a descriptor. Returns the soft limit in force.
int64_t raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  rlim_t want = lim.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : std::min<rlim_t>(lim.rlim_max, rlim_t{1} << 20);
  if (lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return static_cast<int64_t>(lim.rlim_cur);
}

}  // namespace

ConnectionFrontEnd::ConnectionFrontEnd(FrontEndOptions options, FrontEndCounters& counters, Reject reject)
    : options_(std::move(options)), counters_(counters), reject_(std::move(reject)),
      max_connections_(options_.max_connections) {}

ConnectionFrontEnd::~ConnectionFrontEnd() {
  for (auto& [fd, c] : conns_) {
    if (c.state != State::kDispatched) ::close(fd);
  }
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_, spare_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

Result<int> ConnectionFrontEnd::bind(const std::string& host, int port) {
  const int64_t limit = raise_open_file_limit();
  const int64_t usable = std::max<int64_t>(16, limit - kReservedFds - kMaxLingering);
  if (usable < max_connections_) {
    server_log().warn("--max-connections {} lowered to {}: the open-file limit is {} (raise it with ulimit -n)",
                      max_connections_, usable, limit);
    max_connections_ = static_cast<int>(usable);
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return unavailable(fmt::format("cannot create the event loop: {}", std::strerror(errno)));

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return unavailable(fmt::format("cannot bind to {}:{}: {}", host, port, gai_strerror(rc)));
  }
  std::string why = "no address";
  for (addrinfo* ai = found; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A burst of clients connects at once: the kernel's accept queue must hold them (httplib listens with 5).
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return unavailable(fmt::format("cannot bind to {}:{} ({}: in use, or not an address of this machine)", host, port, why));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  const int bound = address_of(ss).second;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return bound;
}

void ConnectionFrontEnd::run(Dispatch dispatch) {
  dispatch_ = std::move(dispatch);
  epoll_event events[256];
  Clock::time_point next_sweep = Clock::now() + kSweepEvery;
  while (!stop_requested_.load()) {
    const int n = epoll_wait(epoll_fd_, events, 256, static_cast<int>(kSweepEvery.count()));
    now_ = Clock::now();
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_all();
      } else if (fd == wake_fd_) {
        uint64_t count = 0;
        (void)!::read(wake_fd_, &count, sizeof count);
        take_finished();
      } else {
        on_event(fd, events[i].events);
      }
    }
    if (now_ >= next_sweep) {
      sweep();
      next_sweep = now_ + kSweepEvery;
    }
    for (int fd : close_later_) ::close(fd);
    close_later_.clear();
  }
  std::vector<std::pair<std::shared_ptr<ClientConnection>, bool>> pending;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    stopped_ = true;
    pending.swap(finished_);
  }
  for (auto& [conn, keep] : pending) {
    auto it = conns_.find(conn->fd());
    if (it != conns_.end() && it->second.conn == conn) it->second.state = State::kReading;  // closed below
  }
  std::vector<int> fds;
  for (auto& [fd, c] : conns_) {
    if (c.state != State::kDispatched) {
      fds.push_back(fd);
    } else {
      // The server stops after its drain: whatever still waits for the engine on behalf of a client gives up now
      // (a response being written finishes its write).
      c.conn->mark_peer_gone();
    }
  }
  for (int fd : fds) close_conn(fd);
  for (int fd : close_later_) ::close(fd);
  close_later_.clear();
  // Connections a worker still holds stay in conns_ (their descriptors are closed by finished()).
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void ConnectionFrontEnd::stop() {
  stop_requested_ = true;
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void ConnectionFrontEnd::finished(std::shared_ptr<ClientConnection> conn, bool keep_alive) {
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    if (!stopped_) {
      finished_.emplace_back(std::move(conn), keep_alive);
      const uint64_t one = 1;
      (void)!::write(wake_fd_, &one, sizeof one);
      return;
    }
  }
  ::shutdown(conn->fd(), SHUT_RDWR);
  ::close(conn->fd());
}

void ConnectionFrontEnd::accept_all() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: the pending connection would make the listening socket readable forever. Give up the
        // spare one, take the connection, refuse it, take the spare back.
        ::close(spare_fd_);
        spare_fd_ = -1;
        fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          ++counters_.shed_connection_limit;
          reject_fresh(fd, 503, "the server is out of file descriptors; retry");
        }
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        server_log().warn("out of file descriptors ({} connections open): refusing new connections", conns_.size());
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) server_log().warn("accept: {}", std::strerror(errno));
      return;
    }
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    auto [peer_ip, peer_port] = address_of(peer);
    auto [local_ip, local_port] = address_of(local);
    admit(fd, std::move(peer_ip), peer_port, std::move(local_ip), local_port);
  }
}

void ConnectionFrontEnd::admit(int fd, std::string peer_ip, int peer_port, std::string local_ip, int local_port) {
  // Tokens are small writes that must leave at once (SSE), not wait for Nagle's algorithm.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ++counters_.accepted;
  if (options_.max_connections_per_address > 0 && per_address_[peer_ip] >= options_.max_connections_per_address) {
    ++counters_.shed_address_limit;
    reject_fresh(fd, 429, fmt::format("too many connections from {} (--max-connections-per-address {})", peer_ip,
                                      options_.max_connections_per_address));
    return;
  }
  if (static_cast<int>(conns_.size()) - n_lingering_ >= max_connections_ && !evict_one()) {
    ++counters_.shed_connection_limit;
    reject_fresh(fd, 503, fmt::format("the server has {} connections open (--max-connections); retry", conns_.size()));
    return;
  }
  Conn c;
  c.conn = std::make_shared<ClientConnection>(fd, peer_ip, peer_port, std::move(local_ip), local_port);
  c.framer = RequestFramer(options_.framing);
  c.since = now_;
  c.deadline = now_ + seconds(options_.header_timeout_s);
  c.address = std::move(peer_ip);
  epoll_event ev{};
  ev.events = kReadEvents;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return;
  }
  ++per_address_[c.address];
  conns_.emplace(fd, std::move(c));
  ++counters_.open;
}

// At the connection cap a new client is worth more than the connection that has idled or dawdled longest: first an
// idle keep-alive one, then one still sending its header, then one sending a body (connections being closed after an
// error answer are outside the cap already; those with a worker are never evicted).
bool ConnectionFrontEnd::evict_one() {
  int victim = -1;
  int victim_rank = 4;
  Clock::time_point victim_since = Clock::time_point::max();
  for (auto& [fd, c] : conns_) {
    int rank = 4;
    if (c.state == State::kIdle) rank = 1;
    else if (c.state == State::kReading) rank = c.framer.frame().header_complete ? 3 : 2;
    if (rank < victim_rank || (rank == victim_rank && c.since < victim_since)) {
      victim = fd;
      victim_rank = rank;
      victim_since = c.since;
    }
  }
  if (victim < 0 || victim_rank == 4) return false;
  Conn& c = conns_.at(victim);
  ++counters_.evicted;
  if (c.state == State::kReading && c.any_bytes) {
    ++counters_.shed_connection_limit;
    reject(c, 503, c.framer.frame().target, "the server is at its connection limit (--max-connections); retry");
  }
  close_conn(victim);
  return true;
}

void ConnectionFrontEnd::on_event(int fd, uint32_t events) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  switch (c.state) {
    case State::kDispatched:
      if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c.conn->mark_peer_gone();
      return;
    case State::kLingering: {
      char buf[16384];
      while (true) {
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) close_conn(fd);
        return;
      }
    }
    case State::kReading:
    case State::kIdle:
      read_from(c);
      return;
  }
}

void ConnectionFrontEnd::read_from(Conn& c) {
  const int fd = c.conn->fd();
  char buf[16384];
  bool eof = false;
  size_t taken = 0;
  while (taken < kReadPerEvent) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (buffered_ + static_cast<size_t>(n) > options_.max_buffered_bytes) {
        ++counters_.shed_buffer_limit;
        reject(c, 503, c.framer.frame().target, "the server holds too many request bytes already; retry");
        return;
      }
      c.conn->buffer().append(buf, static_cast<size_t>(n));
      buffered_ += static_cast<size_t>(n);
      c.counted += static_cast<size_t>(n);
      taken += static_cast<size_t>(n);
      if (!c.any_bytes) {
        c.any_bytes = true;
        if (c.state == State::kIdle) {
          c.state = State::kReading;
          c.since = now_;
          c.deadline = now_ + seconds(options_.header_timeout_s);
        }
      }
      if (static_cast<size_t>(n) < sizeof buf) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    eof = true;  // orderly close (0) or a failed socket
    break;
  }
  if (c.any_bytes) advance(c);
  if (!eof) return;
  auto it = conns_.find(fd);
  if (it == conns_.end() || it->second.state == State::kDispatched) return;  // a worker has it; it sees the hang-up
  if (it->second.state == State::kLingering) return;
  close_conn(fd);
}

void ConnectionFrontEnd::advance(Conn& c) {
  const Frame& f = c.framer.scan(c.conn->buffer());
  switch (f.state) {
    case FrameState::kReject:
      ++counters_.malformed;
      reject(c, f.reject_status, f.target, f.reject_message);
      return;
    case FrameState::kIncomplete:
      if (f.header_complete && !c.body_deadline) {
        c.body_deadline = true;
        c.deadline = now_ + seconds(options_.body_timeout_s);
      }
      if (f.header_complete && f.expects_continue && !c.continue_sent) {
        c.continue_sent = true;
        send_best_effort(c.conn->fd(), kContinue);
      }
      return;
    case FrameState::kComplete:
      dispatch_request(c);
      return;
  }
}

void ConnectionFrontEnd::dispatch_request(Conn& c) {
  Frame frame = c.framer.frame();
  std::string& buf = c.conn->buffer();
  // The Expect line is answered here (when the body had not come with the header); httplib would answer it again.
  if (frame.expects_continue) {
    buf.erase(frame.expect_begin, frame.expect_end - frame.expect_begin);
    frame.total_bytes -= frame.expect_end - frame.expect_begin;
  }
  if (frame.leading_blank_bytes > 0) {
    buf.erase(0, frame.leading_blank_bytes);
    frame.total_bytes -= frame.leading_blank_bytes;
  }
  c.framer.reset();
  c.any_bytes = false;
  c.body_deadline = false;
  c.continue_sent = false;
  uncount(c);  // the worker's bytes now; what is left over is counted again when it comes back
  c.state = State::kDispatched;
  c.since = now_;
  const int fd = c.conn->fd();
  set_interest(fd, kWatchEvents);
  if (!dispatch_(c.conn, frame)) {
    c.state = State::kReading;
    ++counters_.shed_workers_busy;
    reject(c, 503, frame.target, "every HTTP worker is busy (--http-threads); retry");
  }
}

void ConnectionFrontEnd::take_finished() {
  std::vector<std::pair<std::shared_ptr<ClientConnection>, bool>> done;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    done.swap(finished_);
  }
  for (auto& [conn, keep_alive] : done) {
    const int fd = conn->fd();
    auto it = conns_.find(fd);
    if (it == conns_.end() || it->second.conn != conn) continue;
    Conn& c = it->second;
    if (!keep_alive || conn->peer_gone()) {
      c.state = State::kReading;
      close_conn(fd);
      continue;
    }
    c.state = State::kIdle;
    c.since = now_;
    c.deadline = now_ + seconds(options_.keep_alive_timeout_s);
    c.counted = conn->buffer().size();
    buffered_ += c.counted;
    set_interest(fd, kReadEvents);
    if (!conn->buffer().empty()) {  // a pipelined request came with the last one
      c.any_bytes = true;
      c.state = State::kReading;
      c.deadline = now_ + seconds(options_.header_timeout_s);
      advance(c);
    }
  }
}

void ConnectionFrontEnd::sweep() {
  std::vector<int> due;
  for (auto& [fd, c] : conns_) {
    if (c.state != State::kDispatched && c.deadline <= now_) due.push_back(fd);
  }
  for (int fd : due) {
    Conn& c = conns_.at(fd);
    if (c.state == State::kLingering) {
      close_conn(fd);
    } else if (c.state == State::kIdle) {
      ++counters_.idle_closed;
      close_conn(fd);
    } else if (!c.any_bytes) {
      ++counters_.header_timeouts;  // connected and sent nothing: nothing to answer
      close_conn(fd);
    } else if (c.body_deadline) {
      ++counters_.body_timeouts;
      reject(c, 408, c.framer.frame().target,
             fmt::format("the request body did not arrive within {} s (--body-timeout)", options_.body_timeout_s));
    } else {
      ++counters_.header_timeouts;
      reject(c, 408, c.framer.frame().target,
             fmt::format("the request header did not arrive within {} s (--header-timeout)", options_.header_timeout_s));
    }
  }
}

void ConnectionFrontEnd::reject(Conn& c, int status, const std::string& target, const std::string& message) {
  const int fd = c.conn->fd();
  send_best_effort(fd, reject_(status, target, message));
  ::shutdown(fd, SHUT_WR);
  uncount(c);
  c.conn->buffer().clear();
  c.conn->buffer().shrink_to_fit();
  if (c.state != State::kLingering) {
    if (--per_address_[c.address] <= 0) per_address_.erase(c.address);
    ++n_lingering_;
  }
  c.state = State::kLingering;
  c.since = now_;
  c.deadline = now_ + kLinger;
  set_interest(fd, kReadEvents);
}

void ConnectionFrontEnd::reject_fresh(int fd, int status, const std::string& message) {
  drain_input(fd);
  send_best_effort(fd, reject_(status, "", message));
  if (n_lingering_ >= kMaxLingering) {
    drain_input(fd);
    ::close(fd);
    return;
  }
  ::shutdown(fd, SHUT_WR);
  Conn c;
  c.conn = std::make_shared<ClientConnection>(fd, "", 0, "", 0);
  c.state = State::kLingering;
  c.since = now_;
  c.deadline = now_ + kLinger;
  epoll_event ev{};
  ev.events = kReadEvents;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    return;
  }
  ++n_lingering_;
  conns_.emplace(fd, std::move(c));
  ++counters_.open;
}

void ConnectionFrontEnd::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  uncount(c);
  if (c.state == State::kLingering) {
    --n_lingering_;
  } else if (--per_address_[c.address] <= 0) {
    per_address_.erase(c.address);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close_later_.push_back(fd);
  conns_.erase(it);
  --counters_.open;
}

void ConnectionFrontEnd::set_interest(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void ConnectionFrontEnd::uncount(Conn& c) {
  buffered_ -= std::min(buffered_, c.counted);
  c.counted = 0;
}

}  // namespace voltserve::http
