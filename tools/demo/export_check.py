#!/usr/bin/env python3
"""Checks a checkpoint written by tools/demo/train.py against voltserve: `voltserve logits` on the CPU backend must
match transformers' fp32 logits on rendered chat prompts (tolerance kCpuVsTransformersLogitsAbs of
tests/support/tolerances.h, as the golden tests), `voltserve generate --chat` must run, and the mtp.* weights must
load into tools/mtp.py's independent reference head (the one issue 21's engine MTP is tested against) and compute
what train.py's training head computes. Used by tests/demo/train_smoke_test.py; run it on a trained model too:

  python3 tools/demo/export_check.py --model DIR [--voltserve build/voltserve]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

import data  # noqa: E402
import pools as pl  # noqa: E402
import tasks  # noqa: E402
import train  # noqa: E402
from mtp import MtpConfig, MtpKvCache, Qwen35Mtp  # noqa: E402

LOGITS_ABS = 1e-3  # tests/support/tolerances.h kCpuVsTransformersLogitsAbs
MTP_ABS = 1e-4


def prompts(n, seed):
    rng = random.Random(seed)
    pools = pl.Pools()
    fams = ["add", "mul", "person", "weather", "smalltalk"]
    return [data.sample_texts(tasks.generate(rng, "heldout", pools, fams[i % len(fams)], eval_form=True))[0]
            for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--voltserve", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "voltserve"))
    ap.add_argument("--n", type=int, default=3, help="prompts to compare")
    ap.add_argument("--last", type=int, default=4, help="positions compared per prompt")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import transformers
    failures = []
    if not os.access(args.voltserve, os.X_OK):
        print(f"export_check: no voltserve binary at {args.voltserve}", file=sys.stderr)
        return 2

    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    tok = data.load_tokenizer(args.model if os.path.exists(os.path.join(args.model, "tokenizer.json"))
                              else data.TOKENIZER_DIR)
    worst = 0.0
    for text in prompts(args.n, 3):
        ids = tok.encode(text, add_special_tokens=False).ids
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([ids])).logits[0, -args.last:]
        out = subprocess.run([args.voltserve, "logits", "--model", args.model, "--ids", ",".join(map(str, ids)),
                              "--last", str(args.last), "--backend", "cpu", "--threads", "1"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            failures.append(f"voltserve logits failed: {out.stderr[-500:]}")
            break
        got = torch.tensor(json.loads(out.stdout)["logits"])
        if got.shape != ref.shape:
            failures.append(f"voltserve logits shape {tuple(got.shape)} != transformers {tuple(ref.shape)}")
            break
        err = float((got - ref).abs().max())
        worst = max(worst, err)
        if err > LOGITS_ABS:
            failures.append(f"logits differ by {err:.2e} (> {LOGITS_ABS}) on a {len(ids)}-token prompt")
    if not failures:
        print(f"logits: voltserve cpu vs transformers fp32, max abs diff {worst:.2e} over {args.n} prompts")

    out = subprocess.run([args.voltserve, "generate", "--model", args.model, "--chat", "--prompt", "What is 2 + 3?",
                          "--max-tokens", "8", "--temperature", "0", "--backend", "cpu", "--threads", "1"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"voltserve generate --chat failed: {out.stderr[-500:]}")
    else:
        print(f"generate --chat: ok ({out.stdout.strip()[:60]!r})")

    # issue 21's loader takes the mtp.* tensors: speculative decoding must run and give the plain greedy output.
    spec = subprocess.run([args.voltserve, "generate", "--model", args.model, "--chat", "--prompt", "What is 2 + 3?",
                           "--max-tokens", "8", "--temperature", "0", "--backend", "cpu", "--threads", "1",
                           "--speculative-k", "3"], capture_output=True, text=True)
    if spec.returncode != 0:
        failures.append(f"voltserve generate --speculative-k 3 failed: {spec.stderr[-500:]}")
    elif out.returncode == 0 and spec.stdout != out.stdout:
        failures.append(f"speculative output {spec.stdout!r} differs from plain greedy {out.stdout!r}")
    else:
        m = re.search(r"speculative: (\d+) of (\d+) drafts", spec.stderr)
        if not m or int(m.group(2)) == 0:
            failures.append(f"generate --speculative-k 3 drafted nothing: {spec.stderr[-300:]!r}")
        else:
            print(f"generate --speculative-k 3: the MTP head loads and drafts ({m.group(1)} of {m.group(2)} "
                  f"accepted); output equals plain greedy")

    cfg, main_sd, mtp_sd, _ = train.load_checkpoint(args.model)
    with open(os.path.join(args.model, "config.json")) as f:
        raw = json.load(f)
    if raw.get("mtp_num_hidden_layers") != 1 or raw.get("mtp_use_dedicated_embeddings") is not False:
        failures.append(f"config.json mtp fields: {raw.get('mtp_num_hidden_layers')}, "
                        f"{raw.get('mtp_use_dedicated_embeddings')}")
    ref_head = Qwen35Mtp(MtpConfig(cfg), mtp_sd)  # asserts all 15 MODEL.md tensors are there
    head = train.MtpHead(cfg)
    head.load_state_dict(mtp_sd)
    ids = tok.encode(prompts(1, 5)[0], add_special_tokens=False).ids
    with torch.no_grad():
        h = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        T = len(ids) - 1
        cache = MtpKvCache(ref_head.cfg, T)
        embed = model.model.embed_tokens.weight
        ref_h, _ = ref_head.forward(embed, model.lm_head.weight, ids[1:], h[:T], list(range(T)), cache)
        got_h = head(embed[torch.tensor(ids[1:])][None], h[:T][None], torch.arange(T))[0]
    err = float((ref_h - got_h).abs().max())
    print(f"mtp: train.py head vs tools/mtp.py reference over {T} positions, max abs diff {err:.2e}")
    if err > MTP_ABS:
        failures.append(f"MTP heads differ by {err:.2e}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
