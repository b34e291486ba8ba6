// Where one HTTP/1.x request ends in the bytes received so far, so that the connection front end hands cpp-httplib
// only complete requests and knows each request's exact length (the keep-alive boundary): request line, header
// block within size limits, body framed by Content-Length or chunked encoding (never both). Strict where a lenient
// reading could make two parsers disagree on the boundary (bare LF or CR, obs-fold, a space before a colon,
// conflicting lengths). Incremental: each call resumes where the last one stopped. Pure (no I/O); tested by
// tests/server/request_framing_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace voltserve::http {

struct FramingLimits {
  size_t max_request_line = 8192;   // httplib's CPPHTTPLIB_REQUEST_URI_MAX_LENGTH; beyond: 414
  size_t max_header_line = 8192;    // httplib's CPPHTTPLIB_HEADER_MAX_LENGTH; beyond: 431
  size_t max_header_bytes = 65536;  // request line + every header + the blank line; beyond: 431
  size_t max_body_bytes = 16u << 20;  // --max-body-bytes (decoded body); beyond: 413
};

enum class FrameState {
  kIncomplete,  // more bytes are needed
  kComplete,    // bytes [0, total_bytes) are one whole request
  kReject,      // answer reject_status with reject_message and close the connection
};

struct Frame {
  FrameState state = FrameState::kIncomplete;
  size_t leading_blank_bytes = 0;  // CRLFs before the request line (RFC 9112 §2.2: ignored); not part of the request
  bool request_line_complete = false;
  std::string method;              // set once the request line is complete
  std::string target;              // as sent (path and query)
  bool header_complete = false;
  size_t header_bytes = 0;         // request line + headers + blank line, from the request line on
  bool chunked = false;
  uint64_t content_length = 0;     // when not chunked
  bool expects_continue = false;   // `Expect: 100-continue`; the line is [expect_begin, expect_end)
  size_t expect_begin = 0;
  size_t expect_end = 0;
  size_t total_bytes = 0;          // kComplete: the request's length, leading blank lines included
  int reject_status = 0;
  std::string reject_message;
};

class RequestFramer {
 public:
  explicit RequestFramer(FramingLimits limits = {}) : limits_(limits) {}

  // `bytes` is everything received for this request so far: the bytes of the previous call plus new ones.
  const Frame& scan(std::string_view bytes);
  // Starts over for the next request of the connection.
  void reset();
  const Frame& frame() const { return frame_; }

 private:
  void parse_header(std::string_view head);
  void scan_chunked(std::string_view bytes);
  void reject(int status, std::string message);

  FramingLimits limits_;
  Frame frame_;
  size_t scanned_ = 0;      // header: bytes already searched for the blank line
  size_t line_start_ = 0;   // header: where the current line began
  // Chunked body: position of the next unparsed byte, bytes of data still to skip in the current chunk, and
  // whether the parser is past the last chunk (in the trailers).
  size_t chunk_pos_ = 0;
  uint64_t chunk_left_ = 0;
  bool chunk_data_ = false;
  bool in_trailers_ = false;
  uint64_t body_bytes_ = 0;
};

}  // namespace voltserve::http
