#!/usr/bin/env python3
"""Builds the tiny random-weight Qwen3.5 fixture models under tests/fixtures/models/ and their reference data.

Each model is a Qwen3_5ForCausalLM (or, for the multimodal-layout fixture, a Qwen3_5ForConditionalGeneration) with
EVERY parameter randomized (including the zero-centred (1+w) norms, the plain gated norm, A_log, dt_bias and the conv),
rounded to bf16 so the saved BF16 weights are exactly what the fp32 reference used. The folder is written by
transformers' own save_pretrained; reference.json next to it holds fp32 eager logits at chosen positions of one full
forward pass and greedy continuations (each step is a fresh full forward, no cache).

Usage: python3 tools/make_fixtures.py [--out tests/fixtures/models] [--only NAME ...]
Needs transformers >= 5.2 and torch (CPU is enough). CI does not run this; the outputs are committed.
"""
import argparse
import json
import os
import shutil
import sys

import torch

import transformers
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_GREEDY = 24
# A greedy step whose top-2 logits are closer than this would make the golden test flaky against a 1e-3 tolerance.
MIN_GREEDY_MARGIN = 2e-2


def base_text_config(**overrides):
    cfg = dict(
        vocab_size=384,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=24,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    cfg.update(overrides)
    return cfg


# name -> (text config overrides, save options)
MODELS = {
    # Tied embeddings, text-only layout, one safetensors file, GDN ratio 2, theta 1e4.
    "tiny-tied": (dict(tie_word_embeddings=True), dict(layout="text", shard=None)),
    # Untied lm_head, sharded (model.safetensors.index.json), GDN ratio 3, theta 1e7 like the real models,
    # the real 3:1 linear/full pattern.
    "tiny-untied-sharded": (
        dict(
            tie_word_embeddings=False,
            linear_num_key_heads=2,
            linear_num_value_heads=6,
            layer_types=["linear_attention"] * 3 + ["full_attention"],
            rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        ),
        dict(layout="text", shard="150KB"),
    ),
    # Multimodal export layout: model_type qwen3_5, nested text_config, tensors under model.language_model.,
    # a (tiny) vision tower that a text engine must ignore.
    "tiny-mm": (
        dict(tie_word_embeddings=False, eos_token_id=[3, 4],
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
        dict(layout="multimodal", shard=None),
    ),
}


def bf16_round_(t):
    t.copy_(t.to(torch.bfloat16).to(t.dtype))


def randomize(model, gen):
    """Overwrites every parameter with a random value of a scale that keeps activations O(1)."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("A_log"):
                a = torch.empty(p.shape).uniform_(0.05, 4.0, generator=gen)
                p.copy_(torch.log(a))
            elif name.endswith("dt_bias"):
                p.copy_(1.0 + 0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("linear_attn.norm.weight"):
                # plain-weight gated norm (init 1, no +1)
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif "norm" in name.split(".")[-2] or name.endswith("norm.weight"):
                # zero-centred (1+w) norms: init 0
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif "conv1d" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                fan_in = p.shape[1]
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)
            else:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            bf16_round_(p)


def full_logits(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.logits[0].float()


def greedy(model, ids, n):
    seq = list(ids)
    new = []
    margins = []
    for _ in range(n):
        last = full_logits(model, seq)[-1]
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        tok = int(torch.argmax(last))
        new.append(tok)
        seq.append(tok)
    return new, min(margins)


def check_positions(n):
    pos = sorted({0, 1, 2, min(6, n - 1), min(63, n - 1), min(64, n - 1), min(65, n - 1), n - 4, n - 3, n - 2, n - 1})
    return [p for p in pos if 0 <= p < n]


def to_saved_dtypes(model):
    """bf16 for everything except A_log and linear_attn.norm.weight, kept F32 as in the official checkpoint."""
    model.to(torch.bfloat16)
    for name, p in model.named_parameters():
        if name.endswith("A_log") or name.endswith("linear_attn.norm.weight"):
            p.data = p.data.float()


def build_text_model(text_cfg, seed):
    cfg = Qwen3_5TextConfig(**text_cfg)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).float().eval()
    gen = torch.Generator().manual_seed(seed)
    randomize(model, gen)
    if cfg.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def make_prompts(vocab, seed, lengths, avoid=()):
    gen = torch.Generator().manual_seed(seed + 1000)
    prompts = []
    for n in lengths:
        ids = torch.randint(0, vocab, (n,), generator=gen).tolist()
        ids = [i if i not in avoid else (i + 7) % vocab for i in ids]
        prompts.append(ids)
    return prompts


def reference_data(model, prompts):
    entries = []
    for ids in prompts:
        logits = full_logits(model, ids)
        positions = check_positions(len(ids))
        cont, margin = greedy(model, ids, N_GREEDY)
        entries.append(dict(
            ids=ids,
            positions=positions,
            logits=[[float("%.7g" % x) for x in logits[p].tolist()] for p in positions],
            greedy=cont,
            greedy_min_margin=margin,
        ))
    return entries


def save_multimodal(text_model, text_cfg, out_dir):
    """Saves the text weights through Qwen3_5ForConditionalGeneration.save_pretrained (prefix model.language_model.)."""
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=text_cfg["hidden_size"], num_position_embeddings=16)
    tc = dict(text_cfg)
    cfg = Qwen3_5Config(text_config=tc, vision_config=vision, tie_word_embeddings=tc["tie_word_embeddings"])
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    mm = Qwen3_5ForConditionalGeneration(cfg).float().eval()
    gen = torch.Generator().manual_seed(99)
    randomize(mm, gen)
    mm.model.language_model.load_state_dict(text_model.model.state_dict())
    mm.lm_head.load_state_dict(text_model.lm_head.state_dict())
    return mm


def write_model(name, text_over, opts, out_root, seed):
    text_cfg = base_text_config(**text_over)
    model = build_text_model(text_cfg, seed)
    avoid = set(text_cfg["eos_token_id"] or []) if isinstance(text_cfg["eos_token_id"], list) else set()
    for attempt in range(20):
        prompts = make_prompts(text_cfg["vocab_size"], seed + attempt, [130, 7], avoid)
        entries = reference_data(model, prompts)
        if min(e["greedy_min_margin"] for e in entries) >= MIN_GREEDY_MARGIN:
            break
    else:
        sys.exit(f"{name}: could not find prompts with a clear greedy margin")

    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    to_save = model
    if opts["layout"] == "multimodal":
        to_save = save_multimodal(model, text_cfg, out)
        # The saved multimodal model must compute what the reference says (its own forward, text-only input).
        for e in entries:
            lg = full_logits(to_save, e["ids"])
            ref = torch.tensor(e["logits"])
            got = lg[e["positions"]]
            assert torch.allclose(got, ref, atol=1e-4), f"{name}: multimodal wrapper disagrees with text model"
    to_saved_dtypes(to_save)
    kwargs = {}
    if opts["shard"]:
        kwargs["max_shard_size"] = opts["shard"]
    to_save.save_pretrained(out, **kwargs)
    if opts["shard"]:
        assert os.path.exists(os.path.join(out, "model.safetensors.index.json")), "expected a sharded save"

    # Round trip: transformers must load the folder back and compute the same logits.
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager")
    reloaded.eval()
    for e in entries:
        got = full_logits(reloaded, e["ids"])[e["positions"]]
        err = float((got - torch.tensor(e["logits"])).abs().max())
        assert err < 1e-4, f"{name}: reloaded model differs by {err}"

    ref = dict(
        generator=f"tools/make_fixtures.py (transformers {transformers.__version__}, torch {torch.__version__})",
        note="fp32 eager reference; logits[i] is the full-vocab row at positions[i] of one forward over ids; "
             "greedy = argmax continuation, each step a full forward without cache",
        vocab_size=text_cfg["vocab_size"],
        prompts=entries,
    )
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"{name}: written to {out}; greedy min margin "
          f"{min(e['greedy_min_margin'] for e in entries):.3f}")


def write_tiny_chat(out_root, seed):
    """The bundled default model: vocab of the qwen35-mini tokenizer, tokenizer files and chat template copied in."""
    tok_dir = os.path.join(REPO, "tests/fixtures/tokenizers/qwen35-mini")
    tmpl = os.path.join(REPO, "tests/fixtures/templates/qwen3_5.jinja")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")) or not os.path.exists(tmpl):
        print("tiny-chat: skipped (tokenizer fixture or template not there yet)")
        return
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    vocab = tok.get_vocab_size(with_added_tokens=True)
    im_end = tok.token_to_id("<|im_end|>")
    eot = tok.token_to_id("<|endoftext|>")
    assert im_end is not None and eot is not None, "qwen35-mini lacks <|im_end|> / <|endoftext|>"
    text_cfg = base_text_config(vocab_size=vocab, tie_word_embeddings=True, eos_token_id=[im_end, eot],
                                bos_token_id=None, pad_token_id=eot,
                                layer_types=["linear_attention"] * 3 + ["full_attention"],
                                linear_num_value_heads=4)
    model = build_text_model(text_cfg, seed)
    out = os.path.join(out_root, "tiny-chat")
    shutil.rmtree(out, ignore_errors=True)
    prompts = make_prompts(vocab, seed, [20], avoid={im_end, eot})
    entries = reference_data(model, prompts)
    to_saved_dtypes(model)
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=None, eos_token_id=[im_end, eot], pad_token_id=eot, do_sample=True, temperature=0.6,
        top_k=20, top_p=0.95)
    model.save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(out, f))
    with open(os.path.join(out, "tokenizer_config.json")) as f:
        tc = json.load(f)
    with open(tmpl) as f:
        tc["chat_template"] = f.read()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)
    ref = dict(generator=f"tools/make_fixtures.py (transformers {transformers.__version__}, torch {torch.__version__})",
               note="fp32 eager reference (see the other fixtures)", vocab_size=vocab, prompts=entries)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"tiny-chat: vocab {vocab}, eos {[im_end, eot]}, written to {out}")


def require_transformers():
    """Exits unless transformers >= 5.2 (Qwen3.5 classes); one torch thread for reproducible references."""
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    if (major, minor) < (5, 2):
        sys.exit(f"transformers >= 5.2 is needed (have {transformers.__version__})")
    torch.set_num_threads(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests/fixtures/models"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    require_transformers()
    os.makedirs(args.out, exist_ok=True)
    for i, (name, (over, opts)) in enumerate(MODELS.items()):
        if args.only and name not in args.only:
            continue
        write_model(name, over, opts, args.out, seed=1234 + 17 * i)
    if not args.only or "tiny-chat" in args.only:
        write_tiny_chat(args.out, seed=4321)


if __name__ == "__main__":
    main()
