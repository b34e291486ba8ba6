// See request_processor.h.
#include "http/request_processor.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace voltserve::http {

namespace {

using Clock = std::chrono::steady_clock;

// httplib::Stream over one buffered request: reads come from the bytes the front end framed (and end with the
// request), writes go to the non-blocking socket, each within the write timeout.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(ClientConnection& conn, size_t n_bytes, double write_timeout_s)
      : conn_(conn), end_(std::min(n_bytes, conn.buffer().size())),
        write_timeout_(std::chrono::milliseconds(static_cast<int64_t>(write_timeout_s * 1000))) {}

  bool is_readable() const override { return pos_ < end_; }

  // httplib asks before every chunk of a chunked response: a client that hung up is not writable.
  bool is_writable() const override {
    return write_ok_ && !conn_.peer_gone() && wait_writable(Clock::now() + write_timeout_);
  }

  // The end of the framed request reads as the end of the stream.
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, end_ - pos_);
    std::memcpy(ptr, conn_.buffer().data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  // Sends all of it or fails: a reader that does not take `size` bytes within the write timeout counts as gone.
  ssize_t write(const char* ptr, size_t size) override {
    if (!write_ok_) return -1;
    const Clock::time_point deadline = Clock::now() + write_timeout_;
    size_t sent = 0;
    while (sent < size) {
      ssize_t n = ::send(conn_.fd(), ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(deadline)) continue;
      write_ok_ = false;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = conn_.peer_ip();
    port = conn_.peer_port();
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = conn_.local_ip();
    port = conn_.local_port();
  }

  // httplib 0.11.4 reads this only to refuse descriptors >= FD_SETSIZE (its select() build): nothing here is ever
  // select()ed, so no descriptor is reported.
  socket_t socket() const override { return INVALID_SOCKET; }

  bool write_ok() const { return write_ok_; }

 private:
  bool wait_writable(Clock::time_point deadline) const {
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return false;
      pollfd p{conn_.fd(), POLLOUT, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r > 0) return (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
      if (conn_.peer_gone()) return false;
    }
  }

  ClientConnection& conn_;
  const size_t end_;
  size_t pos_ = 0;
  const Clock::duration write_timeout_;
  bool write_ok_ = true;
};

}  // namespace

bool RequestProcessor::serve(ClientConnection& conn, size_t n_bytes, bool last) {
  ConnectionStream stream(conn, n_bytes, write_timeout_s_);
  bool client_closes = false;
  bool written = false;
  {
    CurrentConnection current(&conn);
    written = process_request(stream, last, client_closes, nullptr);
  }
  conn.buffer().erase(0, std::min(n_bytes, conn.buffer().size()));
  ++conn.n_requests;
  return written && stream.write_ok() && !client_closes && !last && !conn.peer_gone();
}

void RequestProcessor::set_serving(bool serving) {
  // Any valid descriptor value means "running" to httplib; it is never used as a socket.
  svr_sock_ = serving ? 0 : INVALID_SOCKET;
}

}  // namespace voltserve::http
