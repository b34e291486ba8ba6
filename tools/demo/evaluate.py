#!/usr/bin/env python3
"""Measures the demo model through voltserve, as a user would: freshly generated held-out questions (tasks.py,
eval_form, split "heldout": names, cities and operand pairs the training never saw) sent one chat message each to
/v1/chat/completions, greedy, default template. Scores issue 22's acceptance:

  add / sub / mul   `What is A + B?` ...      the correct number in the reply (the last number of its content)   >= 90%
  person            `Extract the name, age and city as JSON: <sentence>`  valid JSON, exactly those keys, right
                                                                             values                               >= 95%
  weather           `What's the weather in <city>?` with get_weather offered: a tool_calls entry named
                                                                             get_weather with that city           >= 95%

plus decode tokens/s (completion tokens / request time, one request at a time) and, where the server reports it,
MTP speculation (usage.completion_tokens_details accepted/rejected prediction tokens, or /metrics lines about
speculation or drafts; absent until issue 21 lands, and then reported as found).

  python3 tools/demo/evaluate.py --model DIR [--voltserve build/voltserve] [--n 100 | --quick] [--json-out F]
  python3 tools/demo/evaluate.py --url http://127.0.0.1:8000 [...]

Exit code 0 when every family meets its threshold, 1 otherwise, 2 on a setup error. tests/demo/CMakeLists.txt
registers `--quick` on models/demo/ once that folder exists.
"""
import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pools as pl  # noqa: E402
import tasks  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
THRESHOLDS = {"add": 0.90, "sub": 0.90, "mul": 0.90, "person": 0.95, "weather": 0.95}
NUMBER = re.compile(r"-?\d+")


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def get_text(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


class Server:
    """A `voltserve serve` on a free loopback port, stopped on exit."""

    def __init__(self, binary, model, extra):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "serve", "--model", model, "--host", "127.0.0.1", "--port",
                                      str(self.port)] + extra, stdout=self.log, stderr=subprocess.STDOUT)

    def wait(self, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                break
            try:
                if json.loads(get_text(self.url + "/health", 2)).get("status") == "ok":
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.3)
        self.log.seek(0)
        raise RuntimeError("voltserve serve did not become healthy:\n" + self.log.read().decode(errors="replace")[-3000:])

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def score(sample, message):
    """(correct, what was wrong) for one reply `message` (choices[0].message) to `sample`."""
    exp = sample.expect
    content = message.get("content") or ""
    if sample.family in ("add", "sub", "mul"):
        nums = NUMBER.findall(content)
        if not nums:
            return False, f"no number in the content {content[:80]!r}"
        return int(nums[-1]) == exp["value"], f"answered {nums[-1]}, expected {exp['value']}"
    if sample.family == "person":
        try:
            value = json.loads(content.strip())
        except ValueError:
            return False, f"not JSON: {content[:80]!r}"
        if not isinstance(value, dict) or list(sorted(value)) != sorted(exp["keys"]):
            return False, f"keys {sorted(value) if isinstance(value, dict) else type(value).__name__}, expected {sorted(exp['keys'])}"
        return value == exp["value"], f"values {value}, expected {exp['value']}"
    if sample.family == "weather":
        calls = message.get("tool_calls") or []
        if not calls:
            return False, f"no tool call; content {content[:80]!r}"
        fn = calls[0].get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            return False, f"arguments not JSON: {fn.get('arguments')!r}"
        want = exp["calls"][0]
        ok = fn.get("name") == want["name"] and args.get("city") == want["arguments"]["city"]
        return ok, f"called {fn.get('name')}({args}), expected {want['name']}({want['arguments']})"
    raise ValueError(sample.family)


