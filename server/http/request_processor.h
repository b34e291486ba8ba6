// cpp-httplib used for what it does well — parsing one request, routing it to the handlers, writing the response
// (chunked SSE included) — over a connection the front end owns. httplib's own socket layer is not used: in
// Debian's 0.11.4 build it select()s, so a socket numbered >= FD_SETSIZE (1024) gets a 500 or worse, it listens with
// a backlog of 5, and each of its workers blocks in a header read or a keep-alive wait. Here a worker runs exactly
// one complete request that the front end already buffered. Tested by tests/server/connection_test.cpp and e2e.
#pragma once

#include <httplib.h>

#include <cstddef>

#include "http/client_connection.h"

namespace voltserve::http {

class RequestProcessor : public httplib::Server {
 public:
  explicit RequestProcessor(double write_timeout_s) : write_timeout_s_(write_timeout_s) {}

  // Answers the request in conn.buffer()[0, n_bytes) (complete, as framed by the front end) and consumes those bytes,
  // whether or not the handler read its body. `last` makes the response carry Connection: close. Returns whether
  // the connection may serve another request (the client did not ask to close, every write succeeded).
  bool serve(ClientConnection& conn, size_t n_bytes, bool last);

  // While false, chunked responses stop (httplib reads its listening socket as "shutting down"; this server never
  // lets httplib listen, so the flag is set here).
  void set_serving(bool serving);

 private:
  double write_timeout_s_;
};

}  // namespace voltserve::http
