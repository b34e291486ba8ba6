"""e2e: 1,000 connections that stay idle, send part of a request header and wait, or trickle header bytes (plus the
idle keep-alive connections a client pool leaves behind) do not stop the server: /health, /metrics and a new chat
completion each answer within 1 s while they are open, and the server's memory stays bounded. Then the header
timeout closes the slow ones (408 for those that sent part of a request, a silent close for idle ones) and the
keep-alive timeout the idle pool connections; a slow body and a long generation are not cut by the header timeout.
Raises its own open-file limit."""
import json
import selectors
import socket
import threading
import time

from harness import Checks, Server, open_fds, raise_open_files, request, rss_bytes, scaled

N_IDLE, N_PARTIAL, N_TRICKLE = 334, 333, 333
N_POOL = 20             # keep-alive connections left open by a client pool after one request each
HEADER_TIMEOUT = 7.0
KEEPALIVE_TIMEOUT = 5.0
PROBE_SECONDS = 4.0
PROBE_LIMIT = scaled(1.0)   # the 1 s (a sanitizer build gets its time scale)
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class Conn:
    def __init__(self, kind, sock):
        self.kind = kind
        self.sock = sock
        self.opened = time.monotonic()
        self.received = b""
        self.closed_at = None   # when the server closed it (EOF or reset)


class Watcher(threading.Thread):
    """Reads every connection continuously (so nothing the server sends before closing is lost) and trickles one
    header byte every 0.3 s into the trickling ones until the server closes them."""

    def __init__(self, conns):
        super().__init__(daemon=True)
        self.conns = conns
        self.stop = False

    def run(self):
        sel = selectors.DefaultSelector()
        for c in self.conns:
            c.sock.setblocking(False)
            sel.register(c.sock, selectors.EVENT_READ, c)
        next_trickle = time.monotonic()
        while not self.stop:
            for key, _ in sel.select(timeout=0.05):
                c = key.data
                try:
                    data = c.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    c.received += data
                else:
                    c.closed_at = time.monotonic()
                    sel.unregister(c.sock)
            if time.monotonic() >= next_trickle:
                next_trickle += 0.3
                for c in self.conns:
                    if c.kind == "trickle" and c.closed_at is None:
                        try:
                            c.sock.send(b"a")
                        except OSError:
                            pass
        sel.close()


