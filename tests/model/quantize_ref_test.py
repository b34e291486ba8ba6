#!/usr/bin/env python3
"""`voltserve quantize` against the independent NumPy reference (tools/quantize_ref.py): random tensors with all-zero
blocks, outliers, subnormal and clamped block scales and exact rounding ties, in BF16/F16/F32, from a sharded source;
codes and scales must be equal byte for byte in every format. Also which tensors each format quantizes, the config
files, --keep, sharding of the output, copied files, progress, and the errors (named causes, non-zero exit)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SRC_DIR = os.environ.get("VOLTSERVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("VOLTSERVE_BINARY_DIR", os.path.join(SRC_DIR, "build"))
sys.path.insert(0, os.path.join(SRC_DIR, "tools"))
import quantize_ref as ref  # noqa: E402

VOLTSERVE = os.path.join(BIN_DIR, "voltserve")
rng = np.random.default_rng(20261201)


def bf16(x):
    return ("BF16", ref.f32_to_bf16_bits(x))


def nvfp4_ties():
    """Blocks whose e2m1 codes and e4m3 block scales land exactly on rounding midpoints. The tensor amax is
    2688 * 2^-10, so the global scale is exactly 2^-10 and a block of amax 6 * 2^-10 * m has block scale m."""
    g = 2.0 ** -10
    rows = []
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float64)
    for m in (1.0, 2.0, 0.5, 1.5, 0.0078125):  # e4m3-exact block scales, the last a subnormal (2^-7)
        row = []
        for sign in (1, -1):
            block = np.concatenate([[6.0], sign * mids, -sign * mids, [0.0]])  # 16 values, amax 6
            row.append(block * g * m)
        rows.append(np.concatenate(row + [np.full(16, 0.0)]))  # a third block all zero
    # Block scales that tie between two e4m3 values (1.0625 between 1.0 and 1.125 -> 1.0; 1.1875 -> 1.25).
    for m in (1.0625, 1.1875, 0.0068359375):  # the last: between subnormals 3/512 and 4/512 -> 4/512 (even)
        rows.append(np.concatenate([np.linspace(-6, 6, 16) * g * m, np.linspace(6, -6, 16) * g * m, np.zeros(16)]))
    rows.append(np.concatenate([[2688 * g], np.zeros(47)]))  # sets the tensor amax
    return np.array(rows, dtype=np.float32)


def fp8_ties():
    """Values on midpoints between neighbouring e4m3 values (normal and subnormal), scale exactly 2^-4."""
    vals = ref.E4M3
    mids = (vals[:-1] + vals[1:]) / 2
    pick = np.concatenate([mids[:40], mids[60:80], mids[-8:]])
    row = np.concatenate([pick, -pick])
    row = np.concatenate([row, np.zeros((-len(row)) % 16)])
    w = np.tile(row, (4, 1)) * 2.0 ** -4
    w[0, 0] = 448 * 2.0 ** -4  # amax: scale = 2^-4
    return w.astype(np.float32)


def source_tensors():
    t = {}
    normal = rng.standard_normal((64, 256)).astype(np.float32) * 0.02
    t["model.layers.0.mlp.gate_proj.weight"] = bf16(normal)
    up = rng.standard_normal((64, 256)).astype(np.float32) * 0.02
    up[3, 16:32] = 0.0  # all-zero blocks
    up[10, :] = 0.0
    up[5, 7] = 40.0     # outliers: every other block's scale becomes small or subnormal
    up[50, 200] = -25.0
    t["model.layers.0.mlp.up_proj.weight"] = bf16(up)
    down = (rng.standard_normal((32, 128)) * 0.05).astype(np.float16)
    t["model.layers.0.mlp.down_proj.weight"] = ("F16", down)
    t["model.layers.1.self_attn.q_proj.weight"] = ("F32", nvfp4_ties())
    sub = rng.standard_normal((16, 128)).astype(np.float32)
    sub *= np.logspace(-9, -2, 16 * 8).reshape(16, 8).repeat(16, axis=1)  # block amax from 1e-9 (scale clamped) up
    sub[0, 0] = 1.0e4
    t["model.layers.1.self_attn.k_proj.weight"] = bf16(sub)
    t["model.layers.1.self_attn.v_proj.weight"] = ("F32", fp8_ties())
    t["model.layers.1.self_attn.o_proj.weight"] = bf16(np.zeros((32, 64), dtype=np.float32))
    for name, shape in [("in_proj_qkv", (96, 64)), ("in_proj_z", (48, 64)), ("out_proj", (64, 48)),
                        ("in_proj_a", (4, 64)), ("in_proj_b", (4, 64))]:
        t[f"model.layers.0.linear_attn.{name}.weight"] = bf16(rng.standard_normal(shape).astype(np.float32) * 0.1)
    t["model.layers.0.linear_attn.conv1d.weight"] = bf16(rng.standard_normal((96, 1, 4)).astype(np.float32))
    t["model.layers.0.linear_attn.A_log"] = ("F32", rng.standard_normal(4).astype(np.float32))
    t["model.layers.0.linear_attn.dt_bias"] = bf16(rng.standard_normal(4).astype(np.float32))
    t["model.layers.0.linear_attn.norm.weight"] = ("F32", np.ones(16, dtype=np.float32))
    t["model.layers.0.input_layernorm.weight"] = bf16(np.zeros(64, dtype=np.float32))
    t["model.embed_tokens.weight"] = bf16(rng.standard_normal((128, 64)).astype(np.float32))
    t["model.norm.weight"] = bf16(np.zeros(64, dtype=np.float32))
    t["lm_head.weight"] = bf16(rng.standard_normal((128, 64)).astype(np.float32) * 0.05)
    t["mtp.fc.weight"] = bf16(rng.standard_normal((64, 128)).astype(np.float32))
    t["mtp.layers.0.mlp.gate_proj.weight"] = bf16(rng.standard_normal((96, 64)).astype(np.float32))
    return t


MLP = ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"]
ATTN = ["model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.self_attn.v_proj",
        "model.layers.1.self_attn.o_proj"]
GDN = ["model.layers.0.linear_attn.in_proj_qkv", "model.layers.0.linear_attn.in_proj_z",
       "model.layers.0.linear_attn.out_proj"]


def write_source(folder, tensors, shards=2):
    os.makedirs(folder, exist_ok=True)
    names = sorted(tensors)
    parts = [names[i::shards] for i in range(shards)]
    weight_map = {}
    for i, part in enumerate(parts):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        ref.write_safetensors(os.path.join(folder, fname),
                              [(n, tensors[n][0], tensors[n][1].shape, tensors[n][1]) for n in part])
        weight_map.update({n: fname for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_5_text", "tie_word_embeddings": False, "dtype": "bfloat16"}, f)
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"):
        with open(os.path.join(folder, extra), "w") as f:
            f.write("{}" if extra.endswith(".json") else "{{ messages }}")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def header_bytes(path):
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


def quantize(*args):
    return subprocess.run([VOLTSERVE, "quantize", *args], capture_output=True, text=True, timeout=300)


class QuantizeAgainstReference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="vs_quantize_")
        cls.src = os.path.join(cls.tmp, "src")
        write_source(cls.src, source_tensors())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_format(self, fmt, *extra):
        out = os.path.join(self.tmp, f"out-{fmt}-{len(extra)}")
        r = quantize("--in", self.src, "--out", out, "--format", fmt, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out, r

    def quantized_modules(self, out):
        t = ref.read_folder(out)
        nv = sorted(n[: -len(".weight_scale_2")] for n in t if n.endswith(".weight_scale_2"))
        f8 = sorted(n[: -len(".weight")] for n in t if n.endswith(".weight") and t[n][0] == "F8_E4M3")
        return nv, f8

    def assert_reference(self, out, n_nvfp4, n_fp8):
        errors, checked = ref.check(self.src, out)
        self.assertEqual(errors, [])
        self.assertEqual(checked, {"NVFP4": n_nvfp4, "FP8": n_fp8})

    def test_nvfp4(self):
        out, r = self.run_format("nvfp4")
        nv, f8 = self.quantized_modules(out)
        self.assertEqual(nv, sorted(MLP + ATTN + GDN))
        self.assertEqual(f8, [])
        self.assert_reference(out, 10, 0)
        hf = load_json(os.path.join(out, "hf_quant_config.json"))["quantization"]
        self.assertEqual(hf["quant_algo"], "W4A16_NVFP4")
        self.assertEqual(hf["group_size"], 16)
        for kept in ("lm_head", "mtp.*", "model.layers.0.linear_attn.in_proj_a", "model.layers.0.linear_attn.in_proj_b",
                     "model.layers.0.linear_attn.conv1d"):
            self.assertIn(kept, hf["exclude_modules"])
        qc = load_json(os.path.join(out, "config.json"))["quantization_config"]
        self.assertEqual(qc["quant_method"], "modelopt")
        self.assertEqual(qc["ignore"], hf["exclude_modules"])
        for copied in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"):
            self.assertTrue(os.path.exists(os.path.join(out, copied)), copied)
        self.assertIn("NVFP4", r.stderr)
        self.assertIn("[1/", r.stderr)  # progress lines

    def test_nvfp4_with_head(self):
        out, _ = self.run_format("nvfp4", "--quantize-lm-head")
        nv, _ = self.quantized_modules(out)
        self.assertIn("lm_head", nv)
        self.assert_reference(out, 11, 0)

    def test_fp8(self):
        out, _ = self.run_format("fp8")
        nv, f8 = self.quantized_modules(out)
        self.assertEqual((nv, f8), ([], sorted(MLP + ATTN + GDN)))
        self.assert_reference(out, 0, 10)
        self.assertEqual(load_json(os.path.join(out, "hf_quant_config.json"))["quantization"]["quant_algo"], "FP8")

    def test_mixed(self):
        out, _ = self.run_format("mixed")
        nv, f8 = self.quantized_modules(out)
        self.assertEqual(nv, sorted(MLP + ["lm_head"]))
        self.assertEqual(f8, sorted(ATTN + GDN))
        self.assert_reference(out, 4, 7)
        hf = load_json(os.path.join(out, "hf_quant_config.json"))["quantization"]
        self.assertEqual(hf["quant_algo"], "MIXED_PRECISION")
        self.assertNotIn("exclude_modules", hf)
        self.assertEqual(hf["quantized_layers"]["lm_head"], {"quant_algo": "W4A16_NVFP4", "group_size": 16})
        self.assertEqual(hf["quantized_layers"]["model.layers.1.self_attn.q_proj"], {"quant_algo": "FP8"})
        self.assertNotIn("model.layers.0.linear_attn.in_proj_a", hf["quantized_layers"])
        qc = load_json(os.path.join(out, "config.json"))["quantization_config"]
        self.assertEqual(qc["quantized_layers"], hf["quantized_layers"])

    def test_keep_and_shards(self):
        out, _ = self.run_format("nvfp4", "--keep", "model.layers.0.mlp.*,*.k_proj.weight", "--max-shard-size", "20KB")
        nv, _ = self.quantized_modules(out)
        self.assertEqual(nv, sorted(set(ATTN + GDN) - {"model.layers.1.self_attn.k_proj"}))
        self.assert_reference(out, 6, 0)
        hf = load_json(os.path.join(out, "hf_quant_config.json"))["quantization"]
        for kept in MLP + ["model.layers.1.self_attn.k_proj"]:
            self.assertIn(kept, hf["exclude_modules"])
        index = load_json(os.path.join(out, "model.safetensors.index.json"))
        files = sorted(set(index["weight_map"].values()))
        self.assertGreater(len(files), 2)
        for f in files:
            self.assertTrue(os.path.exists(os.path.join(out, f)), f)
        # A weight and its scales share a shard; every shard but oversized single groups stays under the limit.
        wm = index["weight_map"]
        for n in wm:
            if n.endswith(".weight_scale_2"):
                self.assertEqual(wm[n], wm[n[: -len("_scale_2")]])
        self.assertEqual(index["metadata"]["total_size"],
                         sum(os.path.getsize(os.path.join(out, f)) for f in files) -
                         sum(header_bytes(os.path.join(out, f)) for f in files))

    def test_errors(self):
        bad = os.path.join(self.tmp, "no-config")
        os.makedirs(bad, exist_ok=True)
        r = quantize("--in", bad, "--out", os.path.join(self.tmp, "x1"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("config.json", r.stderr)

        r = quantize("--in", os.path.join(self.tmp, "nowhere"), "--out", os.path.join(self.tmp, "x2"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no such folder", r.stderr)

        out, _ = self.run_format("fp8", "--quiet")
        r = quantize("--in", out, "--out", os.path.join(self.tmp, "x3"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("already quantized", r.stderr)

        r = quantize("--in", self.src, "--out", out, "--format", "fp8")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not empty", r.stderr)
        r = quantize("--in", self.src, "--out", out, "--format", "nvfp4", "--force", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_reference(out, 10, 0)

        r = quantize("--in", self.src, "--out", os.path.join(self.tmp, "x4"), "--format", "int4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--format", r.stderr)

        ints = os.path.join(self.tmp, "int-src")
        write_source(ints, {"model.layers.0.mlp.up_proj.weight": ("I32", np.ones((16, 32), dtype=np.int32)),
                            "model.embed_tokens.weight": bf16(np.ones((8, 32), dtype=np.float32))}, shards=1)
        r = quantize("--in", ints, "--out", os.path.join(self.tmp, "x5"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("model.layers.0.mlp.up_proj.weight", r.stderr)
        self.assertIn("I32", r.stderr)


class ReferenceSelfCheck(unittest.TestCase):
    """The reference's encoders on hand-checked values, so a shared mistake cannot pass unnoticed."""

    def test_e2m1(self):
        x = np.array([0, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 5.1, 100, -0.1, -0.0, -6], dtype=np.float32)
        self.assertEqual(ref.to_e2m1(x).tolist(), [0, 0, 1, 2, 2, 4, 4, 6, 6, 7, 7, 8, 0, 15])

    def test_e4m3(self):
        x = np.array([0, 1, 1.0625, 1.1875, 448, 500, -2 ** -9, 2 ** -10, 3 * 2 ** -10, 0.015625], dtype=np.float32)
        self.assertEqual(ref.to_e4m3(x).tolist(), [0, 0x38, 0x38, 0x3A, 0x7E, 0x7E, 0x81, 0, 2, 0x08])
        self.assertTrue(np.array_equal(ref.from_e4m3(ref.to_e4m3(ref.E4M3.astype(np.float32))),
                                       ref.E4M3.astype(np.float32)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
