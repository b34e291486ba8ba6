"""e2e: API key (401 in the OpenAI shape, /health open, OPTIONS preflight), CORS, the config file vs CLI flag
precedence, /metrics and /tokenize//detokenize//apply-template, and SIGTERM drain (in-flight stream finishes,
new requests get 503, exit code 0)."""
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

from harness import BINARY, SANITIZER_REPORT, Checks, Server, request, scaled, sse_events


def main():
    checks = Checks()

    def auth_and_cors(c):
        with Server("--cors-origin", "http://ui.example", api_key="sekret") as srv:
            status, _, _ = request("GET", srv.base + "/health")
            c.check(status == 200, "/health needs no key")
            status, headers, body = request("GET", srv.base + "/v1/models")
            c.check(status == 401, f"no key -> 401 ({status})")
            c.check(json.loads(body)["error"]["type"] == "authentication_error", "401 error shape")
            c.check(headers.get("www-authenticate") == "Bearer", "WWW-Authenticate")
            status, _, _ = request("GET", srv.base + "/v1/models", headers={"Authorization": "Bearer wrong"})
            c.check(status == 401, "wrong key -> 401")
            status, _, _ = request("GET", srv.base + "/v1/models", headers={"Authorization": "bearer sekret"})
            c.check(status == 200, "scheme is case-insensitive")
            status, headers, _ = request("OPTIONS", srv.base + "/v1/chat/completions",
                                         headers={"Origin": "http://ui.example",
                                                  "Access-Control-Request-Method": "POST"})
            c.check(status == 204, f"preflight passes without a key ({status})")
            c.check(headers.get("access-control-allow-origin") == "http://ui.example", "CORS origin echoed")
            status, headers, _ = request("GET", srv.base + "/health", headers={"Origin": "http://evil.example"})
            c.check("access-control-allow-origin" not in headers, "other origins get no CORS header")

    def config_precedence(c):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"served_model_name": "from-config", "max_running": 2, "request_timeout": 100}, f)
            path = f.name
        try:
            with Server("--config", path) as srv:
                status, _, body = srv.get("/v1/models")
                c.check(json.loads(body)["data"][0]["id"] == "from-config", "config file applies")
            with Server("--config", path, "--served-model-name", "from-flag") as srv:
                status, _, body = srv.get("/v1/models")
                c.check(json.loads(body)["data"][0]["id"] == "from-flag", "flag overrides config")
            with open(path, "w") as f:
                json.dump({"no_such_key": 1}, f)
            out = subprocess.run([BINARY, "serve", "--config", path, "--port", "0"], capture_output=True,
                                 timeout=scaled(30))
            c.check(out.returncode != 0 and b"no_such_key" in out.stderr, "unknown config key is an error naming it")
            # It fails anyway, so its exit code cannot tell a sanitizer report (a leak on the error path) apart.
            reports = [l for l in out.stderr.decode(errors="replace").splitlines() if SANITIZER_REPORT.search(l)]
            c.check(not reports, f"no sanitizer report on the error path: {reports[:3]}")
        finally:
            os.unlink(path)

    def service_endpoints(c):
        with Server() as srv:
            status, _, body = srv.post("/tokenize", {"prompt": "hello world"})
            toks = json.loads(body)
            c.check(status == 200 and toks["count"] == len(toks["tokens"]) > 0, f"tokenize {body[:100]!r}")
            status, _, body = srv.post("/detokenize", {"tokens": toks["tokens"]})
            c.check(json.loads(body).get("prompt") == "hello world", f"detokenize round trip {body!r}")
            status, _, body = srv.post("/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
            prompt = json.loads(body).get("prompt", "")
            c.check(status == 200 and "hi" in prompt and "<|im_start|>" in prompt, f"apply-template {prompt!r}")
            status, _, body = srv.post("/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
            c.check(status == 200 and json.loads(body)["count"] > 0, "tokenize a chat body")
            srv.post("/v1/completions", {"prompt": "hi", "max_tokens": 3})
            m = srv.metrics()
            for name in ["voltserve_num_requests_running", "voltserve_num_requests_waiting", "voltserve_kv_pages_total",
                         "voltserve_kv_pages_free", "voltserve_state_slots_total", "voltserve_state_slots_free",
                         "voltserve_prompt_tokens_total", "voltserve_generation_tokens_total",
                         "voltserve_time_to_first_token_seconds_count", "voltserve_inter_token_latency_seconds_count"]:
                c.check(name in m, f"/metrics has {name}")
            c.check(m.get("voltserve_generation_tokens_total", 0) >= 1, "generation tokens counted")
            c.check(any(k.startswith("voltserve_requests_total{") and 'status="200"' in k for k in m), "requests by status")
            c.check("req=" in srv.log_text() and "completion_tokens=" in srv.log_text(), "access-log line")

    def sigterm_drains(c):
        srv = Server()
        try:
            result = {}

            def long_stream():
                result["resp"] = srv.post("/v1/completions", {"prompt": "a", "max_tokens": 600, "ignore_eos": True,
                                                               "stream": True}, timeout=scaled(120))
            t = threading.Thread(target=long_stream)
            t.start()
            time.sleep(scaled(0.3))   # the stream is running (a sanitizer build takes longer to start it)
            srv.proc.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            try:
                status, _, body = srv.post("/v1/completions", {"prompt": "b", "max_tokens": 2}, timeout=10)
                c.check(status == 503, f"new request while draining -> 503 ({status})")
            except OSError:
                c.check(True, "")  # already closed: also refuses new work
            t.join(timeout=scaled(120))
            status, _, body = result.get("resp", (0, {}, b""))
            datas, _ = sse_events(body)
            c.check(status == 200 and datas and datas[-1] == "[DONE]", "in-flight stream finished during drain")
            chunks = [json.loads(d) for d in datas[:-1]]
            c.check(any(ch["choices"] and ch["choices"][0].get("finish_reason") == "length" for ch in chunks),
                    "it ran to its length")
            code = srv.proc.wait(timeout=scaled(60))
            c.check(code == 0, f"exit code 0 after drain ({code})")
        finally:
            srv.stop()

    checks.run([auth_and_cors, config_precedence, service_endpoints, sigterm_drains])


if __name__ == "__main__":
    main()
