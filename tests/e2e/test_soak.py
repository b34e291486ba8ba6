"""e2e soak (loopback only, bounded): for --seconds (default 45; CI runs this short form) 24 client threads mix
streaming and non-streaming chat and completions (n = 1 and n > 1), clients that hang up mid-stream, mid-generation
or while queued, slow header and body senders, slow readers, idle connections, bursts past the queue and hostile
requests (malformed JSON and HTTP, oversized bodies and headers, bad chunking). Checks: every answer is one the
request may get, the server stays healthy, and at the end nothing runs or waits, every KV page, state slot and
socket is back, and the server's memory is flat after the warm-up (no leak): the RSS growth from the warm-up to the
end and its slope are printed and bounded.

Long form (documented in the README): python3 tests/e2e/test_soak.py --seconds 1800"""
import argparse
import json
import random
import socket
import statistics
import threading
import time

from harness import Checks, Server, open_fds, raise_open_files, rss_bytes, scaled

N_CLIENTS = 24
OK_OR_SHED = (200, 429, 503)


def raw(port, data, timeout=60, read=True):
    """Sends bytes on a fresh connection; returns (status or None, whole response bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=scaled(timeout))
    try:
        s.sendall(data)
        if not read:
            return None, b""
        out = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            out += part
    finally:
        s.close()
    try:
        return int(out.split(b" ", 2)[1]), out
    except (IndexError, ValueError):
        return None, out


def http_request(path, body, extra_headers=b""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(data)}\r\n".encode() + extra_headers + b"\r\n" + data)


def chat_body(rng, stream):
    return {"messages": [{"role": "user", "content": "soak %d" % rng.randint(0, 10 ** 6)}],
            "max_tokens": rng.randint(1, 96), "stream": stream, "temperature": rng.choice([0, 0.7, 1.2]),
            **({"n": rng.randint(2, 3)} if rng.random() < 0.15 else {})}


class Soak:
    def __init__(self, srv, seconds, seed):
        self.srv = srv
        self.port = srv.port
        self.stop_at = time.monotonic() + seconds
        self.seed = seed
        self.lock = threading.Lock()
        self.counts = {}
        self.bad = []

    def record(self, kind, status, ok, detail=b""):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if not ok:
                self.bad.append((kind, status, detail[:160]))

    # --- the actions -------------------------------------------------------------------------------------------
    def full_request(self, rng):
        path = rng.choice(["/v1/chat/completions", "/v1/completions"])
        stream = rng.random() < 0.5
        body = chat_body(rng, stream)
        if path == "/v1/completions":
            body = {"prompt": "soak %d" % rng.randint(0, 999), "max_tokens": body["max_tokens"], "stream": stream}
        status, out = raw(self.port, http_request(path, body))
        ok = status in OK_OR_SHED and (status != 200 or not stream or b"data: [DONE]" in out)
        self.record("stream" if stream else "json", status, ok, out)

    def hang_up(self, rng):
        """Leaves while the answer is being generated or the request is still queued, streaming or not."""
        stream = rng.random() < 0.5
        body = {**chat_body(rng, stream), "max_tokens": 400, "ignore_eos": True}
        s = socket.create_connection(("127.0.0.1", self.port), timeout=scaled(30))
        s.sendall(http_request("/v1/chat/completions", body))
        if stream and rng.random() < 0.5:
            s.recv(rng.randint(1, 2000))
        else:
            time.sleep(rng.uniform(0, 0.3))
        s.close()
        self.record("hang_up", None, True)

    def slow_sender(self, rng):
        data = http_request("/v1/chat/completions", chat_body(rng, False))
        s = socket.create_connection(("127.0.0.1", self.port), timeout=scaled(30))
        piece = max(1, len(data) // 6)
        for i in range(0, len(data), piece):
            s.sendall(data[i:i + piece])
            time.sleep(0.15)
        out = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            out += part
        s.close()
        status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
        self.record("slow_sender", status, status in OK_OR_SHED, out)

    def slow_reader(self, rng):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=scaled(30))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(http_request("/v1/chat/completions", {**chat_body(rng, True), "max_tokens": 64}))
        out = b""
        while True:
            part = s.recv(256)
            if not part:
                break
            out += part
            time.sleep(0.01)
        s.close()
        status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
        self.record("slow_reader", status, status in OK_OR_SHED and (status != 200 or b"[DONE]" in out), out)

    def idle_connection(self, rng):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=scaled(30))
        if rng.random() < 0.5:
            s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")  # never finished: the header timeout ends it
        s.settimeout(scaled(6))   # past the server's --header-timeout 2
        try:
            out = s.recv(4096)
        except socket.timeout:
            out = b"(still open)"
        s.close()
        self.record("idle", None, out == b"" or out.startswith(b"HTTP/1.1 408"), out)

    def hostile(self, rng):
        cases = [
            (http_request("/v1/chat/completions", b'{"messages": ['), (400,)),
            (http_request("/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xff"}]}'), (400,)),
            (http_request("/v1/chat/completions", b"[" * 5000 + b"]" * 5000), (400,)),
            (http_request("/v1/chat/completions", {"messages": "nope"}), (400,)),
            (http_request("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 10 ** 6}),
             (400,)),
            (http_request("/v1/completions", b"x" * (2 << 20)), (413,)),
            (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", (413,)),
            (b"GARBAGE\r\n\r\n", (400,)),
            (b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n", (414,)),
            (b"GET /health HTTP/1.1\r\nX: " + b"b" * 10000 + b"\r\n\r\n", (431,)),
            (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", (400,)),
            (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", (400,)),
            (b"GET /health HTTP/1.1\nHost: x\n\n", (400,)),
            (b"GET /no/such/route HTTP/1.1\r\n\r\n", (404,)),
        ]
        data, want = rng.choice(cases)
        status, out = raw(self.port, data)
        self.record("hostile", status, status in want, out)

    def probe(self, rng):
        path = rng.choice(["/health", "/metrics", "/v1/models"])
        status, out = raw(self.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), timeout=5)
        self.record("probe", status, status == 200, out)

    def burst(self, rng):
        threads = [threading.Thread(target=self.full_request, args=(random.Random(rng.random()),))
                   for _ in range(rng.randint(10, 30))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def client(self, index):
        rng = random.Random(self.seed * 1000 + index)
        actions = [(self.full_request, 30), (self.hang_up, 15), (self.slow_sender, 6), (self.slow_reader, 5),
                   (self.idle_connection, 4), (self.hostile, 20), (self.probe, 10), (self.burst, 2)]
        fns = [a for a, _ in actions]
        weights = [w for _, w in actions]
        while time.monotonic() < self.stop_at:
            fn = rng.choices(fns, weights)[0]
            try:
                fn(rng)
            except OSError as e:
                # A client of ours may meet a connection refused at the caps; anything else is a failure.
                self.record(fn.__name__, None, isinstance(e, (ConnectionResetError, BrokenPipeError)), repr(e).encode())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    raise_open_files(4096)
    with Server("--max-running", "8", "--max-waiting", "16", "--max-body-bytes", "1048576",
                "--header-timeout", "2", "--body-timeout", "4", "--keep-alive-timeout", "3", context=2048) as srv:
        pid = srv.proc.pid
        fds_start = open_fds(pid)
        samples = []
        soak = Soak(srv, args.seconds, args.seed)

        def sample():
            start = time.monotonic()
            while time.monotonic() < soak.stop_at:
                samples.append((time.monotonic() - start, rss_bytes(pid)))
                time.sleep(0.5)

        def soak_run(c):
            sampler = threading.Thread(target=sample)
            sampler.start()
            threads = [threading.Thread(target=soak.client, args=(i,)) for i in range(N_CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=args.seconds + scaled(120))
            sampler.join()
            print(f"  actions: {dict(sorted(soak.counts.items()))}")
            c.check(not soak.bad, f"unexpected answers ({len(soak.bad)}): {soak.bad[:6]}")
            c.check(sum(soak.counts.values()) > N_CLIENTS * 4, "the clients did work")
            c.check(srv.proc.poll() is None, "the server is alive")

        def pools_and_sockets_back(c):
            deadline = time.time() + scaled(30)
            m = srv.metrics()
            while time.time() < deadline:
                m = srv.metrics()
                if (m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0
                        and m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total")
                        and m.get("voltserve_http_connections_open", 0) <= 1):
                    break
                time.sleep(0.2)
            c.check(m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0,
                    "nothing running or waiting")
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total") > 0, "every KV page free")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total") > 0, "every slot free")
            c.check(m.get("voltserve_http_connections_open", 99) <= 1, f"connections closed "
                                                                       f"({m.get('voltserve_http_connections_open')})")
            c.check(m.get("voltserve_client_disconnects_total", 0) > 0, "disconnects happened and were counted")
            c.check(m.get("voltserve_http_header_timeouts_total", 0) > 0, "header timeouts happened")
            fds = open_fds(pid)
            c.check(fds <= fds_start + 2, f"descriptors back: {fds_start} at the start, {fds} at the end")
            status, _, _ = srv.get("/health")
            c.check(status == 200, "healthy")

        def memory_flat(c):
            if len(samples) < 10:
                c.check(False, f"too few RSS samples ({len(samples)})")
                return
            warm = [r for t, r in samples if t >= args.seconds * 0.3]
            head = statistics.median(warm[:max(3, len(warm) // 5)])
            tail = statistics.median(warm[-max(3, len(warm) // 5):])
            ts = [t for t, _ in samples if t >= args.seconds * 0.3]
            slope = statistics.linear_regression(ts, warm).slope if len(set(ts)) > 1 else 0.0
            peak = max(r for _, r in samples)
            bound = max(16 * 2**20, 0.15 * head)
            print(f"  RSS: {samples[0][1] / 2**20:.1f} MiB at the start, {head / 2**20:.1f} MiB after the warm-up, "
                  f"{tail / 2**20:.1f} MiB at the end (peak {peak / 2**20:.1f}); growth after the warm-up "
                  f"{(tail - head) / 2**20:+.1f} MiB, bound {bound / 2**20:.1f} MiB (16 MiB or 15% of the warm RSS); "
                  f"slope {slope * 60 / 2**20:+.2f} MiB/min over {args.seconds:.0f} s, {len(samples)} samples")
            c.check(tail - head < bound,
                    f"RSS flat after the warm-up: grew {(tail - head) / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB")

        Checks().run([soak_run, pools_and_sockets_back, memory_flat])


if __name__ == "__main__":
    main()
