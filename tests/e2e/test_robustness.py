"""e2e robustness: >= 40 invalid or hostile requests against a real voltserve, each answered with the expected
4xx and an OpenAI error body (message, type, param, code) naming the field; raw sockets for malformed HTTP,
slow senders and early disconnects; the server stays healthy afterwards and its pools are full again."""
import json
import socket
import time

from harness import Checks, Server, scaled

OK_MSG = [{"role": "user", "content": "hi"}]


def chat(**fields):
    body = {"messages": OK_MSG, "max_tokens": 4}
    body.update(fields)
    return body


# (name, path, body (dict or raw bytes), expected status, expected param or None for "don't care")
CASES = [
    ("malformed json", "/v1/chat/completions", b'{"model":"m","messages":[', 400, None),
    ("trailing garbage", "/v1/chat/completions", b'{"messages":[]} xyz', 400, None),
    ("NaN literal", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"x"}],"temperature":NaN}', 400, None),
    ("number overflow", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"x"}],"temperature":1e400}', 400, None),
    ("empty body", "/v1/chat/completions", b"", 400, None),
    ("array body", "/v1/chat/completions", b"[]", 400, None),
    ("string body", "/v1/chat/completions", b'"hi"', 400, None),
    ("invalid utf-8", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"\xff\xfe"}]}', 400, None),
    ("lone surrogate", "/v1/chat/completions", b'{"messages":[{"role":"user","content":"\\ud800"}]}', 400, None),
    ("absurd nesting", "/v1/chat/completions", b'{"messages":' + b"[" * 100000 + b"]" * 100000 + b"}", 400, None),
    ("messages missing", "/v1/chat/completions", {"max_tokens": 3}, 400, "messages"),
    ("messages string", "/v1/chat/completions", {"messages": "hello"}, 400, "messages"),
    ("messages empty", "/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("message not object", "/v1/chat/completions", {"messages": [5]}, 400, "messages[0]"),
    ("bad role", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
    ("content number", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
    ("image part", "/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}, 400, "messages[0].content[0]"),
    ("video part", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "video"}]}]}, 400,
     "messages[0].content[0].type"),
    ("tool msg without id", "/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]}, 400,
     "messages[0].tool_call_id"),
    ("bad tool args json", "/v1/chat/completions", {"messages": [{"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{nope"}}]}]}, 400,
     "messages[0].tool_calls[0].function.arguments"),
    ("temperature hot", "/v1/chat/completions", chat(temperature="hot"), 400, "temperature"),
    ("temperature -1", "/v1/chat/completions", chat(temperature=-1), 400, "temperature"),
    ("temperature 3", "/v1/chat/completions", chat(temperature=3), 400, "temperature"),
    ("top_p 0", "/v1/chat/completions", chat(top_p=0), 400, "top_p"),
    ("top_p 1.5", "/v1/chat/completions", chat(top_p=1.5), 400, "top_p"),
    ("presence 5", "/v1/chat/completions", chat(presence_penalty=5), 400, "presence_penalty"),
    ("top_k -5", "/v1/chat/completions", chat(top_k=-5), 400, "top_k"),
    ("min_p 2", "/v1/chat/completions", chat(min_p=2), 400, "min_p"),
    ("stream yes", "/v1/chat/completions", chat(stream="yes"), 400, "stream"),
    ("max_tokens string", "/v1/chat/completions", chat(max_tokens="100"), 400, "max_tokens"),
    ("max_tokens 2.7", "/v1/chat/completions", chat(max_tokens=2.7), 400, "max_tokens"),
    ("max_tokens 0", "/v1/chat/completions", chat(max_tokens=0), 400, "max_tokens"),
    ("max_tokens huge", "/v1/chat/completions", chat(max_tokens=10**12), 400, "max_tokens"),
    ("n 2.7", "/v1/chat/completions", chat(n=2.7), 400, "n"),
    ("n absurd", "/v1/chat/completions", chat(n=1000), 400, "n"),
    ("seed 1e30", "/v1/chat/completions", chat(seed=1e30), 400, "seed"),
    ("top_logprobs without logprobs", "/v1/chat/completions", chat(top_logprobs=2), 400, "top_logprobs"),
    ("top_logprobs 21", "/v1/chat/completions", chat(logprobs=True, top_logprobs=21), 400, "top_logprobs"),
    ("stop list too long", "/v1/chat/completions", chat(stop=["a", "b", "c", "d", "e"]), 400, "stop"),
    ("stop not strings", "/v1/chat/completions", chat(stop=[1]), 400, "stop[0]"),
    ("stop empty string", "/v1/chat/completions", chat(stop=""), 400, "stop"),
    ("stop_options without stream", "/v1/chat/completions", chat(stream_options={"include_usage": True}), 400,
     "stream_options"),
    ("logit_bias key", "/v1/chat/completions", chat(logit_bias={"abc": 1}), 400, "logit_bias"),
    ("logit_bias out of vocab", "/v1/chat/completions", chat(logit_bias={"99999999": 1}), 400, "logit_bias"),
    ("logit_bias value", "/v1/chat/completions", chat(logit_bias={"5": 500}), 400, "logit_bias"),
    ("unknown model", "/v1/chat/completions", chat(model="gpt-9"), 404, "model"),
    ("tools empty", "/v1/chat/completions", chat(tools=[]), 400, "tools"),
    ("tool_choice missing tool", "/v1/chat/completions", chat(
        tools=[{"type": "function", "function": {"name": "f"}}],
        tool_choice={"type": "function", "function": {"name": "missing"}}), 400, "tool_choice.function.name"),
    ("tool_choice without tools", "/v1/chat/completions", chat(tool_choice="required"), 400, "tool_choice"),
    ("tool_choice nonsense", "/v1/chat/completions", chat(tools=[{"type": "function", "function": {"name": "f"}}],
                                                          tool_choice="sometimes"), 400, "tool_choice"),
    ("bad tool name", "/v1/chat/completions", chat(tools=[{"type": "function", "function": {"name": "a b"}}]), 400,
     "tools[0].function.name"),
    ("response_format json_schema", "/v1/chat/completions", chat(response_format={"type": "json_schema"}), 400,
     "response_format.json_schema"),
    ("response_format xml", "/v1/chat/completions", chat(response_format={"type": "xml"}), 400, "response_format.type"),
    ("enable_thinking string", "/v1/chat/completions", chat(chat_template_kwargs={"enable_thinking": "no"}), 400,
     "chat_template_kwargs.enable_thinking"),
    ("prompt beyond context", "/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 5000}]}, 400,
     "messages"),
    ("prompt + max_tokens beyond context", "/v1/chat/completions", chat(max_tokens=1020), 400, "max_tokens"),
    ("completions echo", "/v1/completions", {"prompt": "x", "echo": True}, 400, "echo"),
    ("completions suffix", "/v1/completions", {"prompt": "x", "suffix": "y"}, 400, "suffix"),
    ("completions prompt type", "/v1/completions", {"prompt": {"a": 1}}, 400, "prompt"),
    ("completions token out of vocab", "/v1/completions", {"prompt": [1, 99999999]}, 400, "prompt[1]"),
    ("detokenize bad ids", "/detokenize", {"tokens": ["a"]}, 400, "tokens[0]"),
    ("tokenize nothing", "/tokenize", {}, 400, "prompt"),
]


