"""e2e: a burst of 300 concurrent requests (streaming and not) beyond the running and waiting limits is answered
only with 200 or with 429/503 carrying Retry-After and an OpenAI error body; /health stays 200 during the burst;
the shed requests are counted in /metrics (voltserve_requests_shed_total); a prompt beyond the context is a 400
that names the limit; afterwards the pools are full again."""
import json
import socket
import threading
import time

from harness import Checks, Server, raise_open_files, scaled

N_BURST = 300


def one_request(port, i, results):
    stream = i % 2 == 0
    body = json.dumps({"messages": [{"role": "user", "content": f"burst {i}"}], "max_tokens": 48 + i % 64,
                       "ignore_eos": True, "stream": stream}).encode()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.settimeout(120)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        data = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            data += part
        s.close()
    except OSError as e:
        results[i] = ("exception", repr(e), b"")
        return
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        results[i] = ("bad status line", lines[0] if lines else "", data[:100])
        return
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    results[i] = (status, headers, rest)


def main():
    raise_open_files(4096)
    with Server("--max-running", "16", "--max-waiting", "64") as srv:
        def burst(c):
            results = [None] * N_BURST
            health = []
            done = threading.Event()

            def poll_health():
                while not done.is_set():
                    t = time.monotonic()
                    try:
                        status, _, _ = srv.get("/health", timeout=scaled(2))
                    except OSError:
                        status = 0
                    health.append((status, time.monotonic() - t))
                    time.sleep(0.1)
            m0 = srv.metrics()
            poller = threading.Thread(target=poll_health)
            poller.start()
            threads = [threading.Thread(target=one_request, args=(srv.port, i, results)) for i in range(N_BURST)]
            start = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=180)
            done.set()
            poller.join()
            took = time.monotonic() - start
            statuses = {}
            bad = []
            for i, r in enumerate(results):
                if r is None or not isinstance(r[0], int):
                    bad.append((i, r))
                    continue
                status, headers, body = r
                statuses[status] = statuses.get(status, 0) + 1
                if status in (429, 503):
                    try:
                        err = json.loads(body)["error"]
                        shaped = all(k in err for k in ("message", "type", "param", "code"))
                    except (ValueError, KeyError, TypeError):
                        shaped = False
                    if not headers.get("retry-after", "").isdigit() or not shaped:
                        bad.append((i, status, headers.get("retry-after"), body[:120]))
                elif status == 200:
                    if i % 2 == 0 and not body.rstrip().endswith(b"0"):
                        bad.append((i, "stream not terminated", body[-80:]))
                else:
                    bad.append((i, status, body[:120]))
            print(f"  {N_BURST} requests in {took:.1f} s: {statuses}; /health polled {len(health)} times,"
                  f" worst {max(h[1] for h in health) * 1000:.0f} ms")
            c.check(not bad, f"only 200, or 429/503 with Retry-After and an error body: {bad[:5]}")
            c.check(statuses.get(200, 0) >= 16, f"some were served ({statuses.get(200, 0)})")
            shed = statuses.get(429, 0) + statuses.get(503, 0)
            c.check(shed > 0, "the burst went beyond the queue (some were shed)")
            limit = scaled(1.0)   # the 1 s (a sanitizer build gets its time scale)
            slow = [h for h in health if h[0] != 200 or h[1] >= limit]
            c.check(not slow, f"/health answered 200 within {limit:g} s throughout: {slow[:5]}")
            m = srv.metrics()
            got = m.get("voltserve_requests_shed_total", 0) - m0.get("voltserve_requests_shed_total", 0)
            c.check(got == shed, f"voltserve_requests_shed_total counts the shed requests ({got}, saw {shed})")

        def context_limit(c):
            status, _, body = srv.post("/v1/chat/completions",
                                       {"messages": [{"role": "user", "content": "word " * 3000}], "max_tokens": 4})
            err = json.loads(body).get("error", {})
            c.check(status == 400 and err.get("code") == "context_length_exceeded", f"beyond the context: {status} {err}")
            c.check("1024" in err.get("message", ""), f"the message names the limit: {err.get('message')}")

        def pools_full_afterwards(c):
            deadline = time.time() + scaled(30)
            m = srv.metrics()
            while time.time() < deadline:
                m = srv.metrics()
                if m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0:
                    break
                time.sleep(0.2)
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total") > 0, "KV pages all free")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total") > 0, "slots all free")
            status, _, _ = srv.get("/health")
            c.check(status == 200 and srv.proc.poll() is None, "healthy and alive")

        Checks().run([burst, context_limit, pools_full_afterwards])


if __name__ == "__main__":
    main()
