// The connection layer on loopback sockets: the front end (requests reach a worker only when complete, pipelining,
// header / body / keep-alive timeouts, 100-continue, the per-address and connection caps with eviction, the byte
// budget, hang-ups seen while a worker holds the connection), the bounded worker pool, hang-up watches, the
// interruptible event wait of a generation, and httplib answering one buffered request (plain and chunked).
#include <catch2/catch_test_macros.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/client_connection.h"
#include "http/front_end.h"
#include "http/generation.h"
#include "http/request_processor.h"
#include "http/worker_pool.h"

using namespace voltserve;
using namespace voltserve::http;
using namespace std::chrono_literals;

namespace {

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    off += static_cast<size_t>(n);
  }
}

// Reads until `needle` appears, the peer closes, or `timeout` passes; `closed` says whether the peer closed.
std::string read_until(int fd, const std::string& needle, std::chrono::milliseconds timeout, bool* closed = nullptr) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + timeout;
  if (closed) *closed = false;
  while (needle.empty() || out.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool peer_closed_within(int fd, std::chrono::milliseconds timeout) {
  bool closed = false;
  read_until(fd, "", timeout, &closed);
  return closed;
}

// A front end on a free loopback port whose worker answers "HTTP/1.1 200" with the request target as the body,
// or (hold = true) keeps each connection until release().
struct Harness {
  FrontEndCounters counters;
  std::unique_ptr<ConnectionFrontEnd> front_end;
  WorkerPool workers{2, 64};
  std::thread thread;
  int port = 0;
  std::atomic<bool> hold{false};
  std::atomic<int> dispatched{0};
  std::mutex mu;
  std::vector<std::shared_ptr<ClientConnection>> held;
  std::vector<std::string> seen;  // every request the workers got, whole

  explicit Harness(FrontEndOptions options) {
    front_end = std::make_unique<ConnectionFrontEnd>(options, counters,
                                                     [](int status, const std::string&, const std::string& message) {
                                                       return "HTTP/1.1 " + std::to_string(status) +
                                                              " Refused\r\nContent-Length: " +
                                                              std::to_string(message.size()) + "\r\n\r\n" + message;
                                                     });
    Result<int> bound = front_end->bind("127.0.0.1", 0);
    REQUIRE(bound.is_ok());
    port = *bound;
    thread = std::thread([this] {
      front_end->run([this](std::shared_ptr<ClientConnection> conn, const Frame& frame) {
        ++dispatched;
        const size_t n = frame.total_bytes;
        const std::string target = frame.target;
        return workers.try_submit([this, conn, n, target] {
          {
            std::lock_guard<std::mutex> lock(mu);
            seen.push_back(conn->buffer().substr(0, n));
            if (hold) {
              held.push_back(conn);
              return;
            }
          }
          conn->buffer().erase(0, n);
          const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(target.size()) + "\r\n\r\n" + target;
          ::send(conn->fd(), resp.data(), resp.size(), MSG_NOSIGNAL);
          front_end->finished(conn, true);
        });
      });
    });
  }

  void release(bool keep_alive) {
    std::vector<std::shared_ptr<ClientConnection>> conns;
    {
      std::lock_guard<std::mutex> lock(mu);
      conns.swap(held);
    }
    for (auto& c : conns) front_end->finished(c, keep_alive);
  }

  ~Harness() {
    release(false);
    front_end->stop();
    thread.join();
    workers.shutdown();
  }
};

FrontEndOptions quick_options() {
  FrontEndOptions o;
  o.header_timeout_s = 0.4;
  o.body_timeout_s = 0.4;
  o.keep_alive_timeout_s = 0.4;
  return o;
}

}  // namespace

