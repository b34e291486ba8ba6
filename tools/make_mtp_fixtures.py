#!/usr/bin/env python3
"""Builds the tiny Qwen3.5 fixture models WITH an MTP head (tests/fixtures/models/tiny-mtp*) and their references.

The main model is made exactly as tools/make_fixtures.py makes its fixtures (every parameter random, bf16-rounded,
saved by transformers' save_pretrained); the 15 mtp.* tensors (MODEL.md 4.1) are added to model.safetensors
afterwards (transformers ignores them on load) and config.json gets mtp_num_hidden_layers = 1. The vocabulary is
small (96) so that sampled-output distributions can be tested with few runs.

  tiny-mtp       random mtp.* weights (drafts rarely accepted: the rejection and correction paths);
  tiny-mtp-copy  the MTP layer copies the main model's full-attention layer, its fc passes the token embedding
                 through (the hidden half small), mtp.norm copies the final norm, and the main model's residual
                 branches are damped: the main model is close to a bigram model that the MTP head reproduces, so
                 acceptance is high and long accepted runs are exercised.

reference.json holds what make_fixtures.py writes (fp32 logits at positions of one forward, a greedy continuation)
plus, per prompt, "mtp": draft logits of the teacher-forced MTP pass over the prompt (pair (h_i, x_{i+1}) at
position i, tools/mtp.py) at chosen positions, and a greedy draft chain of MTP_CHAIN steps from the prompt's end
(first step (h_{n-1}, x_n) with x_n the main model's greedy token), with its logits and tokens.

--add-to DIR adds random mtp.* weights to a fixture folder and leaves its other tensors as they are:
tests/fixtures/models/tiny-chat-mtp is a copy of tiny-chat's config.json and model.safetensors (made by
tools/make_fixtures.py; the tokenizer files are links to tiny-chat's) given an MTP head this way, so the e2e_spec_*
suites serve a speculating model while tiny-chat stays as it is.

Usage: python3 tools/make_mtp_fixtures.py [--out tests/fixtures/models] [--only NAME ...]
       python3 tools/make_mtp_fixtures.py --add-to tests/fixtures/models/tiny-chat-mtp
Needs transformers >= 5.2, torch (CPU) and safetensors. CI does not run this; the outputs are committed.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file

import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
from mtp import MtpConfig, MtpKvCache, Qwen35Mtp, mtp_tensor_shapes  # noqa: E402

MTP_CHAIN = 6
VOCAB = 96

MODELS = {
    "tiny-mtp": dict(
        text=dict(vocab_size=VOCAB, tie_word_embeddings=True,
                  layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"]),
        copy=False),
    "tiny-mtp-copy": dict(
        text=dict(vocab_size=VOCAB, tie_word_embeddings=False, linear_num_value_heads=6,
                  layer_types=["linear_attention"] * 3 + ["full_attention"],
                  rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}),
        copy=True),
}
# tiny-mtp-copy: the main model's residual branches (o_proj, out_proj, down_proj) are scaled by this.
DAMP = 0.11


def random_mtp_state(cfg, gen):
    state = {}
    for name, shape in mtp_tensor_shapes(cfg).items():
        if len(shape) == 1:  # the zero-centred (1+w) norms
            t = 0.3 * torch.randn(shape, generator=gen)
        else:
            t = torch.randn(shape, generator=gen) / shape[1] ** 0.5
        state[name] = t.to(torch.bfloat16).float()
    return state


def copy_mtp_state(model, text_cfg, cfg, gen):
    """fc = [I | small], the layer and mtp.norm copied from the main model (see the module docstring)."""
    full = [i for i, t in enumerate(text_cfg["layer_types"]) if t == "full_attention"][-1]
    sd = model.model.state_dict()
    state = random_mtp_state(cfg, gen)
    H = cfg.hidden
    fc = torch.zeros(H, 2 * H)
    fc[:, :H] = torch.eye(H)
    fc[:, H:] = 0.05 * torch.randn(H, H, generator=gen) / H ** 0.5
    state["fc.weight"] = fc
    state["pre_fc_norm_embedding.weight"] = torch.zeros(H)
    for name in mtp_tensor_shapes(cfg):
        if name.startswith("layers.0."):
            state[name] = sd[f"layers.{full}." + name[len("layers.0."):]].float().clone()
    state["norm.weight"] = sd["norm.weight"].float().clone()
    return {k: v.to(torch.bfloat16).float() for k, v in state.items()}


def damp_residual_branches(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
                p.mul_(DAMP)
                mf.bf16_round_(p)


def final_hidden(model, ids):
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.last_hidden_state[0].float()


def mtp_reference(model, mtp, ids, greedy_next):
    """Teacher-forced draft logits over the prompt and a greedy chain from its end (module docstring)."""
    n = len(ids)
    embed = model.model.embed_tokens.weight.detach()
    head = model.lm_head.weight.detach()
    h = final_hidden(model, ids)
    cache = MtpKvCache(mtp.cfg, n + MTP_CHAIN + 4)
    with torch.no_grad():
        _, lg = mtp.forward(embed, head, ids[1:], h[: n - 1], list(range(n - 1)), cache)
        drafts, chain_logits = mtp.draft_chain(embed, head, h[n - 1], greedy_next, n - 1, MTP_CHAIN, cache)
    positions = [p for p in mf.check_positions(n - 1)]
    margins = [float(torch.topk(c, 2).values[0] - torch.topk(c, 2).values[1]) for c in chain_logits]
    return dict(
        positions=positions,
        logits=[[float("%.7g" % x) for x in lg[p].tolist()] for p in positions],
        chain_next_token=greedy_next,
        chain_drafts=drafts,
        chain_logits=[[float("%.7g" % x) for x in c.tolist()] for c in chain_logits],
        chain_min_margin=min(margins),
    ), lg


def acceptance_at_position_1(model, mtp, ids, continuation):
    """Fraction of positions of prompt + greedy continuation where the MTP's greedy draft equals the main model's
    greedy token two ahead (what a k = 1 round accepts)."""
    seq = list(ids) + list(continuation)
    embed = model.model.embed_tokens.weight.detach()
    head = model.lm_head.weight.detach()
    h = final_hidden(model, seq)
    cache = MtpKvCache(mtp.cfg, len(seq) + 1)
    with torch.no_grad():
        _, lg = mtp.forward(embed, head, seq[1:], h[:-1], list(range(len(seq) - 1)), cache)
        main = mf.full_logits(model, seq).argmax(-1)
    start = len(ids) - 1
    hits = [int(lg[i].argmax()) == int(main[i + 1]) for i in range(start, len(seq) - 2)]
    return sum(hits) / max(1, len(hits))


def add_mtp_tensors(out, state):
    path = os.path.join(out, "model.safetensors")
    tensors = load_file(path)
    for name, t in state.items():
        tensors["mtp." + name] = t.to(torch.bfloat16).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["mtp_num_hidden_layers"] = 1
    cfg["mtp_use_dedicated_embeddings"] = False
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


def write_model(name, spec, out_root, seed):
    text_cfg = mf.base_text_config(**spec["text"])
    model = mf.build_text_model(text_cfg, seed)
    if spec["copy"]:
        damp_residual_branches(model)
    cfg = MtpConfig(text_cfg)
    gen = torch.Generator().manual_seed(seed + 77)
    state = copy_mtp_state(model, text_cfg, cfg, gen) if spec["copy"] else random_mtp_state(cfg, gen)
    mtp = Qwen35Mtp(cfg, state)

    for attempt in range(40):
        prompts = mf.make_prompts(text_cfg["vocab_size"], seed + attempt, [70, 9])
        entries = mf.reference_data(model, prompts)
        if min(e["greedy_min_margin"] for e in entries) < mf.MIN_GREEDY_MARGIN:
            continue
        for e in entries:
            e["mtp"], _ = mtp_reference(model, mtp, e["ids"], e["greedy"][0])
        if min(e["mtp"]["chain_min_margin"] for e in entries) >= mf.MIN_GREEDY_MARGIN:
            break
    else:
        sys.exit(f"{name}: could not find prompts with clear greedy and draft margins")
    acceptance = [acceptance_at_position_1(model, mtp, e["ids"], e["greedy"]) for e in entries]

    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    mf.to_saved_dtypes(model)
    model.save_pretrained(out)
    add_mtp_tensors(out, state)

    # transformers loads the folder back (ignoring mtp.*) and computes the same logits.
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    reloaded.eval()
    for e in entries:
        got = mf.full_logits(reloaded, e["ids"])[e["positions"]]
        err = float((got - torch.tensor(e["logits"])).abs().max())
        assert err < 1e-4, f"{name}: reloaded model differs by {err}"
    # The stored mtp.* tensors reproduce the MTP reference.
    stored = {k[len("mtp."):]: v.float() for k, v in load_file(os.path.join(out, "model.safetensors")).items()
              if k.startswith("mtp.")}
    for e in entries:
        again, _ = mtp_reference(reloaded, Qwen35Mtp(cfg, stored), e["ids"], e["greedy"][0])
        assert again["chain_drafts"] == e["mtp"]["chain_drafts"], f"{name}: stored MTP weights differ"

    ref = dict(
        generator=f"tools/make_mtp_fixtures.py (transformers {transformers.__version__}, torch {torch.__version__})",
        note="fp32 eager reference; logits/greedy as tools/make_fixtures.py; mtp: tools/mtp.py draft logits of the "
             "teacher-forced pass (pair (h_i, x_{i+1}) at position i) at mtp.positions, and a greedy chain of "
             "len(chain_drafts) steps from the prompt's end (first step (h_{n-1}, chain_next_token) at n-1)",
        vocab_size=text_cfg["vocab_size"],
        greedy_acceptance_at_position_1=acceptance,
        prompts=entries,
    )
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"{name}: written to {out}; greedy margin {min(e['greedy_min_margin'] for e in entries):.3f}, "
          f"draft margin {min(e['mtp']['chain_min_margin'] for e in entries):.3f}, "
          f"k=1 acceptance {[round(a, 2) for a in acceptance]}, chain {[e['mtp']['chain_drafts'] for e in entries]}, "
          f"greedy {[e['greedy'][:MTP_CHAIN + 1] for e in entries]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(mf.REPO, "tests/fixtures/models"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--add-to", help="an existing fixture folder: add random mtp.* tensors, nothing else")
    args = ap.parse_args()
    mf.require_transformers()
    if args.add_to:
        with open(os.path.join(args.add_to, "config.json")) as f:
            text_cfg = json.load(f)
        gen = torch.Generator().manual_seed(97531)
        before = load_file(os.path.join(args.add_to, "model.safetensors"))
        add_mtp_tensors(args.add_to, random_mtp_state(MtpConfig(text_cfg), gen))
        after = load_file(os.path.join(args.add_to, "model.safetensors"))
        assert all(torch.equal(before[k], after[k]) for k in before), "existing tensors changed"
        print(f"{args.add_to}: added {len(after) - len(before)} mtp.* tensors")
        return
    os.makedirs(args.out, exist_ok=True)
    for i, (name, spec) in enumerate(MODELS.items()):
        if args.only and name not in args.only:
            continue
        write_model(name, spec, args.out, seed=2468 + 31 * i)


if __name__ == "__main__":
    main()
