#!/usr/bin/env python3
"""Smoke test of tools/demo/train.py on the CPU: trains a micro model for a few steps (the loss must fall), checks
the checkpoint (files under 16 MiB, the real tensor naming with 15 mtp.* tensors and no lm_head, config fields),
resumes from it, and runs tools/demo/export_check.py: voltserve loads it and its CPU logits match transformers', and
the MTP weights load into tools/mtp.py's reference head. Run by ctest (demo_train_smoke); exits 77 (ctest: skipped)
when torch or transformers is not installed."""
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.environ.get("VOLTSERVE_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "tools", "demo", "train.py")
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def run_train(out, *extra):
    cmd = [sys.executable, TRAIN, "--out", out, "--preset", "micro", "--batch", "2", "--seq-len", "256",
           "--workers", "0", "--threads", "1", "--warmup", "2", "--log-every", "1", "--lr", "3e-3", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if not check(p.returncode == 0, f"train.py {' '.join(extra)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"):
        return None
    return [float(x) for x in re.findall(r"^step\s+\d+\s+loss (\S+)", p.stdout, re.M)], p.stdout


def main():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    binary = os.environ.get("VOLTSERVE_BINARY", os.path.join(REPO, "build", "voltserve"))
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        r = run_train(a, "--steps", "10")
        if r:
            losses, log = r
            check(len(losses) == 10, f"expected 10 logged steps, got {len(losses)}")
            check(losses and sum(losses[-3:]) / 3 < losses[0] - 0.3,
                  f"the loss did not fall: {losses}")
            check(re.search(r"[\d,]+ tok/s", log), "no tokens/s in the log")
            with open(os.path.join(a, "model.safetensors.index.json")) as f:
                wmap = json.load(f)["weight_map"]
            mtp = [k for k in wmap if k.startswith("mtp.")]
            check(len(mtp) == 15, f"{len(mtp)} mtp.* tensors, expected 15: {mtp}")
            check("lm_head.weight" not in wmap, "a tied model must not store lm_head.weight")
            check("model.embed_tokens.weight" in wmap and any(".linear_attn.A_log" in k for k in wmap)
                  and any(".self_attn.q_proj.weight" in k for k in wmap), "model.* naming missing")
            for fname in set(wmap.values()):
                size = os.path.getsize(os.path.join(a, fname))
                check(size < 16 * 1024 * 1024, f"{fname} is {size} bytes (the device returns files < 16 MiB)")
            with open(os.path.join(a, "config.json")) as f:
                cfg = json.load(f)
            check(cfg.get("mtp_num_hidden_layers") == 1 and cfg.get("tie_word_embeddings") is True
                  and cfg.get("layer_types", [])[:4] == ["linear_attention"] * 3 + ["full_attention"],
                  f"config.json: {cfg}")
            for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
                check(os.path.exists(os.path.join(a, name)), f"{name} not written")

            r2 = run_train(b, "--resume", a, "--steps", "2", "--no-tokenizer-files")
            if r2:
                with open(os.path.join(b, "train_state.json")) as f:
                    st = json.load(f)
                check(st["step"] == 12 and len(st["runs"]) == 2 and st["chunks"] == 2,
                      f"resumed state {st} (expected step 12, 2 runs, 2 data chunks)")
                check(r2[0] and r2[0][0] < losses[0] - 0.3, f"the resumed run starts from scratch: {r2[0]} vs {losses}")

            p = subprocess.run([sys.executable, os.path.join(REPO, "tools", "demo", "export_check.py"), "--model", a,
                                "--voltserve", binary], capture_output=True, text=True)
            print(p.stdout.strip())
            check(p.returncode == 0, f"export_check failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    for f in FAILURES:
        print("FAIL:", f)
    print(f"demo train smoke test: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
