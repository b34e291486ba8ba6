#!/usr/bin/env python3
"""Loopback HTTP load for a running voltserve: N threads, each on one keep-alive connection, send the same request
for a fixed time; prints requests/s and latency percentiles. Optional background connections (idle, or trickling a
partial header) show what slow clients cost the others. Used for the measurements in bench/RESULTS.md.

  tools/http_load.py --port 8080 --threads 8 --seconds 5 --path /health
  tools/http_load.py --port 8080 --threads 4 --seconds 10 --chat 8 --slow 1000
"""
import argparse
import json
import resource
import socket
import statistics
import threading
import time


def read_response(sock, buf):
    while b"\r\n\r\n" not in buf:
        part = sock.recv(65536)
        if not part:
            raise OSError("closed")
        buf += part
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        part = sock.recv(65536)
        if not part:
            raise OSError("closed")
        rest += part
    return int(head.split()[1]), rest[length:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--path", default="/health", help="GET this path (unless --chat)")
    p.add_argument("--chat", type=int, default=0, help="POST a chat completion of this many tokens instead")
    p.add_argument("--slow", type=int, default=0, help="background connections trickling a partial header")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.slow + 256)), hard))
    if args.chat:
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": args.chat,
                           "ignore_eos": True}).encode()
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    else:
        request = f"GET {args.path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    slow = []
    for _ in range(args.slow):
        s = socket.create_connection((args.host, args.port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
        slow.append(s)
    stop = threading.Event()

    def trickle():
        while not stop.wait(0.5):
            for s in slow:
                try:
                    s.send(b"a")
                except OSError:
                    pass
    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()
    latencies, statuses, lock = [], {}, threading.Lock()
    end = time.monotonic() + args.seconds

    def client():
        mine, codes = [], {}
        sock = socket.create_connection((args.host, args.port), timeout=30)
        buf = b""
        while time.monotonic() < end:
            t = time.monotonic()
            try:
                sock.sendall(request)
                status, buf = read_response(sock, buf)
            except OSError:
                # The server closed the connection (e.g. after its keep-alive request limit): reconnect, retry.
                sock.close()
                sock = socket.create_connection((args.host, args.port), timeout=30)
                buf = b""
                codes["reconnects"] = codes.get("reconnects", 0) + 1
                continue
            mine.append(time.monotonic() - t)
            codes[status] = codes.get(status, 0) + 1
        sock.close()
        with lock:
            latencies.extend(mine)
            for k, v in codes.items():
                statuses[k] = statuses.get(k, 0) + v

    threads = [threading.Thread(target=client) for _ in range(args.threads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    stop.set()
    for s in slow:
        s.close()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
    what = f"chat {args.chat} tokens" if args.chat else f"GET {args.path}"
    print(f"{what}: {len(latencies) / took:.0f} requests/s over {took:.1f} s, {args.threads} keep-alive connections, "
          f"{args.slow} slow ones; latency p50 {q[49] * 1000:.2f} ms, p99 {q[98] * 1000:.2f} ms, "
          f"max {max(latencies) * 1000:.2f} ms; statuses {statuses}")


if __name__ == "__main__":
    main()
