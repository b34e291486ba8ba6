#!/usr/bin/env python3
"""Reference NVFP4 / FP8 weight quantizer in NumPy, written from ModelOpt's published formulas (MODEL.md §5.2;
modelopt/torch/quantization/qtensor/nvfp4_tensor.py), independent of voltserve's C++ quantizer, to check
`voltserve quantize` bit for bit. Used by tests/model/quantize_ref_test.py.

  NVFP4  global  = amax(W) / (6 * 448)                          (fp32; 1 for an all-zero tensor)
         s_blk   = e4m3(block_amax / (6 * global))               (1.0 for an all-zero block; clamped to [2^-9, 448])
         code    = e2m1(w / (float(s_blk) * global))             (searchsorted on the midpoints, ties to the even code,
                                                                  sign bit = w < 0); element 2j low nibble, 2j+1 high
  FP8    scale   = amax(W) / 448 (1 for all-zero), code = e4m3(w / scale)

e4m3 rounding here searches the table of all 127 finite magnitudes for the nearest (ties to the even code), a
different method from the C++ bit arithmetic. `check` compares every quantized tensor of a quantized folder against
the reference computed from the source folder and prints each mismatch.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

F32 = np.float32
E2M1_BOUNDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)


def e4m3_values():
    """Value of every e4m3fn code 0..126 (positive, finite; 0x7F is NaN), from the bit layout."""
    vals = []
    for c in range(127):
        e, m = c >> 3, c & 7
        vals.append(m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.array(vals, dtype=np.float64)


E4M3 = e4m3_values()


def to_e4m3(x):
    """float32 array -> uint8 e4m3fn codes: nearest finite value (ties to the even code), saturating at 448."""
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(E4M3, a, side="left"), 1, 126)
    lo = hi - 1
    d_lo, d_hi = a - E4M3[lo], E4M3[hi] - a
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a == 0, 0, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def from_e4m3(codes):
    codes = np.asarray(codes, dtype=np.uint8)
    v = E4M3[np.minimum(codes & 0x7F, 126)]
    return np.where(codes & 0x80, -v, v).astype(np.float32)


def to_e2m1(x):
    """ModelOpt's _cast_fp4: ordinal by searchsorted on the bounds, a value equal to an odd-index bound rounds up."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    ordinal = np.searchsorted(E2M1_BOUNDS, a, side="left").astype(np.uint8)
    on_odd_bound = np.zeros(a.shape, dtype=bool)
    for i in (1, 3, 5):
        on_odd_bound |= a == E2M1_BOUNDS[i]
    return ((x < 0).astype(np.uint8) << 3) + ordinal + on_odd_bound.astype(np.uint8)


def quantize_nvfp4(w):
    """w: float32 [n, k], k % 16 == 0 -> (codes uint8 [n, k/2], scales uint8 e4m3 [n, k/16], global float32)."""
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    amax = F32(np.max(np.abs(w))) if w.size else F32(0)
    g = F32(amax / F32(6.0 * 448.0)) if amax > 0 else F32(1.0)
    blocks = w.reshape(n, k // 16, 16)
    bmax = np.max(np.abs(blocks), axis=-1).astype(np.float32)
    want = (bmax / F32(F32(6.0) * g)).astype(np.float32)
    want = np.where(bmax == 0, F32(1.0), np.clip(want, F32(2.0 ** -9), F32(448.0))).astype(np.float32)
    scales = to_e4m3(want)
    step = (from_e4m3(scales) * g).astype(np.float32)
    q = to_e2m1((blocks / step[..., None]).astype(np.float32)).reshape(n, k)
    codes = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    return codes, scales, g


def quantize_fp8(w):
    w = np.asarray(w, dtype=np.float32)
    amax = F32(np.max(np.abs(w))) if w.size else F32(0)
    scale = F32(amax / F32(448.0)) if amax > 0 else F32(1.0)
    return to_e4m3((w / scale).astype(np.float32)), scale


# --- safetensors (read and write, without torch: numpy has no bfloat16) ---

DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2), "U8": (np.uint8, 1),
          "F8_E4M3": (np.uint8, 1), "I32": (np.int32, 4), "I8": (np.int8, 1)}


def read_safetensors(path):
    """{name: (dtype, shape, raw numpy array)}"""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            f.seek(base + b)
            raw = f.read(end - b)
            np_dtype, _ = DTYPES[e["dtype"]]
            out[name] = (e["dtype"], list(e["shape"]), np.frombuffer(raw, dtype=np_dtype).reshape(e["shape"]))
        return out


