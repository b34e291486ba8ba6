"""e2e: 64 concurrent streaming clients for a bounded time (<= ~40 s), some disconnecting at random points;
every client that stays gets a complete, well-formed stream (role first, one finish_reason, [DONE]) and no
error; afterwards the engine is idle and the KV page and state-slot pools are full again (read from /metrics)."""
import json
import random
import socket
import threading
import time

from harness import Checks, Server, scaled

N_CLIENTS = 64
DURATION_S = 25


def stream_once(port, rng, stats):
    body = json.dumps({"messages": [{"role": "user", "content": "tell me a story %d" % rng.randint(0, 999)}],
                       "max_tokens": rng.randint(4, 48), "stream": True, "temperature": 0.8}).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    disconnect = rng.random() < 0.3
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(req)
        data = b""
        cut_at = rng.randint(50, 2000)
        while True:
            part = s.recv(4096)
            if not part:
                break
            data += part
            if disconnect and len(data) >= cut_at:
                stats["disconnected"] += 1
                return None
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return f"status line {head[:40]!r}"
    # De-chunk the transfer encoding.
    text, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        text, rest = text + rest[:size], rest[size + 2:]
    events = [e for e in text.decode().split("\n\n") if e and not e.startswith(":")]
    if not events or events[-1] != "data: [DONE]":
        return f"no [DONE]: {text[-100:]!r}"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    if any("error" in ch for ch in chunks):
        return f"error event {chunks}"
    if chunks[0]["choices"][0]["delta"].get("role") != "assistant":
        return "no role first"
    finishes = [ch for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]]
    if len(finishes) != 1:
        return f"{len(finishes)} finish chunks"
    stats["completed"] += 1
    return None


def main():
    with Server("--max-running", "16", "--max-waiting", "64") as srv:
        def concurrent_streams(c):
            stats = {"completed": 0, "disconnected": 0}
            errors = []
            stop_at = time.time() + DURATION_S
            lock = threading.Lock()

            def client(seed):
                rng = random.Random(seed)
                while time.time() < stop_at:
                    try:
                        err = stream_once(srv.port, rng, stats)
                    except Exception as e:  # noqa: BLE001 - any failure of a staying client counts
                        err = f"exception {e!r}"
                    if err:
                        with lock:
                            errors.append(err)

            threads = [threading.Thread(target=client, args=(i,)) for i in range(N_CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=DURATION_S + 90)
            print(f"  completed {stats['completed']}, disconnected {stats['disconnected']}, errors {len(errors)}")
            c.check(not errors, f"errors for clients that stayed: {errors[:5]}")
            c.check(stats["completed"] >= N_CLIENTS, f"enough completed streams ({stats['completed']})")
            c.check(stats["disconnected"] >= 5, f"some disconnects happened ({stats['disconnected']})")

        def pools_back_to_full(c):
            deadline = time.time() + scaled(30)
            m = {}
            while time.time() < deadline:
                m = srv.metrics()
                if m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0 and \
                        m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total"):
                    break
                time.sleep(0.2)
            c.check(m.get("voltserve_num_requests_running") == 0, "nothing running")
            c.check(m.get("voltserve_num_requests_waiting") == 0, "nothing waiting")
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total") > 0, "KV pages all free")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total") > 0, "slots all free")
            c.check(m.get("voltserve_client_disconnects_total", 0) >= 1, "disconnects counted")
            status, _, _ = srv.get("/health")
            c.check(status == 200, "healthy")

        Checks().run([concurrent_streams, pools_back_to_full])


if __name__ == "__main__":
    main()
