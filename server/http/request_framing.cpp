// See request_framing.h. RFC 9112 §2-§7 (message format, request line, field syntax, chunked transfer coding).
#include "http/request_framing.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace voltserve::http {

namespace {

bool is_token_char(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (std::isalnum(u)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Shown in messages: printable ASCII only, at most 40 characters.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}

constexpr size_t kMaxChunkSizeLine = 1024;  // hex digits and extensions; real clients send a few bytes

}  // namespace

void RequestFramer::reset() {
  frame_ = Frame{};
  scanned_ = 0;
  line_start_ = 0;
  chunk_pos_ = 0;
  chunk_left_ = 0;
  chunk_data_ = false;
  in_trailers_ = false;
  body_bytes_ = 0;
}

void RequestFramer::reject(int status, std::string message) {
  frame_.state = FrameState::kReject;
  frame_.reject_status = status;
  frame_.reject_message = std::move(message);
}

const Frame& RequestFramer::scan(std::string_view bytes) {
  if (frame_.state != FrameState::kIncomplete) return frame_;
  if (!frame_.header_complete) {
    size_t i = scanned_;
    for (; i < bytes.size(); ++i) {
      const char c = bytes[i];
      const size_t head_len = i + 1 - frame_.leading_blank_bytes;
      if (head_len > limits_.max_header_bytes || frame_.leading_blank_bytes > limits_.max_header_bytes) {
        reject(431, fmt::format("the request header is larger than {} bytes", limits_.max_header_bytes));
        return frame_;
      }
      const size_t line_len = i - line_start_;
      if (!frame_.request_line_complete && line_len > limits_.max_request_line) {
        reject(414, fmt::format("the request line is longer than {} bytes", limits_.max_request_line));
        return frame_;
      }
      if (frame_.request_line_complete && line_len > limits_.max_header_line) {
        reject(431, fmt::format("a header line is longer than {} bytes", limits_.max_header_line));
        return frame_;
      }
      if (c == '\r') {
        if (i + 1 == bytes.size()) break;  // the LF may come with the next bytes
        if (bytes[i + 1] != '\n') {
          reject(400, "a CR in the request header is not followed by LF");
          return frame_;
        }
        continue;
      }
      if (c != '\n') {
        const unsigned char u = static_cast<unsigned char>(c);
        if ((u < 0x20 && c != '\t') || u == 0x7f) {
          reject(400, fmt::format("control character 0x{:02x} in the request header", u));
          return frame_;
        }
        continue;
      }
      if (i == line_start_ || bytes[i - 1] != '\r') {
        reject(400, "a line of the request header ends in a bare LF (CRLF is required)");
        return frame_;
      }
      std::string_view line = bytes.substr(line_start_, i - 1 - line_start_);
      line_start_ = i + 1;
      if (!frame_.request_line_complete) {
        if (line.empty()) {
          frame_.leading_blank_bytes = i + 1;
          continue;
        }
        const size_t sp1 = line.find(' ');
        const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
        if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
          reject(400, fmt::format("malformed request line '{}' (expected METHOD TARGET HTTP/1.1)", printable(line)));
          return frame_;
        }
        std::string_view method = line.substr(0, sp1);
        std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
        std::string_view version = line.substr(sp2 + 1);
        if (!is_token(method)) {
          reject(400, fmt::format("malformed request method '{}'", printable(method)));
          return frame_;
        }
        if (target.empty() || !std::all_of(target.begin(), target.end(), [](char t) { return t > 0x20 && t < 0x7f; })) {
          reject(400, fmt::format("malformed request target '{}'", printable(target)));
          return frame_;
        }
        if (version != "HTTP/1.1" && version != "HTTP/1.0") {
          reject(400, fmt::format("unsupported protocol '{}' (this server speaks HTTP/1.1 and HTTP/1.0)", printable(version)));
          return frame_;
        }
        frame_.method = std::string(method);
        frame_.target = std::string(target);
        frame_.request_line_complete = true;
        continue;
      }
      if (line.empty()) {
        frame_.header_complete = true;
        frame_.header_bytes = i + 1 - frame_.leading_blank_bytes;
        parse_header(bytes.substr(0, i + 1));
        if (frame_.state != FrameState::kIncomplete) return frame_;
        break;
      }
    }
    if (!frame_.header_complete) {
      scanned_ = i;
      return frame_;
    }
  }
  const size_t body_start = frame_.leading_blank_bytes + frame_.header_bytes;
  if (frame_.chunked) {
    if (chunk_pos_ == 0) chunk_pos_ = body_start;
    scan_chunked(bytes);
  } else if (bytes.size() - body_start >= frame_.content_length) {
    frame_.state = FrameState::kComplete;
    frame_.total_bytes = body_start + static_cast<size_t>(frame_.content_length);
  }
  return frame_;
}

