// RequestFramer: complete / incomplete / refused requests, fed whole and one byte at a time (every split point gives
// the same answer), Content-Length and chunked bodies, pipelined requests, and the strict rules that keep the
// front end and cpp-httplib on the same request boundary.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "http/request_framing.h"

using namespace voltserve::http;

namespace {

// Scans `bytes` incrementally, one more byte per call, as a trickling client would deliver them; checks that the
// answer never changes once it is no longer kIncomplete, and that it equals a single scan of everything.
Frame scan_bytewise(const std::string& bytes, FramingLimits limits = {}) {
  RequestFramer whole(limits);
  Frame once = whole.scan(bytes);
  RequestFramer framer(limits);
  Frame last;
  for (size_t n = 1; n <= bytes.size(); ++n) {
    last = framer.scan(std::string_view(bytes).substr(0, n));
    if (last.state != FrameState::kIncomplete) break;
  }
  CHECK(static_cast<int>(last.state) == static_cast<int>(once.state));
  CHECK(last.total_bytes == once.total_bytes);
  CHECK(last.reject_status == once.reject_status);
  return once;
}

std::string post(const std::string& body, const std::string& extra = "") {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         extra + "\r\n" + body;
}

}  // namespace

TEST_CASE("a GET without a body is complete at the blank line", "[unit]") {
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  Frame f = scan_bytewise(req);
  REQUIRE(f.state == FrameState::kComplete);
  CHECK(f.total_bytes == req.size());
  CHECK(f.method == "GET");
  CHECK(f.target == "/health");
  RequestFramer partial;
  CHECK(partial.scan(req.substr(0, req.size() - 1)).state == FrameState::kIncomplete);
  CHECK(partial.frame().request_line_complete);
  CHECK_FALSE(partial.frame().header_complete);
}

TEST_CASE("a Content-Length body completes the request exactly, pipelined bytes stay outside", "[unit]") {
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}]})";
  const std::string req = post(body);
  Frame f = scan_bytewise(req);
  REQUIRE(f.state == FrameState::kComplete);
  CHECK(f.total_bytes == req.size());
  CHECK(f.content_length == body.size());
  RequestFramer framer;
  Frame g = framer.scan(req + "GET /health HTTP/1.1\r\n\r\n");
  REQUIRE(g.state == FrameState::kComplete);
  CHECK(g.total_bytes == req.size());
  RequestFramer short_body;
  const Frame& h = short_body.scan(req.substr(0, req.size() - 1));
  CHECK(h.state == FrameState::kIncomplete);
  CHECK(h.header_complete);
}

TEST_CASE("chunked bodies: sizes, extensions, trailers, the final chunk", "[unit]") {
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunks = "5\r\nhello\r\n1A;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
  Frame f = scan_bytewise(head + chunks);
  REQUIRE(f.state == FrameState::kComplete);
  CHECK(f.chunked);
  CHECK(f.total_bytes == head.size() + chunks.size());
  Frame t = scan_bytewise(head + "3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  REQUIRE(t.state == FrameState::kComplete);
  CHECK(t.total_bytes == head.size() + std::string("3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n").size());
  RequestFramer open_ended;
  CHECK(open_ended.scan(head + "5\r\nhello\r\n").state == FrameState::kIncomplete);
  CHECK(scan_bytewise(head + "5\r\nhelloX\r\n0\r\n\r\n").reject_status == 400);   // data longer than its size
  CHECK(scan_bytewise(head + "0x5\r\nhello\r\n0\r\n\r\n").reject_status == 400);  // strtoul would take "0x"
  CHECK(scan_bytewise(head + " 5\r\nhello\r\n0\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise(head + "5\nhello\r\n0\r\n\r\n").reject_status == 400);
}

TEST_CASE("body limits: Content-Length and chunked sums beyond max_body_bytes are 413 before the body", "[unit]") {
  FramingLimits limits;
  limits.max_body_bytes = 100;
  Frame f = scan_bytewise("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", limits);
  CHECK(f.state == FrameState::kReject);
  CHECK(f.reject_status == 413);
  CHECK(f.reject_message.find("100") != std::string::npos);
  Frame ok = scan_bytewise(post(std::string(100, 'x')), limits);
  CHECK(ok.state == FrameState::kComplete);
  Frame c = scan_bytewise("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'a') +
                              "\r\n40\r\n",
                          limits);
  CHECK(c.reject_status == 413);
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", limits).reject_status == 400);
}

TEST_CASE("header limits: request line 414, a long header line or header block 431", "[unit]") {
  FramingLimits limits;
  limits.max_request_line = 64;
  limits.max_header_line = 64;
  limits.max_header_bytes = 256;
  CHECK(scan_bytewise("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", limits).reject_status == 414);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n", limits).reject_status == 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 20; ++i) many += "X-" + std::to_string(i) + ": 0123456789\r\n";
  CHECK(scan_bytewise(many + "\r\n", limits).reject_status == 431);
  // Refused as soon as the limit is passed, without waiting for the end of the line.
  RequestFramer early(limits);
  CHECK(early.scan("GET /" + std::string(70, 'a')).reject_status == 414);
}

TEST_CASE("refused: malformed lines, bare LF or CR, obs-fold, a space before the colon, two framings", "[unit]") {
  CHECK(scan_bytewise("GARBAGE\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET /\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/2.0\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\nHost: x\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nNo colon here\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd").reject_status == 400);
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            .reject_status == 400);
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").reject_status == 400);
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").reject_status == 400);
  // Repeating the same length is harmless.
  CHECK(scan_bytewise("POST / HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc").state ==
        FrameState::kComplete);
}

TEST_CASE("leading blank lines are skipped and reported; Expect: 100-continue is located", "[unit]") {
  Frame f = scan_bytewise("\r\n\r\nGET /health HTTP/1.1\r\n\r\n");
  REQUIRE(f.state == FrameState::kComplete);
  CHECK(f.leading_blank_bytes == 4);
  CHECK(f.target == "/health");
  CHECK(f.total_bytes == 4 + std::string("GET /health HTTP/1.1\r\n\r\n").size());
  const std::string req = post("abc", "Expect: 100-continue\r\n");
  RequestFramer framer;
  const Frame& head_only = framer.scan(req.substr(0, req.size() - 3));
  CHECK(head_only.state == FrameState::kIncomplete);
  CHECK(head_only.header_complete);
  CHECK(head_only.expects_continue);
  CHECK(req.substr(head_only.expect_begin, head_only.expect_end - head_only.expect_begin) == "Expect: 100-continue\r\n");
  CHECK(framer.scan(req).state == FrameState::kComplete);
}

TEST_CASE("reset starts the next request of the connection", "[unit]") {
  RequestFramer framer;
  const std::string a = "GET /a HTTP/1.1\r\n\r\n";
  REQUIRE(framer.scan(a).state == FrameState::kComplete);
  framer.reset();
  const std::string b = post("xy");
  CHECK(framer.scan(b.substr(0, 10)).state == FrameState::kIncomplete);
  const Frame& f = framer.scan(b);
  CHECK(f.state == FrameState::kComplete);
  CHECK(f.target == "/v1/chat/completions");
}
