#!/usr/bin/env python3
"""The out-of-the-box experience (issue 22): `voltserve serve` with no --model serves models/demo, and a chat
completion answers simple arithmetic correctly, plain and streamed. Run by ctest (demo_default_model);
VOLTSERVE_BINARY names the binary. The questions are drawn fresh from the held-out split, so no fixed answer is
wired in."""
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.environ.get("VOLTSERVE_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools", "demo"))
import pools as pl  # noqa: E402
import tasks  # noqa: E402


def post(url, body, timeout=300):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def main():
    binary = os.environ.get("VOLTSERVE_BINARY", os.path.join(REPO, "build", "voltserve"))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = tempfile.TemporaryFile()
    # No --model: the default. cwd is a temporary folder so that the default is found from the binary, not the cwd.
    proc = subprocess.Popen([binary, "serve", "--backend", "cpu", "--threads", "2", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, cwd=tempfile.gettempdir())
    url = f"http://127.0.0.1:{port}"
    failures = []
    try:
        models = None
        for _ in range(300):
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                    models = json.loads(r.read())
                break
            except OSError:
                time.sleep(0.2)
        if models is None:
            log.seek(0)
            print("FAIL: voltserve serve (no --model) did not come up:\n" + log.read().decode(errors="replace")[-3000:])
            return 1
        names = [m["id"] for m in models.get("data", [])]
        if names != ["demo"]:
            failures.append(f"/v1/models lists {names}, expected the demo model")
        rng = random.Random(int(time.time()))
        pools = pl.Pools()
        for i, op in enumerate(["+", "-", "+"]):
            sample = tasks.generate(rng, "heldout", pools, {"+": "add", "-": "sub"}[op], eval_form=True)
            question = sample.messages[0]["content"]
            want = sample.expect["value"]
            body = {"messages": [{"role": "user", "content": question}], "max_tokens": 400, "temperature": 0}
            if i == 2:
                body["stream"] = True
                text = post(url + "/v1/chat/completions", body)
                content = "".join((json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("content") or ""
                                  for line in text.splitlines()
                                  if line.startswith("data: ") and line != "data: [DONE]")
            else:
                reply = json.loads(post(url + "/v1/chat/completions", body))
                content = reply["choices"][0]["message"].get("content") or ""
            numbers = re.findall(r"-?\d+", content)
            ok = bool(numbers) and int(numbers[-1]) == want
            print(f"{question!r} -> {content.strip()!r} ({'ok' if ok else 'WRONG, expected ' + str(want)})")
            if not ok:
                failures.append(f"{question!r}: answered {content.strip()!r}, expected {want}")
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    for f in failures:
        print("FAIL:", f)
    print(f"default model test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