def spec_stats(usage):
    details = (usage or {}).get("completion_tokens_details") or {}
    return {k: details[k] for k in ("accepted_prediction_tokens", "rejected_prediction_tokens") if k in details}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running voltserve serve")
    where.add_argument("--model", help="start `voltserve serve --model DIR` for the evaluation")
    ap.add_argument("--voltserve", default=os.path.join(REPO, "build", "voltserve"))
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for voltserve serve")
    ap.add_argument("--n", type=int, default=100, help="questions per family")
    ap.add_argument("--quick", action="store_true", help="5 questions per family (CI)")
    ap.add_argument("--families", default=",".join(THRESHOLDS))
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--show-failures", type=int, default=3, help="failures printed per family")
    ap.add_argument("--json-out", help="write the results here")
    args = ap.parse_args()
    n = 5 if args.quick else args.n
    families = [f for f in args.families.split(",") if f]
    for f in families:
        if f not in THRESHOLDS:
            ap.error(f"--families: unknown family {f!r} (known: {', '.join(THRESHOLDS)})")

    server = None
    try:
        if args.model:
            if not os.path.exists(args.voltserve):
                print(f"evaluate: no voltserve binary at {args.voltserve}", file=sys.stderr)
                return 2
            server = Server(args.voltserve, args.model, args.serve_arg)
            server.wait(300)
            url = server.url
        else:
            url = args.url.rstrip("/")
        models = json.loads(get_text(url + "/v1/models"))
        model_name = models["data"][0]["id"]
        rng = random.Random(args.seed)
        pools = pl.Pools()
        results, spec = {}, {"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0, "reported": False}
        gen_tokens, gen_seconds = 0, 0.0
        for fam in families:
            ok_count, failures = 0, []
            for _ in range(n):
                sample = tasks.generate(rng, "heldout", pools, fam, eval_form=True)
                body = {"model": model_name, "messages": sample.messages[:-1], "temperature": 0,
                        "max_tokens": args.max_tokens}
                if sample.tools:
                    body["tools"] = sample.tools
                t0 = time.time()
                resp = post(url + "/v1/chat/completions", body, args.timeout)
                dt = time.time() - t0
                usage = resp.get("usage") or {}
                gen_tokens += usage.get("completion_tokens", 0)
                gen_seconds += dt
                for k, v in spec_stats(usage).items():
                    spec[k] += v
                    spec["reported"] = True
                ok, why = score(sample, resp["choices"][0]["message"])
                ok_count += ok
                if not ok:
                    failures.append({"question": sample.messages[-2]["content"], "why": why,
                                     "finish_reason": resp["choices"][0].get("finish_reason")})
            rate = ok_count / n
            results[fam] = {"n": n, "correct": ok_count, "rate": rate, "threshold": THRESHOLDS[fam],
                            "pass": rate >= THRESHOLDS[fam], "failures": failures}
            print(f"{fam:8s} {ok_count:4d}/{n:<4d} {100 * rate:6.1f}%  (>= {100 * THRESHOLDS[fam]:.0f}%)  "
                  f"{'PASS' if rate >= THRESHOLDS[fam] else 'FAIL'}", flush=True)
            for f in failures[: args.show_failures]:
                print(f"           {f['question'][:70]!r}: {f['why'][:150]} [{f['finish_reason']}]")
        metrics_lines = []
        try:
            metrics_lines = [ln for ln in get_text(url + "/metrics").splitlines()
                             if not ln.startswith("#") and re.search(r"spec|draft|accept|mtp", ln)]
        except (urllib.error.URLError, OSError):
            pass
        tps = gen_tokens / gen_seconds if gen_seconds else 0.0
        print(f"decode: {gen_tokens} completion tokens in {gen_seconds:.1f} s of requests = {tps:.1f} tokens/s "
              f"(one request at a time, prefill included)")
        if spec["reported"]:
            acc, rej = spec["accepted_prediction_tokens"], spec["rejected_prediction_tokens"]
            print(f"speculation: {acc} draft tokens accepted, {rej} rejected "
                  f"({100 * acc / max(acc + rej, 1):.1f}% accepted)")
        elif metrics_lines:
            print("speculation (from /metrics):\n  " + "\n  ".join(metrics_lines))
        else:
            print("speculation: not reported by this server")
        out = {"model": model_name, "url": url, "seed": args.seed, "families": results,
               "decode_tokens_per_s": tps, "speculation": spec if spec["reported"] else None,
               "speculation_metrics": metrics_lines}
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(out, f, indent=2)
        passed = all(r["pass"] for r in results.values())
        print("all thresholds met" if passed else "thresholds missed: " +
              ", ".join(f for f, r in results.items() if not r["pass"]))
        return 0 if passed else 1
    except (RuntimeError, urllib.error.URLError, OSError, KeyError, ValueError) as e:
        print(f"evaluate: {e}", file=sys.stderr)
        return 2
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