def read_folder(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(os.path.join(folder, f)))
    return tensors


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, numpy array whose bytes are the data)."""
    header, blobs, off = {}, [], 0
    for name, dtype, shape, arr in tensors:
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def to_f32(dtype, arr):
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    if dtype in ("F16", "F32"):
        return arr.astype(np.float32)
    raise ValueError(f"cannot read {dtype} as float")


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bits (finite inputs)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def check(src, dst):
    """Compare every quantized tensor in `dst` with the reference from `src`; returns the mismatch messages."""
    s, d = read_folder(src), read_folder(dst)
    errors, checked = [], {"NVFP4": 0, "FP8": 0}
    for name in sorted(d):
        if not name.endswith(".weight"):
            continue
        base = name[: -len(".weight")]
        dtype, _, q = d[name]
        if base + ".weight_scale_2" in d:
            codes, scales, g = quantize_nvfp4(to_f32(*(s[name][0], s[name][2])))
            got_g = np.float32(d[base + ".weight_scale_2"][2].reshape(-1)[0])
            if not np.array_equal(q, codes):
                bad = np.argwhere(q != codes)
                errors.append(f"{name}: {len(bad)} NVFP4 code bytes differ, first at {bad[0].tolist()}: "
                              f"got {q[tuple(bad[0])]:#04x}, reference {codes[tuple(bad[0])]:#04x}")
            if not np.array_equal(d[base + ".weight_scale"][2], scales):
                bad = np.argwhere(d[base + ".weight_scale"][2] != scales)
                errors.append(f"{base}.weight_scale: {len(bad)} scales differ, first at {bad[0].tolist()}")
            if got_g.tobytes() != np.float32(g).tobytes():
                errors.append(f"{base}.weight_scale_2: got {got_g!r}, reference {g!r}")
            checked["NVFP4"] += 1
        elif dtype == "F8_E4M3":
            codes, scale = quantize_fp8(to_f32(s[name][0], s[name][2]))
            got = np.float32(d[base + ".weight_scale"][2].reshape(-1)[0])
            if not np.array_equal(q, codes):
                bad = np.argwhere(q != codes)
                errors.append(f"{name}: {len(bad)} FP8 codes differ, first at {bad[0].tolist()}: "
                              f"got {q[tuple(bad[0])]:#04x}, reference {codes[tuple(bad[0])]:#04x}")
            if got.tobytes() != np.float32(scale).tobytes():
                errors.append(f"{base}.weight_scale: got {got!r}, reference {scale!r}")
            checked["FP8"] += 1
        elif name in s:
            if s[name][0] != dtype or not np.array_equal(s[name][2], q):
                errors.append(f"{name}: kept tensor differs from the source")
    return errors, checked


def synth(out, layers, hidden, inter, vocab):
    """A BF16 folder of Qwen3.5-named random tensors (one shard per layer) for memory and speed measurements."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    weight_map = {}

    def rand(shape):
        return f32_to_bf16_bits(rng.standard_normal(shape, dtype=np.float32) * 0.02)

    shards = [[("model.embed_tokens.weight", (vocab, hidden)), ("lm_head.weight", (vocab, hidden))]]
    for i in range(layers):
        p = f"model.layers.{i}."
        shards.append([(p + "mlp.gate_proj.weight", (inter, hidden)), (p + "mlp.up_proj.weight", (inter, hidden)),
                       (p + "mlp.down_proj.weight", (hidden, inter)),
                       (p + "self_attn.q_proj.weight", (2 * hidden, hidden)),
                       (p + "self_attn.o_proj.weight", (hidden, hidden))])
    for j, shard in enumerate(shards):
        fname = f"model-{j + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(out, fname), [(n, "BF16", s, rand(s)) for n, s in shard])
        weight_map.update({n: fname for n, _ in shard})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_5_text", "tie_word_embeddings": False}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="compare a quantized folder with the reference computed from its source")
    c.add_argument("--src", required=True)
    c.add_argument("--dst", required=True)
    m = sub.add_parser("synth", help="write a random BF16 model folder (measurements)")
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=8)
    m.add_argument("--hidden", type=int, default=2048)
    m.add_argument("--inter", type=int, default=8192)
    m.add_argument("--vocab", type=int, default=32768)
    args = ap.parse_args()
    if args.cmd == "synth":
        synth(args.out, args.layers, args.hidden, args.inter, args.vocab)
        return 0
    errors, checked = check(args.src, args.dst)
    for e in errors:
        print(e)
    print(f"checked {checked['NVFP4']} NVFP4 and {checked['FP8']} FP8 tensors: "
          f"{'OK' if not errors else str(len(errors)) + ' mismatches'}")
    return 1 if errors or not sum(checked.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
