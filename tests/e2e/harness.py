"""Shared e2e harness: starts a real `build/voltserve serve` on a free loopback port with the bundled fixture
model on the CPU, waits for /health, and always stops it. Tiny check helpers so failures name what was wrong."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

SOURCE_DIR = os.environ.get("VOLTSERVE_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BINARY_DIR = os.environ.get("VOLTSERVE_BINARY_DIR", os.path.join(SOURCE_DIR, "build"))
BINARY = os.environ.get("VOLTSERVE_BINARY", os.path.join(BINARY_DIR, "voltserve"))
MODEL_DIR = os.path.join(SOURCE_DIR, "tests", "fixtures", "models", "tiny-chat")
# VOLTSERVE_E2E_MODEL names another fixture folder to serve under the same name (the e2e_spec_* runs serve
# tiny-chat-mtp, tiny-chat with an MTP head, so every request speculates: the suites must pass unchanged).
E2E_MODEL = os.environ.get("VOLTSERVE_E2E_MODEL", "")
# A sanitizer build serves several times slower than the plain one: the suites multiply their latency limits and
# waits by VOLTSERVE_TEST_TIME_SCALE (set in a sanitizer build folder's test environment, cmake/Sanitizers.cmake; 1
# otherwise), so that they check the same guarantees there instead of failing on timing. Timeouts the server is
# given (--header-timeout and the like) are not scaled: only what a test allows on top of them.
def _time_scale():
    text = os.environ.get("VOLTSERVE_TEST_TIME_SCALE", "") or "1"
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1.0 <= value <= 100.0:
        raise SystemExit(f"VOLTSERVE_TEST_TIME_SCALE must be a number from 1 to 100, not {text!r}")
    return value


TIME_SCALE = _time_scale()
# The sanitizers of the binary under test (VOLTSERVE_SANITIZE of its build folder; empty for a plain build).
SANITIZE = os.environ.get("VOLTSERVE_TEST_SANITIZE", "")
if TIME_SCALE != 1.0:
    print(f"[e2e] latency limits and waits scaled by {TIME_SCALE:g} (VOLTSERVE_TEST_TIME_SCALE)", flush=True)


def scaled(seconds):
    """A latency limit or wait of the plain build, scaled for a slower (sanitizer) build."""
    return seconds * TIME_SCALE


SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error:|"
                              r"ThreadSanitizer: reported|SUMMARY: (Address|Undefined|Thread)")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running voltserve; use as a context manager so it is always killed."""

    def __init__(self, *extra_args, api_key=None, ready_timeout=60, context=1024):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.log = tempfile.NamedTemporaryFile(prefix="voltserve-e2e-", suffix=".log", delete=False)
        args = [BINARY, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--threads", "1",
                "--context", str(context), *extra_args]
        if E2E_MODEL:
            args += ["--model", os.path.join(SOURCE_DIR, "tests", "fixtures", "models", E2E_MODEL),
                     "--served-model-name", "tiny-chat"]
        elif "--model" not in extra_args:
            args += ["--model", MODEL_DIR]  # the suites are written against tiny-chat, not serve's default model
        if api_key:
            args += ["--api-key", api_key]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + scaled(ready_timeout)
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"voltserve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                status, _, _ = request("GET", self.base + "/health", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"voltserve not healthy after {scaled(ready_timeout)} s:\n{self.log_text()}")

    def log_text(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()[-8000:]

    def headers(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def post(self, path, body, headers=None, timeout=60):
        h = {"Content-Type": "application/json", **self.headers(), **(headers or {})}
        data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
        return request("POST", self.base + path, data=data, headers=h, timeout=timeout)

    def get(self, path, headers=None, timeout=30):
        return request("GET", self.base + path, headers={**self.headers(), **(headers or {})}, timeout=timeout)

    def metrics(self):
        """{metric name without labels: summed value} plus {full line name: value}."""
        status, _, body = self.get("/metrics")
        assert status == 200, status
        values = {}
        for line in body.decode().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
            bare = name.split("{")[0]
            if bare != name:
                values[bare] = values.get(bare, 0.0) + float(value)
        return values

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Stops the server (SIGTERM: it drains and exits, so a sanitizer build checks for leaks at exit; SIGKILL
        after `timeout`) and returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=scaled(timeout))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def sanitizer_reports(self):
        """Lines of AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer or ThreadSanitizer reports."""
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return [l.rstrip() for l in f if SANITIZER_REPORT.search(l)]

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        code = self.stop()
        reports = self.sanitizer_reports()
        text = self.log_text()
        os.unlink(self.log.name)
        # A sanitizer report or a failed exit fails the suite even when every check passed (the server may have
        # found the bug while answering a request whose check passed).
        # A sanitizer build must exit by itself: after a SIGKILL, LeakSanitizer never ran.
        killed_ok = not SANITIZE
        if reports or code not in ((0, -signal.SIGKILL) if killed_ok else (0,)):
            why = " (killed after the drain timed out: no leak check ran)" if code == -signal.SIGKILL else ""
            print(f"voltserve exited with {code}{why}; sanitizer reports: {reports[:5]}\n{text}", flush=True)
            if exc_type in (None, SystemExit):
                sys.exit(1)


def raise_open_files(n):
    """Raises this process's open-file limit (inherited by the servers it starts) to at least n, or to the hard
    limit; returns the soft limit now in force."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n if hard == resource.RLIM_INFINITY else min(n, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_bytes(pid):
    """Resident set size of a process (VmRSS), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def request(method, url, data=None, headers=None, timeout=60):
    """(status, headers dict with lower-case keys, body bytes); HTTP errors are returned, not raised."""
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


class Checks:
    """Collects failures; `run` executes test functions and reports; exit code 1 on any failure."""

    def __init__(self):
        self.failures = []
        self.n_checks = 0

    def check(self, cond, what):
        self.n_checks += 1
        if not cond:
            self.failures.append(what)
            print(f"  FAIL: {what}", flush=True)
        return cond

    def run(self, tests):
        for t in tests:
            print(f"[e2e] {t.__name__}", flush=True)
            start = time.time()
            try:
                t(self)
            except Exception:
                self.failures.append(f"{t.__name__} raised:\n{traceback.format_exc()}")
                print(traceback.format_exc(), flush=True)
            print(f"  ({time.time() - start:.1f} s)", flush=True)
        print(f"[e2e] {self.n_checks} checks, {len(self.failures)} failures", flush=True)
        for f in self.failures:
            print("FAILED:", f)
        sys.exit(1 if self.failures else 0)


def sse_events(raw):
    """Splits an SSE body into (data payloads, comment lines); asserts every event ends with a blank line."""
    text = raw.decode("utf-8")
    datas, comments = [], []
    for block in text.split("\n\n"):
        if not block:
            continue
        for line in block.split("\n"):
            if line.startswith("data: "):
                datas.append(line[len("data: "):])
            elif line.startswith(":"):
                comments.append(line)
    return datas, comments