TEST_CASE("front end: a request reaches the worker only when complete, however it is split", "[unit]") {
  Harness h(FrontEndOptions{});
  int fd = connect_to(h.port);
  send_all(fd, "GET /a HTTP/1.1\r\nHost: x\r\n");
  std::this_thread::sleep_for(100ms);
  CHECK(h.dispatched == 0);
  send_all(fd, "\r\n");
  std::string r = read_until(fd, "/a", 2000ms);
  CHECK(r.find("HTTP/1.1 200") == 0);
  CHECK(h.dispatched == 1);
  // A body trickled after the header.
  send_all(fd, "POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhe");
  std::this_thread::sleep_for(100ms);
  CHECK(h.dispatched == 1);
  send_all(fd, "llo");
  r = read_until(fd, "/b", 2000ms);
  CHECK(r.find("/b") != std::string::npos);
  {
    std::lock_guard<std::mutex> lock(h.mu);
    REQUIRE(h.seen.size() == 2);
    CHECK(h.seen[1] == "POST /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  }
  ::close(fd);
}

TEST_CASE("front end: pipelined requests are answered in order on one connection", "[unit]") {
  Harness h(FrontEndOptions{});
  int fd = connect_to(h.port);
  send_all(fd, "GET /one HTTP/1.1\r\n\r\nPOST /two HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyGET /three HTTP/1.1\r\n\r\n");
  std::string r = read_until(fd, "/three", 3000ms);
  const size_t a = r.find("/one");
  const size_t b = r.find("/two");
  const size_t c = r.find("/three");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  REQUIRE(c != std::string::npos);
  CHECK(a < b);
  CHECK(b < c);
  ::close(fd);
}

TEST_CASE("front end: header, body and keep-alive timeouts (408 when something was sent, else a silent close)", "[unit]") {
  Harness h(quick_options());
  int silent = connect_to(h.port);
  int partial = connect_to(h.port);
  send_all(partial, "GET /slow HTTP/1.1\r\nX: ");
  int body = connect_to(h.port);
  send_all(body, "POST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  int idle = connect_to(h.port);
  send_all(idle, "GET /i HTTP/1.1\r\n\r\n");
  CHECK(read_until(idle, "/i", 2000ms).find("200") != std::string::npos);
  bool closed = false;
  std::string got = read_until(partial, "", 3000ms, &closed);
  CHECK(closed);
  CHECK(got.find("HTTP/1.1 408") == 0);
  got = read_until(body, "", 3000ms, &closed);
  CHECK(closed);
  CHECK(got.find("HTTP/1.1 408") == 0);
  got = read_until(silent, "", 3000ms, &closed);
  CHECK(closed);
  CHECK(got.empty());
  got = read_until(idle, "", 3000ms, &closed);
  CHECK(closed);
  CHECK(got.empty());
  CHECK(h.counters.header_timeouts == 2);
  CHECK(h.counters.body_timeouts == 1);
  CHECK(h.counters.idle_closed == 1);
  for (int fd : {silent, partial, body, idle}) ::close(fd);
}

TEST_CASE("front end: Expect 100-continue is answered before the body and not passed on", "[unit]") {
  Harness h(FrontEndOptions{});
  int fd = connect_to(h.port);
  send_all(fd, "POST /up HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  CHECK(read_until(fd, "\r\n\r\n", 2000ms) == "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "data");
  CHECK(read_until(fd, "/up", 2000ms).find("200") != std::string::npos);
  std::lock_guard<std::mutex> lock(h.mu);
  REQUIRE(h.seen.size() == 1);
  CHECK(h.seen[0] == "POST /up HTTP/1.1\r\nContent-Length: 4\r\n\r\ndata");
  ::close(fd);
}

TEST_CASE("front end: malformed and oversized requests are refused before any worker", "[unit]") {
  FrontEndOptions o;
  o.framing.max_body_bytes = 1000;
  Harness h(o);
  int a = connect_to(h.port);
  send_all(a, "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
  CHECK(read_until(a, "\r\n", 2000ms).find("HTTP/1.1 400") == 0);
  int b = connect_to(h.port);
  send_all(b, "POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n");
  CHECK(read_until(b, "\r\n", 2000ms).find("HTTP/1.1 413") == 0);
  CHECK(peer_closed_within(b, 3000ms));
  CHECK(h.dispatched == 0);
  CHECK(h.counters.malformed == 2);
  ::close(a);
  ::close(b);
}

TEST_CASE("front end: the per-address cap answers 429, the request-byte budget 503", "[unit]") {
  FrontEndOptions o;
  o.max_connections_per_address = 2;
  o.max_buffered_bytes = 4096;
  Harness h(o);
  int a = connect_to(h.port);
  int b = connect_to(h.port);
  int c = connect_to(h.port);
  CHECK(read_until(c, "\r\n", 2000ms).find("HTTP/1.1 429") == 0);
  CHECK(h.counters.shed_address_limit == 1);
  send_all(a, "POST / HTTP/1.1\r\nContent-Length: 9000\r\n\r\n" + std::string(5000, 'x'));
  CHECK(read_until(a, "\r\n", 2000ms).find("HTTP/1.1 503") == 0);
  CHECK(h.counters.shed_buffer_limit == 1);
  send_all(b, "GET /fine HTTP/1.1\r\n\r\n");
  CHECK(read_until(b, "/fine", 2000ms).find("200") != std::string::npos);
  for (int fd : {a, b, c}) ::close(fd);
}

TEST_CASE("front end: at the connection cap the idle connection makes room; with none to spare, 503", "[unit]") {
  FrontEndOptions o;
  o.max_connections = 3;
  Harness h(o);
  int idle = connect_to(h.port);
  send_all(idle, "GET /i HTTP/1.1\r\n\r\n");
  REQUIRE(read_until(idle, "/i", 2000ms).find("200") != std::string::npos);
  h.hold = true;
  int w1 = connect_to(h.port);
  send_all(w1, "GET /w1 HTTP/1.1\r\n\r\n");
  int w2 = connect_to(h.port);
  send_all(w2, "GET /w2 HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  REQUIRE(h.dispatched == 3);
  int fresh = connect_to(h.port);  // the cap is reached: the idle one is closed for it
  CHECK(peer_closed_within(idle, 2000ms));
  CHECK(h.counters.evicted == 1);
  send_all(fresh, "GET /fresh HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  CHECK(h.dispatched == 4);  // held too: now every connection is with a worker
  int refused = connect_to(h.port);
  CHECK(read_until(refused, "\r\n", 2000ms).find("HTTP/1.1 503") == 0);
  CHECK(h.counters.shed_connection_limit == 1);
  for (int fd : {idle, w1, w2, fresh, refused}) ::close(fd);
}

TEST_CASE("front end: a hang-up while a worker holds the connection runs its watch once", "[unit]") {
  Harness h(FrontEndOptions{});
  h.hold = true;
  int fd = connect_to(h.port);
  send_all(fd, "POST /gen HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}");
  std::shared_ptr<ClientConnection> conn;
  for (int i = 0; i < 200 && !conn; ++i) {
    std::this_thread::sleep_for(10ms);
    std::lock_guard<std::mutex> lock(h.mu);
    if (!h.held.empty()) conn = h.held[0];
  }
  REQUIRE(conn);
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  conn->watch([&] {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    cv.notify_all();
  });
  CHECK_FALSE(conn->peer_gone());
  const auto t0 = std::chrono::steady_clock::now();
  ::close(fd);
  {
    std::unique_lock<std::mutex> lock(mu);
    CHECK(cv.wait_for(lock, 2s, [&] { return calls > 0; }));
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK(conn->peer_gone());
  int late = 0;
  conn->watch([&] { ++late; });  // registered after the hang-up: runs at once
  CHECK(late == 1);
  CHECK(calls == 1);
}

TEST_CASE("hang-up watches: unwatch stops one, marking twice runs each once", "[unit]") {
  ClientConnection c(-1, "1.2.3.4", 5, "", 0);
  int a = 0;
  int b = 0;
  auto wa = c.watch([&] { ++a; });
  c.watch([&] { ++b; });
  c.unwatch(wa);
  c.mark_peer_gone();
  c.mark_peer_gone();
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK(c.peer_gone());
}

TEST_CASE("worker pool: bounded queue refuses, shutdown runs what is queued", "[unit]") {
  WorkerPool pool(1, 2);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<int> ran{0};
  REQUIRE(pool.try_submit([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
    ++ran;
  }));
  while (pool.n_busy() == 0) std::this_thread::sleep_for(1ms);
  CHECK(pool.try_submit([&] { ++ran; }));
  CHECK(pool.try_submit([&] { ++ran; }));
  CHECK_FALSE(pool.try_submit([&] { ++ran; }));  // two already waiting
  CHECK(pool.n_queued() == 2);
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  pool.shutdown();
  CHECK(ran == 3);
  CHECK_FALSE(pool.try_submit([] {}));
}

namespace {

// Generation needs an Engine only to submit and cancel; these tests do neither.
class NoEngine final : public Engine {
 public:
  Result<RequestId> submit(Request, EventSink) override { return unavailable("no engine"); }
  void cancel(RequestId) override {}
  EngineStats stats() const override { return {}; }
  void drain() override {}
  void wait_idle() override {}
  int32_t context_length() const override { return 0; }
  int32_t vocab_size() const override { return 0; }
  const ModelInfo& model_info() const override { return info_; }

 private:
  ModelInfo info_;
};

}  // namespace

TEST_CASE("a generation's event wait ends as soon as another thread interrupts it", "[unit]") {
  NoEngine engine;
  Generation g(engine);
  std::function<void()> interrupt = g.interrupter();
  const auto t0 = std::chrono::steady_clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    interrupt();
  });
  CHECK_FALSE(g.next(10s).has_value());
  const auto waited = std::chrono::steady_clock::now() - t0;
  t.join();
  CHECK(waited < 5s);
  CHECK(g.interrupted());
  const auto t1 = std::chrono::steady_clock::now();
  CHECK_FALSE(g.next(100ms, /*past_interrupt=*/true).has_value());  // still waits the full time
  CHECK(std::chrono::steady_clock::now() - t1 >= 90ms);
}

TEST_CASE("httplib answers one buffered request and leaves the next one in the buffer", "[unit]") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) == 0);
  RequestProcessor processor(5.0);
  processor.Get("/x", [](const httplib::Request&, httplib::Response& res) { res.set_content("hello", "text/plain"); });
  processor.Get("/stream", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
      sink.write("data: 1\n\n", 9);
      sink.done();
      return true;
    });
  });
  processor.Post("/ignore", [](const httplib::Request&, httplib::Response& res, const httplib::ContentReader&) {
    res.set_content("ok", "text/plain");
  });
  processor.set_serving(true);
  ClientConnection conn(fds[0], "127.0.0.1", 1, "127.0.0.1", 2);
  const std::string first = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string ignored = "POST /ignore HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::string third = "GET /stream HTTP/1.1\r\n\r\n";
  conn.buffer() = first + ignored + third;
  CHECK(processor.serve(conn, first.size(), false));
  std::string out = read_until(fds[1], "hello", 2000ms);
  CHECK(out.find("HTTP/1.1 200 OK") == 0);
  CHECK(conn.buffer() == ignored + third);
  // A handler that never reads its body: the body is consumed with the request all the same.
  CHECK(processor.serve(conn, ignored.size(), false));
  CHECK(read_until(fds[1], "ok", 2000ms).find("200") != std::string::npos);
  CHECK(conn.buffer() == third);
  CHECK_FALSE(processor.serve(conn, third.size(), /*last=*/true));  // last: Connection: close, no keep-alive
  out = read_until(fds[1], "0\r\n\r\n", 2000ms);
  CHECK(out.find("Connection: close") != std::string::npos);
  CHECK(out.find("data: 1") != std::string::npos);
  CHECK(conn.buffer().empty());
  CHECK(conn.n_requests == 3);
  ::close(fds[0]);
  ::close(fds[1]);
}
