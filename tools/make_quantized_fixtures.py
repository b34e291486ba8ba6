#!/usr/bin/env python3
"""Builds quantized variants of a tiny BF16 fixture model, with transformers reference logits on the DEQUANTIZED
weights, so the CPU engine can be golden-tested on quantized checkpoints (MODEL.md §5).

From tests/fixtures/models/tiny-untied-sharded (made by tools/make_fixtures.py) it writes:

  tests/fixtures/models/tiny-modelopt-nvfp4-mixed/   ModelOpt export, quant_algo MIXED_PRECISION
      mlp.{gate,up,down}_proj and lm_head    NVFP4 W4A16  (weight U8 [n,k/2], weight_scale E4M3 [n,k/16],
                                                           weight_scale_2 F32 scalar)
      self_attn.{q,k,v,o}_proj,
      linear_attn.{in_proj_qkv,in_proj_z,out_proj}  FP8 per-tensor (weight E4M3 [n,k], weight_scale and
                                                           input_scale F32 scalars)
      linear_attn.in_proj_{a,b}, conv1d, norms, embeddings: BF16/F32 as in the source
      hf_quant_config.json (quantized_layers) + config.json quantization_config (ModelOpt's converted form)
  tests/fixtures/models/tiny-ct-nvfp4/               compressed-tensors nvfp4-pack-quantized, NVFP4A16
      every Linear but lm_head: weight_packed U8, weight_scale E4M3, weight_global_scale F32 (= 1/multiplier)

Quantization follows ModelOpt's NVFP4 recipe (global = amax/(6·448); block scale = block_amax/(6·global) clamped to
[2^-9, 448] and cast to E4M3; codes = nearest E2M1 of w/(scale·global); low nibble = even k) and per-tensor FP8
(scale = amax/448). The reference model is the source model with each quantized Linear's weight replaced by
exactly what voltserve's dequantize() computes: (e2m1 · e4m3) · multiplier in fp32, where the multiplier is
weight_scale_2 (ModelOpt) or fp32(1 / weight_global_scale) (compressed-tensors); fp8 · scale for FP8. Activations
are not quantized (weight-only reference, like linear_ref). reference.json has the layout of make_fixtures.py's.

Usage: python3 tools/make_quantized_fixtures.py [--src tests/fixtures/models/tiny-untied-sharded] [--out DIR]
Needs torch, transformers >= 5.2 and safetensors. CI does not run this; the outputs are committed.
"""
import argparse
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The reference computation is the one the BF16 fixtures use.
from make_fixtures import (N_GREEDY, MIN_GREEDY_MARGIN, REPO, check_positions, full_logits, greedy,  # noqa: E402
                           require_transformers)
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E4M3_MAX = 448.0
E2M1_MAX = 6.0


# ---------------------------------------------------------------- formats

def quantize_nvfp4(w):
    """w: [n, k] fp32 -> (codes u8 [n, k/2], scales e4m3 [n, ceil(k/16)], global fp32 scalar)."""
    n, k = w.shape
    assert k % 2 == 0
    n_groups = (k + 15) // 16
    padded = torch.zeros(n, n_groups * 16)
    padded[:, :k] = w
    blocks = padded.view(n, n_groups, 16)
    global_scale = (w.abs().max() / (E2M1_MAX * E4M3_MAX)).float()
    block_amax = blocks.abs().amax(dim=-1)
    scale = (block_amax / (E2M1_MAX * global_scale)).clamp(2.0 ** -9, E4M3_MAX).to(torch.float8_e4m3fn)
    denom = scale.float().unsqueeze(-1) * global_scale
    x = (blocks / denom).clamp(-E2M1_MAX, E2M1_MAX)
    # nearest magnitude in the E2M1 grid (ties to the lower magnitude: deterministic, any rule is a valid encoding)
    mag = torch.argmin((x.abs().unsqueeze(-1) - E2M1).abs(), dim=-1)
    code = (mag | ((x < 0).long() << 3)).view(n, n_groups * 16)[:, :k].to(torch.uint8)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)  # even k in the low nibble
    return packed.contiguous(), scale.contiguous(), global_scale


def dequantize_nvfp4(packed, scale, multiplier):
    """Exactly voltserve's dequantize_row: (e2m1 * e4m3) * multiplier in fp32."""
    n, half = packed.shape
    k = half * 2
    codes = torch.empty(n, k, dtype=torch.long)
    codes[:, 0::2] = (packed & 0x0F).long()
    codes[:, 1::2] = (packed >> 4).long()
    vals = E2M1[codes & 7] * torch.where(codes >= 8, -1.0, 1.0)
    s = scale.float().repeat_interleave(16, dim=1)[:, :k]
    return (vals * s) * torch.tensor(multiplier, dtype=torch.float32)


