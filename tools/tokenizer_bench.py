#!/usr/bin/env python3
"""Encode throughput: voltserve's tokenizer (bench/tokenizer/bench_tokenizer) vs HF `tokenizers`, single thread.

Generates a seeded ~1 MB mixed text (English-like prose with many distinct words, code, Chinese, Japanese, Korean,
Russian, Arabic, Hindi, emoji, numbers, whitespace runs), splits it into documents of 1-8 KB, and encodes every
document one by one with each implementation (HF: `Tokenizer.encode`, not encode_batch, with
TOKENIZERS_PARALLELISM=false and RAYON_NUM_THREADS=1). Reports MB/s for the first pass over a fresh tokenizer
(cold cache) and the best of the later passes (by wall time, or by thread CPU time with --cpu-time), checks that both produce the same ids, and prints a Markdown row
for bench/RESULTS.md.

    tools/tokenizer_bench.py --bench build/bench/tokenizer/bench_tokenizer --tokenizer build/fixtures/tokenizers/qwen3
"""
import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

SYLLABLES = ("ka ra to mi ne su lo pe an in on er th st re ch sh qu ex pro con tion ment able ing ed ly ous ive "
             "al ic ist ize ful less ness ward").split()
CODE = [
    "def {n}(self, x, y=None):\n    if y is None:\n        y = x * {d}\n    return [v ** 2 for v in range(y)]\n\n",
    "for (int i = 0; i < {d}; ++i) {{\n\t{n}[i] = std::max({n}[i], 0.5f * i);\n}}\n",
    "const {n} = async (req, res) => {{ const r = await fetch(`/api/{n}?id=${{req.id}}`); return r.json(); }};\n",
    "SELECT {n}, COUNT(*) FROM t_{n} WHERE v > {d} GROUP BY {n};\n",
    "{{\"{n}\": [{d}, {d}.5, true, null], \"nested\": {{\"k\": \"{n}\"}}}}\n",
]


def word(rng):
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))


def prose(rng):
    words = []
    for i in range(rng.randint(8, 30)):
        w = word(rng)
        if i == 0 or rng.random() < 0.05:
            w = w.capitalize()
        words.append(w)
        if rng.random() < 0.06:
            words[-1] += rng.choice([",", ";", ":", "'s", "'ll", "."])
    return " ".join(words) + rng.choice([". ", ".\n", "!\n\n", "? "])


def chars(rng, lo, hi, n):
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def make_text(seed, n_bytes):
    rng = random.Random(seed)
    parts = []
    size = 0
    while size < n_bytes:
        r = rng.random()
        if r < 0.45:
            s = prose(rng)
        elif r < 0.6:
            s = rng.choice(CODE).format(n=word(rng), d=rng.randint(0, 10**6))
        elif r < 0.7:
            s = chars(rng, 0x4E00, 0x62FF, rng.randint(10, 60)) + "。\n"
        elif r < 0.74:
            s = chars(rng, 0x3041, 0x30FA, rng.randint(10, 40)) + "、" + chars(rng, 0x4E00, 0x5FFF, 5) + "\n"
        elif r < 0.77:
            s = " ".join(chars(rng, 0xAC00, 0xB7FF, rng.randint(1, 4)) for _ in range(rng.randint(3, 12))) + ".\n"
        elif r < 0.83:
            s = " ".join(chars(rng, 0x430, 0x44F, rng.randint(2, 9)) for _ in range(rng.randint(5, 15))) + ". "
        elif r < 0.86:
            s = " ".join(chars(rng, 0x627, 0x64A, rng.randint(2, 7)) for _ in range(rng.randint(4, 12))) + ".\n"
        elif r < 0.88:
            s = " ".join(chars(rng, 0x915, 0x939, 3) + "\u093e" for _ in range(rng.randint(3, 8))) + "।\n"
        elif r < 0.92:
            s = " ".join(chars(rng, 0x1F600, 0x1F64F, rng.randint(1, 3)) for _ in range(rng.randint(2, 6))) + " 👨‍👩‍👧\n"
        elif r < 0.96:
            s = " ".join(str(rng.randint(0, 10**rng.randint(1, 9))) for _ in range(rng.randint(3, 10))) + "\n"
        else:
            s = rng.choice(["    ", "\t\t", "\n\n\n", "   \r\n", "        "]) * rng.randint(1, 4)
        parts.append(s)
        size += len(s.encode("utf-8"))
    text = "".join(parts)
    docs = []
    pos = 0
    while pos < len(text):
        n = rng.randint(1000, 8000)
        docs.append(text[pos:pos + n])
        pos += n
    return docs


def hf_bench(tokenizer_dir, docs, repeats):
    from tokenizers import Tokenizer
    t0 = time.perf_counter()
    tok = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    load_s = time.perf_counter() - t0
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    rates, cpu_rates, all_ids = [], [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        c0 = time.thread_time()  # HF encodes in the calling thread when parallelism is off
        ids = [tok.encode(d, add_special_tokens=False).ids for d in docs]
        cpu_rates.append(n_bytes / 1e6 / (time.thread_time() - c0))
        rates.append(n_bytes / 1e6 / (time.perf_counter() - t0))
        all_ids = all_ids or ids
    return {"impl": "hf", "bytes": n_bytes, "tokens": sum(map(len, all_ids)), "load_s": load_s,
            "cold_mb_s": rates[0], "warm_mb_s": max(rates[1:]), "cold_cpu_mb_s": cpu_rates[0],
            "warm_cpu_mb_s": max(cpu_rates[1:])}, all_ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="bench_tokenizer executable")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--bytes", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--cpu-time", action="store_true",
                    help="rate by thread CPU time instead of wall time (for a busy shared machine)")
    args = ap.parse_args()

    docs = make_text(args.seed, args.bytes)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
        path = f.name
    try:
        p = subprocess.run(["taskset", "-c", "0", args.bench, args.tokenizer, path, str(args.repeats)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            p = subprocess.run([args.bench, args.tokenizer, path, str(args.repeats)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"bench_tokenizer failed: {p.stderr}")
        ours = json.loads(p.stdout)
    finally:
        os.unlink(path)
    hf, hf_ids = hf_bench(args.tokenizer, docs, args.repeats)
    if ours["tokens"] != hf["tokens"]:
        sys.exit(f"token counts differ: voltserve {ours['tokens']} vs HF {hf['tokens']}")

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import tokenizers
    print(json.dumps({"voltserve": ours, "hf": hf}, indent=1))
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    key = "cpu_mb_s" if args.cpu_time else "mb_s"
    c, w = "cold_" + key, "warm_" + key
    print(f"| {date} | {cpu}, {platform.system()}, {os.cpu_count()} cores | {commit} | {Path(args.tokenizer).name} | "
          f"{'thread CPU' if args.cpu_time else 'wall'} | {ours['bytes'] / 1e6:.2f} MB, {len(docs)} docs, "
          f"{ours['tokens']} tokens | {ours[c]:.1f} / {ours[w]:.1f} | {hf[c]:.1f} / {hf[w]:.1f} "
          f"(tokenizers {tokenizers.__version__}) | {ours[c] / hf[c]:.2f}x / {ours[w] / hf[w]:.2f}x | "
          f"{ours['load_s']:.2f} / {hf['load_s']:.2f} |")


if __name__ == "__main__":
    main()
