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
MTP speculation: voltserve's `usage.speculative` (drafted/accepted tokens and per position; `--speculative-k K`
sends `speculative_k` with every request, e.g. 3 for the issue's "mean tokens per round at k = 3"), else
`/metrics` lines about speculation; a server that does not speculate is reported as such.

  python3 tools/demo/evaluate.py --model DIR [--voltserve build/voltserve] [--n 100 | --quick] [--json-out F]
  python3 tools/demo/evaluate.py --url http://127.0.0.1:8000 [...]

Exit code 0 when every family meets its threshold, 1 otherwise, 2 on a setup error. tests/demo/CMakeLists.txt
registers `--quick` on the committed models/demo/ (demo_eval_quick).
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


class SpecTotals:
    """Sums of voltserve's usage.speculative over the requests."""

    def __init__(self):
        self.drafted = self.accepted = 0
        self.drafted_pos, self.accepted_pos = [], []
        self.reported = False

    def add(self, usage):
        spec = (usage or {}).get("speculative")
        if not isinstance(spec, dict):
            return
        self.reported = True
        self.drafted += int(spec.get("drafted_tokens", 0))
        self.accepted += int(spec.get("accepted_tokens", 0))
        for total, part in ((self.drafted_pos, spec.get("drafted_per_position") or []),
                            (self.accepted_pos, spec.get("accepted_per_position") or [])):
            total.extend([0] * (len(part) - len(total)))
            for i, v in enumerate(part):
                total[i] += int(v)

    def summary(self):
        per_pos = [a / d if d else 0.0 for a, d in zip(self.accepted_pos, self.drafted_pos)]
        rounds = self.drafted_pos[0] if self.drafted_pos else 0
        # Every drafting round yields its accepted drafts plus the verify step's own token.
        per_round = 1 + self.accepted / rounds if rounds else None
        return {"drafted": self.drafted, "accepted": self.accepted, "acceptance_per_position": per_pos,
                "rounds": rounds, "mean_tokens_per_round": per_round}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running voltserve serve")
    where.add_argument("--model", help="start `voltserve serve --model DIR` for the evaluation")
    ap.add_argument("--voltserve", default=os.path.join(REPO, "build", "voltserve"))
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for voltserve serve")
    ap.add_argument("--n", type=int, default=100, help="questions per family")
    ap.add_argument("--quick", action="store_true",
                    help="CI's short form: 5 questions per arithmetic family, 20 per extraction / tool family (at a "
                         "95%% threshold 5 questions would allow no miss at all; 20 allow one)")
    ap.add_argument("--families", default=",".join(THRESHOLDS))
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--speculative-k", help="send speculative_k (an integer or auto) with every request")
    ap.add_argument("--show-failures", type=int, default=3, help="failures printed per family")
    ap.add_argument("--json-out", help="write the results here")
    args = ap.parse_args()
    def n_for(family):
        if not args.quick:
            return args.n
        return 20 if THRESHOLDS[family] >= 0.95 else 5
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
        results, spec = {}, SpecTotals()
        gen_tokens, gen_seconds = 0, 0.0
        for fam in families:
            ok_count, failures = 0, []
            for _ in range(n_for(fam)):
                sample = tasks.generate(rng, "heldout", pools, fam, eval_form=True)
                body = {"model": model_name, "messages": sample.messages[:-1], "temperature": 0,
                        "max_tokens": args.max_tokens}
                if sample.tools:
                    body["tools"] = sample.tools
                if args.speculative_k is not None:
                    body["speculative_k"] = args.speculative_k if args.speculative_k == "auto" else int(args.speculative_k)
                t0 = time.time()
                resp = post(url + "/v1/chat/completions", body, args.timeout)
                dt = time.time() - t0
                usage = resp.get("usage") or {}
                gen_tokens += usage.get("completion_tokens", 0)
                gen_seconds += dt
                spec.add(usage)
                ok, why = score(sample, resp["choices"][0]["message"])
                ok_count += ok
                if not ok:
                    failures.append({"question": sample.messages[-2]["content"], "why": why,
                                     "finish_reason": resp["choices"][0].get("finish_reason")})
            n = n_for(fam)
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
        if spec.reported:
            sm = spec.summary()
            tpr = f"{sm['mean_tokens_per_round']:.2f}" if sm["mean_tokens_per_round"] else "n/a"
            print(f"speculation: {sm['accepted']}/{sm['drafted']} drafts accepted over {sm['rounds']} rounds, "
                  f"mean {tpr} tokens per round; per position "
                  + " ".join(f"{100 * a:.0f}%" for a in sm["acceptance_per_position"]))
        elif metrics_lines:
            print("speculation (from /metrics):\n  " + "\n  ".join(metrics_lines))
        else:
            print("speculation: not reported by this server")
        out = {"model": model_name, "url": url, "seed": args.seed, "families": results,
               "decode_tokens_per_s": tps, "speculation": spec.summary() if spec.reported else None,
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
