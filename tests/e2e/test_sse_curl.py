"""e2e: SSE framing as curl sees it (headers, `data: <one-line JSON>\\n\\n` events, a single final
`data: [DONE]`), keep-alive comments while a request waits, x-request-id, and errors decided before the stream
are plain HTTP errors (no 200)."""
import json
import subprocess
import threading
import time

from harness import Checks, Server, sse_events


def curl(srv, path, body, extra=()):
    cmd = ["curl", "-sS", "-N", "-i", "--max-time", "60", srv.base + path, "-H", "Content-Type: application/json",
           "-d", json.dumps(body), *extra]
    out = subprocess.run(cmd, capture_output=True, timeout=90).stdout
    head, _, body_bytes = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    return status, headers, body_bytes


def main():
    with Server("--max-running", "1", "--keepalive-interval", "0.05") as srv:
        def framing(c):
            status, headers, body = curl(srv, "/v1/chat/completions",
                                         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10,
                                          "stream": True, "stream_options": {"include_usage": True}},
                                         ["-H", "x-request-id: my-req-1"])
            c.check(status == 200, f"status {status}")
            c.check(headers.get("content-type", "").startswith("text/event-stream"), "text/event-stream")
            c.check(headers.get("x-accel-buffering") == "no", "X-Accel-Buffering: no")
            c.check(headers.get("x-request-id") == "my-req-1", "x-request-id echoed")
            c.check(body.endswith(b"data: [DONE]\n\n"), f"ends with [DONE]: {body[-40:]!r}")
            c.check(body.count(b"data: [DONE]") == 1, "one [DONE]")
            for block in body.decode().split("\n\n")[:-1]:
                ok = (block.startswith("data: ") or block.startswith(": ")) and "\n" not in block
                c.check(ok, f"one-line data event or comment: {block[:80]!r}")
            datas, _ = sse_events(body)
            chunks = [json.loads(d) for d in datas[:-1]]
            c.check(datas[-1] == "[DONE]", "last payload [DONE]")
            c.check(chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, "first delta is the role")
            c.check(chunks[-1]["choices"] == [] and "usage" in chunks[-1], "usage chunk")
            c.check(all("system_fingerprint" in ch and "created" in ch for ch in chunks), "fingerprint and created")

        def errors_before_stream(c):
            status, headers, body = curl(srv, "/v1/chat/completions",
                                         {"messages": [{"role": "user", "content": "hi"}], "stream": True,
                                          "temperature": "hot"})
            c.check(status == 400, f"stream request with a bad field -> 400, got {status}")
            c.check(headers.get("content-type", "").startswith("application/json"), "JSON error, not SSE")
            c.check(json.loads(body)["error"]["param"] == "temperature", "param")

        def keepalive_while_waiting(c):
            # max_running 1: a long request holds the only slot, a second stream waits and gets comments.
            long_req = {"prompt": "a", "max_tokens": 1000, "ignore_eos": True}
            t = threading.Thread(target=lambda: srv.post("/v1/completions", long_req, timeout=120))
            t.start()
            # The long request must hold the slot before the stream arrives, or the stream would not wait.
            deadline = time.monotonic() + 30
            while srv.metrics().get("voltserve_num_requests_running", 0) < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            status, _, body = curl(srv, "/v1/completions", {"prompt": "b", "max_tokens": 2, "stream": True})
            t.join()
            datas, comments = sse_events(body)
            c.check(status == 200 and datas[-1] == "[DONE]", "queued stream completes")
            c.check(len(comments) >= 1, f"keep-alive comments while queued: {len(comments)}")

        def curl_without_content_type(c):
            body = json.dumps({"prompt": "x " * 4000, "max_tokens": 1})
            out = subprocess.run(["curl", "-sS", srv.base + "/v1/completions", "-d", body, "-o", "/dev/null", "-w",
                                  "%{http_code}"], capture_output=True, timeout=60).stdout
            c.check(out in (b"200", b"400"), f"curl -d (form type) with a 8 KiB+ body is read as JSON: {out!r}")

        Checks().run([framing, errors_before_stream, keepalive_while_waiting, curl_without_content_type])


if __name__ == "__main__":
    main()
