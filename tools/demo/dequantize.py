#!/usr/bin/env python3
"""Turns the committed NVFP4 demo model (models/demo) back into a float checkpoint that train.py --resume reads, so
that a later training run can continue from the model as committed (the BF16 training output is not committed).

  python3 tools/demo/dequantize.py --in models/demo --out /tmp/demo-f32

Every NVFP4 linear becomes w = e2m1(code) * e4m3(block scale) * weight_scale_2 in fp32 (the exact values the NVFP4
kernels multiply with); every other tensor is copied as fp32. Written in train.py's layout (config.json without the
quantization_config, model.safetensors.index.json, one weight file, generation_config.json); the optimizer state is
not kept anywhere, so the resumed run starts AdamW afresh (warm-up included). NumPy only (tools/quantize_ref.py's
safetensors reader and e4m3 table). Tested by tests/demo/dequantize_test.py.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from quantize_ref import from_e4m3, read_folder, to_f32, write_safetensors  # noqa: E402

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def dequantize_nvfp4(codes, scales, global_scale):
    """codes uint8 [n, k/2] (element 2j in the low nibble), scales e4m3 [n, k/16], global fp32 -> fp32 [n, k]."""
    n = codes.shape[0]
    values = np.empty((n, codes.shape[1] * 2), dtype=np.float32)
    values[:, 0::2] = E2M1[codes & 0x0F]
    values[:, 1::2] = E2M1[codes >> 4]
    block = np.repeat(from_e4m3(scales), 16, axis=1)
    return (values * block * np.float32(global_scale)).astype(np.float32)


def dequantize_folder(src, dst):
    tensors = read_folder(src)
    out = []
    for name in sorted(tensors):
        if name.endswith(".weight_scale") or name.endswith(".weight_scale_2"):
            continue
        dtype, shape, arr = tensors[name]
        if dtype == "U8":
            base = name[: -len(".weight")]
            s_dtype, _, scales = tensors[base + ".weight_scale"]
            g_dtype, _, g = tensors[base + ".weight_scale_2"]
            if s_dtype != "F8_E4M3" or g_dtype != "F32":
                raise ValueError(f"{name}: not an NVFP4 weight (scales {s_dtype}, global {g_dtype})")
            w = dequantize_nvfp4(arr, scales, g.reshape(-1)[0])
        else:
            w = to_f32(dtype, arr)
        out.append((name, "F32", list(w.shape), w))
    os.makedirs(dst, exist_ok=True)
    fname = "model-00001-of-00001.safetensors"
    write_safetensors(os.path.join(dst, fname), out)
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(w.nbytes for *_, w in out)},
                   "weight_map": {name: fname for name, *_ in out}}, f, indent=2)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("quantization_config", None)
    cfg["dtype"] = "float32"
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), os.path.join(dst, extra))
    return len(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--in", dest="src", required=True, help="an NVFP4 folder (voltserve quantize --format nvfp4)")
    ap.add_argument("--out", required=True, help="the float folder to write")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.src, "hf_quant_config.json")):
        sys.exit(f"dequantize: {args.src} has no hf_quant_config.json (not a quantized folder)")
    n = dequantize_folder(args.src, args.out)
    print(f"dequantize: {n} tensors (fp32) in {args.out}")


if __name__ == "__main__":
    main()