void RequestFramer::parse_header(std::string_view head) {
  bool have_length = false;
  bool have_encoding = false;
  size_t pos = frame_.leading_blank_bytes;
  pos = head.find("\r\n", pos) + 2;  // past the request line
  while (pos + 2 <= head.size()) {
    const size_t end = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, end - pos);
    const size_t line_begin = pos;
    pos = end + 2;
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      reject(400, "obsolete line folding in the request header (a line starts with whitespace)");
      return;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      reject(400, fmt::format("malformed header line '{}' (expected Name: value)", printable(line)));
      return;
    }
    std::string_view name = line.substr(0, colon);
    std::string_view value = trim_ows(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char d) { return d >= '0' && d <= '9'; })) {
        reject(400, fmt::format("Content-Length '{}' is not a number of bytes", printable(value)));
        return;
      }
      uint64_t n = 0;
      for (char d : value) n = n * 10 + static_cast<uint64_t>(d - '0');
      if (have_length && n != frame_.content_length) {
        reject(400, "two different Content-Length headers");
        return;
      }
      have_length = true;
      frame_.content_length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      if (have_encoding || !iequals(value, "chunked")) {
        reject(400, fmt::format("Transfer-Encoding '{}' is not supported (only one 'chunked')", printable(value)));
        return;
      }
      have_encoding = true;
      frame_.chunked = true;
    } else if (iequals(name, "Expect") && iequals(value, "100-continue")) {
      frame_.expects_continue = true;
      frame_.expect_begin = line_begin;
      frame_.expect_end = pos;
    }
  }
  if (have_length && have_encoding) {
    reject(400, "both Content-Length and Transfer-Encoding are set (send one)");
    return;
  }
  if (frame_.content_length > limits_.max_body_bytes) {
    reject(413, fmt::format("request body of {} bytes is larger than {} bytes (--max-body-bytes)",
                            frame_.content_length, limits_.max_body_bytes));
  }
}

void RequestFramer::scan_chunked(std::string_view bytes) {
  const size_t body_start = frame_.leading_blank_bytes + frame_.header_bytes;
  const uint64_t max_encoded = 2 * static_cast<uint64_t>(limits_.max_body_bytes) + 65536;
  while (chunk_pos_ < bytes.size()) {
    if (chunk_pos_ - body_start > max_encoded) {
      reject(413, fmt::format("chunked request body is larger than {} bytes (--max-body-bytes)", limits_.max_body_bytes));
      return;
    }
    if (chunk_data_) {
      const uint64_t avail = bytes.size() - chunk_pos_;
      if (chunk_left_ > 0) {
        const uint64_t take = std::min(avail, chunk_left_);
        chunk_pos_ += static_cast<size_t>(take);
        chunk_left_ -= take;
        if (chunk_left_ > 0) return;
      }
      if (bytes.size() - chunk_pos_ < 2) return;
      if (bytes[chunk_pos_] != '\r' || bytes[chunk_pos_ + 1] != '\n') {
        reject(400, "chunk data is not followed by CRLF");
        return;
      }
      chunk_pos_ += 2;
      chunk_data_ = false;
      continue;
    }
    const size_t nl = bytes.find('\n', chunk_pos_);
    if (nl == std::string_view::npos) {
      const size_t limit = in_trailers_ ? limits_.max_header_line : kMaxChunkSizeLine;
      if (bytes.size() - chunk_pos_ > limit) {
        reject(in_trailers_ ? 431 : 400, in_trailers_ ? "a trailer line is too long" : "a chunk size line is too long");
      }
      return;
    }
    if (nl == chunk_pos_ || bytes[nl - 1] != '\r') {
      reject(400, "a line of the chunked body ends in a bare LF (CRLF is required)");
      return;
    }
    std::string_view line = bytes.substr(chunk_pos_, nl - 1 - chunk_pos_);
    chunk_pos_ = nl + 1;
    if (in_trailers_) {
      if (line.empty()) {
        frame_.state = FrameState::kComplete;
        frame_.total_bytes = chunk_pos_;
        return;
      }
      continue;  // a trailer field: framed here, refused by httplib (a 400), the boundary stays exact
    }
    size_t digits = 0;
    uint64_t size = 0;
    while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
      if (digits == 15) {
        reject(413, "a chunk size is absurdly large");
        return;
      }
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
      size = size * 16 + static_cast<uint64_t>(h <= '9' ? h - '0' : h - 'a' + 10);
      ++digits;
    }
    if (digits == 0 || (digits < line.size() && line[digits] != ';')) {
      reject(400, fmt::format("malformed chunk size line '{}'", printable(line)));
      return;
    }
    if (body_bytes_ + size > limits_.max_body_bytes) {
      reject(413, fmt::format("chunked request body is larger than {} bytes (--max-body-bytes)", limits_.max_body_bytes));
      return;
    }
    body_bytes_ += size;
    if (size == 0) {
      in_trailers_ = true;
    } else {
      chunk_data_ = true;
      chunk_left_ = size;
    }
  }
}

}  // namespace voltserve::http