def check_error_body(c, name, status, headers, body, want_status, want_param):
    c.check(status == want_status, f"{name}: status {status}, want {want_status}: {body[:300]!r}")
    c.check(headers.get("content-type", "").startswith("application/json"), f"{name}: JSON content type")
    try:
        err = json.loads(body)["error"]
    except Exception:
        c.check(False, f"{name}: body is not an OpenAI error: {body[:200]!r}")
        return
    c.check(isinstance(err.get("message"), str) and len(err["message"]) > 5, f"{name}: has a message")
    c.check(all(k in err for k in ("type", "param", "code")), f"{name}: has type/param/code")
    if want_param is not None:
        c.check(err.get("param") == want_param, f"{name}: param {err.get('param')!r}, want {want_param!r}")


def raw_exchange(port, data, read=True, delay=0.0, chunk=0):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        if chunk:
            for i in range(0, len(data), chunk):
                s.sendall(data[i:i + chunk])
                time.sleep(delay)
        else:
            s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            out += part
            if b"\r\n\r\n" in out:
                head, _, rest = out.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(rest) >= int(line.split(b":")[1]):
                            return out
        return out
    finally:
        s.close()


def main():
    with Server("--max-body-bytes", "1048576", "--max-running", "4") as srv:
        def hostile_requests(c):
            c.check(len(CASES) >= 40, f"at least 40 cases ({len(CASES)})")
            for name, path, body, want, param in CASES:
                status, headers, resp = srv.post(path, body)
                check_error_body(c, name, status, headers, resp, want, param)

        def other_statuses(c):
            status, headers, body = srv.post("/v1/chat/completions", b"x" * (2 << 20))
            check_error_body(c, "huge body", status, headers, body, 413, None)
            status, headers, body = srv.get("/v1/models/gpt-9")
            check_error_body(c, "unknown model id", status, headers, body, 404, "model")
            status, headers, body = srv.get("/no/such/route")
            check_error_body(c, "unknown route", status, headers, body, 404, None)
            # curl -d without a content type is form-encoded: still accepted as JSON, no 8 KiB form limit.
            big = json.dumps({"prompt": "word " * 3000, "max_tokens": 1}).encode()
            status, _, body = srv.post("/v1/completions", big, headers={"Content-Type": "application/x-www-form-urlencoded"})
            c.check(status in (200, 400), f"form content type is read as JSON: {status} {body[:200]!r}")
            c.check(b"payload_too_large" not in body, "no form-size 413")

        def unknown_fields_accepted(c):
            status, _, body = srv.post("/v1/chat/completions", chat(store=True, metadata={"a": "b"}, service_tier="auto",
                                                                    user="u", prediction={"type": "content", "content": "x"},
                                                                    some_vendor_extension=[1, 2]))
            c.check(status == 200, f"ignored fields accepted: {status} {body[:200]!r}")

        def malformed_http(c):
            out = raw_exchange(srv.port, b"GARBAGE\r\n\r\n")
            c.check(out.startswith(b"HTTP/1.1 4"), f"garbage request line -> 4xx: {out[:60]!r}")
            body = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
            req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            out = raw_exchange(srv.port, req, delay=0.01, chunk=7)  # a slow sender
            c.check(out.startswith(b"HTTP/1.1 200"), f"slow sender answered: {out[:80]!r}")
            # Promise more body than sent, then hang up.
            bad = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"messages\":")
            raw_exchange(srv.port, bad, read=False)

        def disconnects(c):
            body = json.dumps({"messages": OK_MSG, "max_tokens": 200, "stream": True, "ignore_eos": True}).encode()
            req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            for _ in range(5):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
                s.sendall(req)
                s.recv(200)  # headers and the first chunk started
                s.close()
            # A slow reader: reads a little, slowly.
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(req)
            for _ in range(5):
                s.recv(64)
                time.sleep(0.2)
            s.close()

        def healthy_afterwards(c):
            deadline = time.time() + scaled(20)
            m = srv.metrics()
            while time.time() < deadline:
                m = srv.metrics()
                if m.get("voltserve_num_requests_running") == 0 and m.get("voltserve_num_requests_waiting") == 0:
                    break
                time.sleep(0.2)
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total"), f"KV pages back: {m}")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total"), "state slots back")
            status, _, _ = srv.get("/health")
            c.check(status == 200, "healthy after the hostile suite")
            status, _, body = srv.post("/v1/chat/completions", chat())
            c.check(status == 200, f"still serves: {status}")
            c.check(srv.proc.poll() is None, "process alive")

        Checks().run([hostile_requests, other_statuses, unknown_fields_accepted, malformed_http, disconnects,
                      healthy_afterwards])


if __name__ == "__main__":
    main()
