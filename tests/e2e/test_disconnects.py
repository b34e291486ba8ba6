"""e2e: a client that goes away is cancelled on every generation route, streaming or not, running or still queued,
n = 1 or n > 1: within 1 s of the hang-up (/metrics) nothing runs or waits, every KV page and state slot is free,
the disconnect is counted, and the engine released each of its requests within one step of the hang-up being seen
(voltserve_disconnect_release_steps). Also the issue's case: 8 clients asking for 4000 tokens and leaving after 1 s."""
import json
import socket
import threading
import time

from harness import Checks, Server, scaled

MSG = [{"role": "user", "content": "tell me a very long story"}]
LONG = {"max_tokens": 4000, "ignore_eos": True}


def routes(srv):
    """(name, path, body, engine requests) for every generation route this server has."""
    model = json.loads(srv.get("/v1/models")[2])["data"][0]["id"]
    out = [
        ("chat", "/v1/chat/completions", {"messages": MSG, **LONG}, 1),
        ("chat n=3", "/v1/chat/completions", {"messages": MSG, "n": 3, "temperature": 1.0, **LONG}, 3),
        ("completions", "/v1/completions", {"prompt": "Once upon a time", **LONG}, 1),
        ("completions 2 prompts", "/v1/completions", {"prompt": ["Once upon", "a time"], **LONG}, 2),
    ]
    # The Responses and Messages routes (where this build has them) go through the same session.
    optional = [
        ("responses", "/v1/responses", {"model": model, "input": "tell me a very long story",
                                        "max_output_tokens": 4000, "ignore_eos": True}, 1),
        ("messages", "/v1/messages", {"model": model, "messages": MSG, **LONG}, 1),
    ]
    for name, path, body, n in optional:
        status, _, _ = srv.post(path, {"max_tokens": "x"})
        if status not in (404, 405):
            out.append((name, path, body, n))
        else:
            print(f"  ({path} is not a route of this build)")
    return out


def send_request(port, path, body):
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


# The limit: released within 1 s of the hang-up (a sanitizer build gets its time scale).
RELEASE_LIMIT = scaled(1.0)


def wait_for(srv, pred, timeout):
    """Polls /metrics until pred(m) for up to `timeout` (scaled) seconds; returns (ok, m, seconds waited)."""
    timeout = scaled(timeout)
    start = time.monotonic()
    m = srv.metrics()
    while not pred(m):
        if time.monotonic() - start > timeout:
            return False, m, time.monotonic() - start
        time.sleep(0.01)
        m = srv.metrics()
    return True, m, time.monotonic() - start


def pools(m):
    """The gauges a failure message needs (not the whole scrape)."""
    keys = ("voltserve_num_requests_running", "voltserve_num_requests_waiting", "voltserve_kv_pages_free",
            "voltserve_kv_pages_total", "voltserve_state_slots_free", "voltserve_state_slots_total")
    return {k.replace("voltserve_", ""): m.get(k) for k in keys}