def quantize_fp8(w):
    scale = (w.abs().max() / E4M3_MAX).float()
    q = (w / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_fp8(q, scale):
    return q.float() * scale.float()


# ---------------------------------------------------------------- model helpers

def load_source_tensors(src):
    index = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        with safe_open(os.path.join(src, f), "pt") as fh:
            for name in fh.keys():
                tensors[name] = fh.get_tensor(name)
    return tensors


def linear_modules(cfg):
    """(module, kind) for every Linear of the text model; kind in {mlp, attn, gdn_big, gdn_ab, lm_head}."""
    out = []
    for i, lt in enumerate(cfg["layer_types"]):
        p = f"model.layers.{i}."
        if lt == "full_attention":
            out += [(p + f"self_attn.{x}_proj", "attn") for x in "qkvo"]
        else:
            out += [(p + f"linear_attn.{x}", "gdn_big") for x in ("in_proj_qkv", "in_proj_z", "out_proj")]
            out += [(p + f"linear_attn.{x}", "gdn_ab") for x in ("in_proj_a", "in_proj_b")]
        out += [(p + f"mlp.{x}_proj", "mlp") for x in ("gate", "up", "down")]
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head", "lm_head"))
    return out


def reference_entries(model, prompts):
    entries = []
    for ids, positions in prompts:
        logits = full_logits(model, ids)
        cont, margin = greedy(model, ids, N_GREEDY)
        entries.append(dict(ids=ids, positions=positions,
                            logits=[[float("%.7g" % x) for x in logits[p].tolist()] for p in positions],
                            greedy=cont, greedy_min_margin=margin))
    return entries


# ---------------------------------------------------------------- variants

def modelopt_mixed(cfg, tensors):
    """Returns (tensors to save, {module: dequantized fp32 weight}, hf_quant_config, quantization_config)."""
    out = dict(tensors)
    deq = {}
    layers = {}
    for module, kind in linear_modules(cfg):
        w = tensors[module + ".weight"].float()
        if kind in ("mlp", "lm_head"):
            packed, scale, g = quantize_nvfp4(w)
            out[module + ".weight"] = packed
            out[module + ".weight_scale"] = scale
            out[module + ".weight_scale_2"] = g.reshape(())
            deq[module] = dequantize_nvfp4(packed, scale, float(g))
            layers[module] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
        elif kind in ("attn", "gdn_big"):
            q, s = quantize_fp8(w)
            out[module + ".weight"] = q
            out[module + ".weight_scale"] = s.reshape(())
            # A static activation scale as ModelOpt's FP8 (W8A8) export writes; the reference does not use it.
            out[module + ".input_scale"] = torch.tensor(4.0 / E4M3_MAX, dtype=torch.float32)
            deq[module] = dequantize_fp8(q, s)
            layers[module] = {"quant_algo": "FP8"}
        # gdn_ab stays BF16: not listed, so unquantized in MIXED_PRECISION mode
    hf_quant = {"producer": {"name": "modelopt", "version": "tools/make_quantized_fixtures.py"},
                "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
                                 "quantized_layers": layers}}
    qc = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "ignore": [], "kv_cache_scheme": None,
          "producer": hf_quant["producer"], "quantized_layers": layers,
          "config_groups": {
              "group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}, "input_activations": None,
                          "targets": sorted(m for m, l in layers.items() if l["quant_algo"] == "W4A16_NVFP4")},
              "group_1": {"weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"},
                          "targets": sorted(m for m, l in layers.items() if l["quant_algo"] == "FP8")}}}
    return out, deq, hf_quant, qc


def compressed_tensors_nvfp4(cfg, tensors):
    out = dict(tensors)
    deq = {}
    for module, kind in linear_modules(cfg):
        if kind == "lm_head":
            continue
        w = tensors[module + ".weight"].float()
        packed, scale, g = quantize_nvfp4(w)
        del out[module + ".weight"]
        gs = (torch.tensor(1.0, dtype=torch.float32) / g).reshape(1)  # compressed-tensors stores the divisor
        out[module + ".weight_packed"] = packed
        out[module + ".weight_scale"] = scale
        out[module + ".weight_global_scale"] = gs
        multiplier = float(torch.tensor(1.0, dtype=torch.float32) / gs[0])  # what voltserve computes: 1.0f / gs
        deq[module] = dequantize_nvfp4(packed, scale, multiplier)
    qc = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "quantization_status": "compressed",
          "config_groups": {"group_0": {
              "targets": ["Linear"], "format": "nvfp4-pack-quantized", "input_activations": None,
              "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
                          "symmetric": True, "dynamic": False, "scale_dtype": "torch.float8_e4m3fn"}}},
          "ignore": ["lm_head"], "kv_cache_scheme": None}
    return out, deq, None, qc


