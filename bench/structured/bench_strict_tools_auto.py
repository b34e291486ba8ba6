"""Strict tools under tool_choice "auto" on the CPU fixture model: decode tokens/s of a real `voltserve serve` with the
same three tools not strict (nothing constrained) and strict (the triggered tool-call grammar), and the mask time per
token from /metrics. A logit_bias on <tool_call> makes the fixture call tools all the time; every request generates
exactly max_tokens (ignore_eos), so both runs decode the same number of tokens.
  python3 bench/structured/bench_strict_tools_auto.py [--tokens 512] [--requests 8]   (needs build/voltserve)"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "e2e"))
import openai  # noqa: E402

from harness import Server  # noqa: E402
import test_strict_tools_auto as suite  # noqa: E402

METRICS = ["voltserve_structured_output_masks_total", "voltserve_structured_output_mask_seconds_total",
           "voltserve_structured_output_mask_wait_seconds_total"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--requests", type=int, default=8)
    args = ap.parse_args()
    with Server("--max-running", "8", context=4096) as srv:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=300)
        model = client.models.list().data[0].id
        bias = {str(suite.token_id("<tool_call>")): 50}
        for strict, label in [((), "not strict"), (tuple(suite.SCHEMAS), "strict")]:
            before = srv.metrics()
            start, tokens, calls = time.time(), 0, 0
            for seed in range(args.requests):
                r = client.chat.completions.create(
                    model=model, messages=suite.MSG, tools=suite.tools(strict=strict), tool_choice="auto",
                    max_tokens=args.tokens, temperature=1.0, seed=seed, logit_bias=bias,
                    extra_body={**suite.OFF, "ignore_eos": True})
                tokens += r.usage.completion_tokens
                calls += len(r.choices[0].message.tool_calls or [])
            wall = time.time() - start
            after = srv.metrics()
            d = {k: after.get(k, 0) - before.get(k, 0) for k in METRICS}
            masks = d[METRICS[0]] or 1
            print(f"{label}: {tokens} tokens in {wall:.2f} s = {tokens / wall:.0f} tok/s, {calls} tool_calls entries, "
                  f"{d[METRICS[0]]:.0f} masks, mask {1e6 * d[METRICS[1]] / masks:.1f} us/token, "
                  f"wait {1e6 * d[METRICS[2]] / masks:.1f} us/token", flush=True)


if __name__ == "__main__":
    main()