def idle_and_full(m):
    return (m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0
            and m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total")
            and m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total"))


def release_steps(m):
    """(observations, observations within one step) of voltserve_disconnect_release_steps."""
    return (m.get("voltserve_disconnect_release_steps_count", 0),
            m.get('voltserve_disconnect_release_steps_bucket{le="1"}', 0))


def check_released(c, srv, name, m_before, n_requests, t_close):
    # The pools can be full a moment before the worker has seen the final events and counted the disconnect: wait
    # for both (the time taken is still measured from the hang-up).
    def released(m):
        n0, _ = release_steps(m_before)
        n1, _ = release_steps(m)
        return (idle_and_full(m) and n1 - n0 >= n_requests and m.get("voltserve_client_disconnects_total", 0) >
                m_before.get("voltserve_client_disconnects_total", 0))
    ok, m, _ = wait_for(srv, released, 5.0)
    took = time.monotonic() - t_close
    c.check(ok, f"{name}: idle with every page and slot free after the hang-up: {pools(m)}")
    c.check(took < RELEASE_LIMIT, f"{name}: released {took:.2f} s after the hang-up (< {RELEASE_LIMIT:g} s)")
    c.check(m.get("voltserve_client_disconnects_total", 0) == m_before.get("voltserve_client_disconnects_total", 0) + 1,
            f"{name}: one disconnect counted")
    n0, w0 = release_steps(m_before)
    n1, w1 = release_steps(m)
    c.check(n1 - n0 == n_requests, f"{name}: {n1 - n0} engine requests released after a disconnect, want {n_requests}")
    c.check(w1 - w0 == n1 - n0, f"{name}: released within one engine step ({w1 - w0} of {n1 - n0})")
    steps = m.get("voltserve_engine_steps_total", 0)
    print(f"  {name}: released in {took * 1000:.0f} ms (engine steps so far: {steps:.0f})")
    return m


def main():
    checks = Checks()

    def running_requests_on_every_route(c):
        with Server("--max-running", "4", context=4096) as srv:
            for name, path, body, n in routes(srv):
                m0 = srv.metrics()
                s = send_request(srv.port, path, body)
                ok, m, _ = wait_for(srv, lambda m: m.get("voltserve_num_requests_running") == n, 10.0)
                c.check(ok, f"{name}: {n} running ({m.get('voltserve_num_requests_running')})")
                steps0 = m.get("voltserve_engine_steps_total", 0)
                time.sleep(0.3)
                m = srv.metrics()
                c.check(m.get("voltserve_num_requests_running") == n and m.get("voltserve_engine_steps_total", 0) > steps0,
                        f"{name}: still generating before the hang-up")
                t_close = time.monotonic()
                s.close()
                check_released(c, srv, name, m0, n, t_close)
            status, _, _ = srv.get("/health")
            c.check(status == 200, "healthy afterwards")

    def queued_requests(c):
        with Server("--max-running", "1", context=4096) as srv:
            front = send_request(srv.port, "/v1/completions", {"prompt": "a", "stream": True, **LONG})
            reading = threading.Event()

            def drain():
                try:
                    while front.recv(65536):
                        reading.set()
                except OSError:
                    pass
            t = threading.Thread(target=drain, daemon=True)
            t.start()
            reading.wait(10)
            for name, body in (("queued non-streaming", {"prompt": "b", **LONG}),
                               ("queued streaming", {"prompt": "b", "stream": True, **LONG})):
                m0 = srv.metrics()
                s = send_request(srv.port, "/v1/completions", body)
                ok, _, _ = wait_for(srv, lambda m: m.get("voltserve_num_requests_waiting") == 1, 10.0)
                c.check(ok, f"{name}: waiting in the queue")
                time.sleep(0.2)
                t_close = time.monotonic()
                s.close()
                # The queue can be empty a moment before the worker has counted the disconnect: wait for both.
                gone0 = m0.get("voltserve_client_disconnects_total", 0)
                ok, m, _ = wait_for(srv, lambda m: m.get("voltserve_num_requests_waiting") == 0 and
                                    m.get("voltserve_client_disconnects_total", 0) > gone0, 5.0)
                took = time.monotonic() - t_close
                c.check(ok and took < RELEASE_LIMIT, f"{name}: left the queue {took:.2f} s after the hang-up")
                c.check(m.get("voltserve_num_requests_running") == 1, f"{name}: the running request is unaffected")
                c.check(m.get("voltserve_client_disconnects_total", 0) == gone0 + 1, f"{name}: one disconnect counted")
            t_close = time.monotonic()
            front.close()
            ok, _, _ = wait_for(srv, idle_and_full, 5.0)
            c.check(ok and time.monotonic() - t_close < RELEASE_LIMIT, "the streaming request is released too")

    def eight_clients_leave_after_one_second(c):
        with Server("--max-running", "16", context=4096) as srv:
            m0 = srv.metrics()
            socks = [send_request(srv.port, "/v1/chat/completions", {"messages": MSG, **LONG}) for _ in range(8)]
            # All 8 generating (a sanitizer build admits them more slowly than 1 s), then 1 s of generation.
            ok, m, _ = wait_for(srv, lambda m: m.get("voltserve_num_requests_running") == 8, 10.0)
            c.check(ok, f"8 running ({m.get('voltserve_num_requests_running')})")
            time.sleep(1.0)
            for s in socks:
                s.close()
            t_close = time.monotonic()

            def released(m):
                gone = m.get("voltserve_client_disconnects_total", 0) - m0.get("voltserve_client_disconnects_total", 0)
                return idle_and_full(m) and release_steps(m)[0] - release_steps(m0)[0] >= 8 and gone >= 8
            ok, m, _ = wait_for(srv, released, 5.0)
            took = time.monotonic() - t_close
            c.check(ok and took < RELEASE_LIMIT, f"all 8 released {took:.2f} s after the hang-ups")
            c.check(m.get("voltserve_client_disconnects_total", 0) - m0.get("voltserve_client_disconnects_total", 0) == 8,
                    "8 disconnects counted")
            n0, w0 = release_steps(m0)
            n1, w1 = release_steps(m)
            c.check(n1 - n0 == 8 and w1 - w0 == 8, f"each released within one step ({w1 - w0} of {n1 - n0})")
            time.sleep(1.0)
            m2 = srv.metrics()
            c.check(m2.get("voltserve_engine_steps_total") == m.get("voltserve_engine_steps_total"),
                    "no engine steps after they left (nothing generates for nobody)")

    checks.run([running_requests_on_every_route, queued_requests, eight_clients_leave_after_one_second])


if __name__ == "__main__":
    main()