VARIANTS = {
    "tiny-modelopt-nvfp4-mixed": modelopt_mixed,
    "tiny-ct-nvfp4": compressed_tensors_nvfp4,
}


def write_variant(name, make, src, out_root):
    cfg = json.load(open(os.path.join(src, "config.json")))
    tensors = load_source_tensors(src)
    saved, deq, hf_quant, qc = make(cfg, tensors)

    # Reference model: the source with the dequantized weights in place (fp32, eager).
    model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    params = dict(model.named_parameters())
    max_change = 0.0
    for module, w in deq.items():
        p = params[module + ".weight"]
        assert p.shape == w.shape, (module, p.shape, w.shape)
        max_change = max(max_change, float((p.data - w).abs().max()))
        with torch.no_grad():
            p.copy_(w)

    src_ref = json.load(open(os.path.join(src, "reference.json")))
    prompts = [(e["ids"], e["positions"]) for e in src_ref["prompts"]]
    entries = reference_entries(model, prompts)
    vocab = cfg["vocab_size"]
    attempt = 0
    while min(e["greedy_min_margin"] for e in entries) < MIN_GREEDY_MARGIN:
        attempt += 1
        if attempt > 20:
            sys.exit(f"{name}: could not find prompts with a clear greedy margin")
        gen = torch.Generator().manual_seed(777 + attempt)
        prompts = []
        for n in (130, 7):
            ids = torch.randint(0, vocab, (n,), generator=gen).tolist()
            prompts.append((ids, check_positions(n)))
        entries = reference_entries(model, prompts)

    out = os.path.join(out_root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    save_file({k: v.contiguous() for k, v in sorted(saved.items())}, os.path.join(out, "model.safetensors"),
              metadata={"format": "pt"})
    cfg_out = dict(cfg)
    cfg_out["quantization_config"] = qc
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg_out, f, indent=2)
    if hf_quant is not None:
        with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
            json.dump(hf_quant, f, indent=2)
    if os.path.exists(os.path.join(src, "generation_config.json")):
        shutil.copy(os.path.join(src, "generation_config.json"), os.path.join(out, "generation_config.json"))

    # The saved codes and scales must decode to exactly the weights the reference used.
    with safe_open(os.path.join(out, "model.safetensors"), "pt") as fh:
        for module, w in deq.items():
            if module + ".weight_packed" in fh.keys():
                gs = fh.get_tensor(module + ".weight_global_scale").reshape(-1)[0]
                got = dequantize_nvfp4(fh.get_tensor(module + ".weight_packed"), fh.get_tensor(module + ".weight_scale"),
                                       float(torch.tensor(1.0, dtype=torch.float32) / gs))
            elif fh.get_tensor(module + ".weight").dtype == torch.uint8:
                got = dequantize_nvfp4(fh.get_tensor(module + ".weight"), fh.get_tensor(module + ".weight_scale"),
                                       float(fh.get_tensor(module + ".weight_scale_2")))
            else:
                got = dequantize_fp8(fh.get_tensor(module + ".weight"), fh.get_tensor(module + ".weight_scale"))
            assert torch.equal(got, w), f"{name}: {module} does not round-trip"

    ref = dict(
        generator=f"tools/make_quantized_fixtures.py from {os.path.relpath(src, REPO)} "
                  f"(transformers {transformers.__version__}, torch {torch.__version__})",
        note="fp32 eager reference of the source model with every quantized Linear replaced by its dequantized "
             "weight (voltserve dequantize() semantics; activations not quantized); layout as make_fixtures.py",
        vocab_size=vocab,
        prompts=entries,
    )
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"{name}: {len(deq)} quantized linears, max |w - dequant(w)| {max_change:.4f}, "
          f"greedy min margin {min(e['greedy_min_margin'] for e in entries):.3f}, written to {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(REPO, "tests/fixtures/models/tiny-untied-sharded"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests/fixtures/models"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    require_transformers()
    for name, make in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        write_variant(name, make, args.src, args.out)


if __name__ == "__main__":
    main()
