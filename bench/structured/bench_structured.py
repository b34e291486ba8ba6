"""Structured-output cost: decode tokens/s of a real `voltserve serve` with and without a JSON schema (--schema:
bounded strings, free strings, enums) at 1 and 16 concurrent requests (--batches), the mask time per token from
/metrics (the mask threads' time, and how long the engine waited for them once the step was launched), and the engine
steps, time to first token and inter-token latency of both arms. Every request generates exactly max_tokens (ignore_eos; the schema is long enough never to complete), so
both runs decode the same number of tokens. By default the CPU fixture model (tests/e2e/harness.py); on a GPU, a
27B-shaped synthetic checkpoint with a real tokenizer:
  python3 bench/structured/bench_structured.py [--tokens 128] [--rounds 2]   (needs build/voltserve)
  voltserve synth --config config/models/qwen3.5-27b-nvfp4-head.json --format nvfp4 --out /tmp/s27 \
      --tokenizer tests/fixtures/tokenizers/qwen3
  python3 bench/structured/bench_structured.py --model /tmp/s27 --backend cuda"""
import argparse
import concurrent.futures
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "e2e"))
from harness import Server  # noqa: E402

def records(name):
    """An array of records long enough never to complete; `name` is the schema of the records' string field."""
    return {"type": "array", "minItems": 200, "items": {
        "type": "object", "properties": {"id": {"type": "integer"}, "name": name, "ok": {"type": "boolean"}},
        "required": ["id", "name", "ok"], "additionalProperties": False}}


# A bounded string is the slow case of XGrammar's mask fill (its length is part of the grammar's state); a free
# string and an enum are the common ones.
SCHEMAS = {
    "bounded": records({"type": "string", "maxLength": 8}),
    "free": records({"type": "string"}),
    "enum": records({"enum": ["alpha", "beta", "gamma", "delta"]}),
}
def one(srv, tokens, schema, seed):
    body = {"messages": [{"role": "user", "content": "List the records."}], "max_tokens": tokens, "temperature": 1.0,
            "seed": seed, "ignore_eos": True, "chat_template_kwargs": {"enable_thinking": False}}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "records", "schema": schema}}
    status, _, raw = srv.post("/v1/chat/completions", body, timeout=600)
    assert status == 200, raw[:300]
    return json.loads(raw)["usage"]["completion_tokens"]


def run(srv, concurrency, tokens, schema, rounds):
    m0 = srv.metrics()
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        n = sum(ex.map(lambda i: one(srv, tokens, schema, i), range(concurrency * rounds)))
    dt = time.time() - t0
    m1 = srv.metrics()
    d = lambda k: m1.get(k, 0.0) - m0.get(k, 0.0)  # noqa: E731
    masks = d("voltserve_structured_output_masks_total")
    mean = lambda k: d(k + "_sum") / d(k + "_count") if d(k + "_count") else 0.0  # noqa: E731
    return {"tokens": n, "seconds": dt, "tok_s": n / dt, "masks": masks, "steps": d("voltserve_engine_steps_total"),
            "ttft_ms": 1e3 * mean("voltserve_time_to_first_token_seconds"),
            "itl_ms": 1e3 * mean("voltserve_inter_token_latency_seconds"),
            "mask_us": 1e6 * d("voltserve_structured_output_mask_seconds_total") / masks if masks else 0.0,
            "wait_us": 1e6 * d("voltserve_structured_output_mask_wait_seconds_total") / masks if masks else 0.0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", help="model folder to serve (default: the harness's CPU fixture)")
    ap.add_argument("--backend", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--schema", default="bounded", help="comma-separated: " + ", ".join(SCHEMAS) + " (default bounded)")
    ap.add_argument("--batches", default="1,16", help="concurrent requests, comma-separated (default 1,16)")
    a = ap.parse_args()
    schemas = a.schema.split(",")
    for name in schemas:
        if name not in SCHEMAS:
            ap.error(f"--schema: unknown schema {name!r} (one of {', '.join(SCHEMAS)})")
    # Constrained requests never speculate, so neither do the unconstrained ones here: the same decode path.
    extra = ["--max-running", "16", "--backend", a.backend, "--speculative-k", "0"]
    if a.model:
        extra += ["--model", a.model]
    # A 27B checkpoint takes a while to load; the harness's default wait is for the fixtures.
    with Server(*extra, ready_timeout=600 if a.model else 60, context=4096) as srv:
        for concurrency in (int(b) for b in a.batches.split(",")):
            free = run(srv, concurrency, a.tokens, None, a.rounds)
            for name in schemas:
                one(srv, 8, SCHEMAS[name], 0)  # compile the schema once (cached) and warm up
                cons = run(srv, concurrency, a.tokens, SCHEMAS[name], a.rounds)
                loss = 100.0 * (1.0 - cons["tok_s"] / free["tok_s"])
                print(f"batch {concurrency:2d}: unconstrained {free['tok_s']:7.1f} tok/s, json_schema ({name}) "
                      f"{cons['tok_s']:7.1f} tok/s ({loss:+.1f}% loss); mask {cons['mask_us']:.0f} us/token on the "
                      f"worker, {cons['wait_us']:.0f} us/token waited for after the launch ({cons['tokens']} tokens)",
                      flush=True)
                print(f"batch {concurrency:2d} ({name}): engine steps {free['steps']:.0f} / {cons['steps']:.0f}, time to first token "
                      f"{free['ttft_ms']:.1f} / {cons['ttft_ms']:.1f} ms, inter-token latency {free['itl_ms']:.2f} / "
                      f"{cons['itl_ms']:.2f} ms (unconstrained / constrained)", flush=True)


if __name__ == "__main__":
    main()