def read_response(sock):
    """One HTTP/1.1 response with a Content-Length from a blocking socket: (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            raise OSError(f"closed before a response: {data!r}")
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        part = sock.recv(65536)
        if not part:
            break
        body += part
    return int(head.split()[1]), body


def probe(srv, what):
    """(seconds, status) of one request on a fresh connection with a PROBE_LIMIT client timeout (status 0: timed
    out)."""
    start = time.monotonic()
    try:
        if what == "chat":
            status, _, _ = srv.post("/v1/chat/completions", CHAT, timeout=PROBE_LIMIT)
        else:
            status, _, _ = request("GET", srv.base + what, timeout=PROBE_LIMIT)
    except OSError:
        status = 0
    return time.monotonic() - start, status


def main():
    limit = raise_open_files(8192)
    print(f"  open-file limit {limit}")
    checks = Checks()

    def thousand_slow_connections(c):
        with Server("--header-timeout", str(HEADER_TIMEOUT), "--keep-alive-timeout", str(KEEPALIVE_TIMEOUT)) as srv:
            pid = srv.proc.pid
            probe(srv, "/health")
            rss_before, fds_before = rss_bytes(pid), open_fds(pid)
            conns = []
            start = time.monotonic()
            try:
                for i in range(N_IDLE + N_PARTIAL + N_TRICKLE):
                    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                    if i < N_IDLE:
                        conns.append(Conn("idle", s))
                    elif i < N_IDLE + N_PARTIAL:
                        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
                        conns.append(Conn("partial", s))
                    else:
                        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
                        conns.append(Conn("trickle", s))
                for _ in range(N_POOL):
                    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                    body = json.dumps(CHAT).encode()
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                    status, _ = read_response(s)
                    c.check(status == 200, f"pool request answered ({status})")
                    conns.append(Conn("pool", s))
            except OSError as e:
                c.check(False, f"opening the connections failed after {len(conns)}: {e!r}")
            print(f"  opened {len(conns)} connections in {time.monotonic() - start:.1f} s")
            watcher = Watcher(conns)
            watcher.start()
            try:
                latencies = {"/health": [], "/metrics": [], "chat": []}
                failures = []
                probe_end = time.monotonic() + PROBE_SECONDS
                while time.monotonic() < probe_end:
                    for what in latencies:
                        seconds, status = probe(srv, what)
                        latencies[what].append(seconds)
                        if status != 200 or seconds > PROBE_LIMIT:
                            failures.append((what, status, round(seconds, 3)))
                    time.sleep(0.2)
                for what, values in latencies.items():
                    print(f"  {what}: {len(values)} probes, worst {max(values) * 1000:.0f} ms")
                c.check(all(len(v) >= 3 for v in latencies.values()), "several probes of each kind ran")
                c.check(not failures, f"every probe answered 200 within {PROBE_LIMIT:g} s while the connections were "
                                      f"open: {failures[:10]}")
                rss_during = rss_bytes(pid)
                print(f"  server RSS {rss_before >> 20} MiB before, {rss_during >> 20} MiB with the connections open;"
                      f" fds {fds_before} -> {open_fds(pid)}")
                c.check(rss_during - rss_before < 64 << 20,
                        f"memory bounded: RSS grew {(rss_during - rss_before) >> 20} MiB for {len(conns)} connections")
                # Only connections still younger than their timeout can be early (opening 1,000 takes seconds on a
                # slow build, so the first ones may already be past it).
                now = time.monotonic()
                limit = {"idle": HEADER_TIMEOUT, "partial": HEADER_TIMEOUT, "trickle": HEADER_TIMEOUT,
                         "pool": KEEPALIVE_TIMEOUT}
                early = [cn for cn in conns if (cn.closed_at is not None or cn.received)
                         and (cn.closed_at if cn.closed_at is not None else now) - cn.opened < limit[cn.kind] - 1.0]
                c.check(not early, f"no connection answered or closed before its timeout: "
                                   f"{[(cn.kind, cn.received[:40]) for cn in early[:5]]}")
                # Past both timeouts (counted from when each connection was opened or last answered).
                deadline = max(cn.opened for cn in conns) + HEADER_TIMEOUT + scaled(4.0)
                while time.monotonic() < deadline and any(cn.closed_at is None for cn in conns):
                    time.sleep(0.1)
            finally:
                watcher.stop = True
                watcher.join(timeout=5)
            for kind, timeout in (("idle", HEADER_TIMEOUT), ("partial", HEADER_TIMEOUT), ("trickle", HEADER_TIMEOUT),
                                  ("pool", KEEPALIVE_TIMEOUT)):
                group = [cn for cn in conns if cn.kind == kind]
                still_open = [cn for cn in group if cn.closed_at is None]
                c.check(not still_open, f"{kind}: {len(still_open)} of {len(group)} still open after the timeout")
                closed = [cn.closed_at - cn.opened for cn in group if cn.closed_at is not None]
                if closed:
                    print(f"  {kind}: closed after {min(closed):.1f}-{max(closed):.1f} s (timeout {timeout} s)")
                    c.check(min(closed) >= timeout - 1.0 and max(closed) <= timeout + scaled(3.5),
                            f"{kind}: closed after {min(closed):.1f}-{max(closed):.1f} s, timeout {timeout} s")
                if kind in ("partial", "trickle"):
                    bad = [cn.received[:60] for cn in group if not cn.received.startswith(b"HTTP/1.1 408")]
                    c.check(not bad, f"{kind}: answered 408 before the close: {bad[:3]}")
                else:
                    bad = [cn.received[:60] for cn in group if cn.received]
                    c.check(not bad, f"{kind}: closed without a response: {bad[:3]}")
            for cn in conns:
                cn.sock.close()
            m = srv.metrics()
            c.check(m.get("voltserve_http_header_timeouts_total", 0) >= N_IDLE + N_PARTIAL + N_TRICKLE,
                    f"header timeouts counted ({m.get('voltserve_http_header_timeouts_total')})")
            seconds, status = probe(srv, "chat")
            c.check(status == 200, f"serves afterwards ({status}, {seconds:.2f} s)")
            time.sleep(0.5)
            c.check(open_fds(pid) <= fds_before + 2, f"sockets released: fds {fds_before} -> {open_fds(pid)}")

    def header_timeout_is_not_a_body_or_generation_limit(c):
        with Server("--header-timeout", "1") as srv:
            # A body sent in pieces over ~2.5 s, longer than the header timeout.
            body = json.dumps({**CHAT, "user": "x" * 200000}).encode()
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            piece = len(body) // 8 + 1
            for i in range(0, len(body), piece):
                time.sleep(0.3)
                s.sendall(body[i:i + piece])
            status, _ = read_response(s)
            c.check(status == 200, f"slow body answered ({status})")
            # The same keep-alive connection, idle for less than the keep-alive timeout, then a generation that
            # streams for longer than the header timeout.
            time.sleep(0.5)
            gen = json.dumps({"messages": CHAT["messages"], "max_tokens": 40, "stream": True, "ignore_eos": True})
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: " + str(len(gen)).encode() + b"\r\n\r\n" + gen.encode())
            start = time.monotonic()
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                part = s.recv(64)   # a slow reader
                if not part:
                    break
                data += part
                time.sleep(0.01)
            took = time.monotonic() - start
            s.close()
            c.check(took > 1.0, f"the stream took longer than the header timeout ({took:.1f} s)")
            c.check(data.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in data,
                    f"stream read slowly for {took:.1f} s completed: {data[:60]!r} ... {data[-60:]!r}")

    checks.run([thousand_slow_connections, header_timeout_is_not_a_body_or_generation_limit])


if __name__ == "__main__":
    main()
