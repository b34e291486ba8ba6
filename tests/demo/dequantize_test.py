#!/usr/bin/env python3
"""tools/demo/dequantize.py on the committed models/demo: every tensor that was not quantized comes back with its
value, every NVFP4 element equals a scalar decode of its own bits (written here from the formats' bit layouts, not
with the tool's tables), and the float folder, served by voltserve's CPU backend, answers greedy prompts with the
same text as the NVFP4 folder. Run by ctest (demo_dequantize); VOLTSERVE_BINARY names the binary."""
import os
import random
import subprocess
import sys
import tempfile

REPO = os.environ.get("VOLTSERVE_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, os.path.join(REPO, "tools", "demo"))
import dequantize  # noqa: E402
from quantize_ref import read_folder, to_f32  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def e2m1_bits(nibble):
    sign = -1.0 if nibble & 8 else 1.0
    e, m = (nibble >> 1) & 3, nibble & 1
    return sign * (m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1))


def e4m3_bits(code):
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    return sign * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def generate(binary, model, prompt):
    r = subprocess.run([binary, "generate", "--model", model, "--chat", "--prompt", prompt, "--max-tokens", "96",
                        "--backend", "cpu", "--threads", "2"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"generate on {model} exited {r.returncode}: {r.stderr[-500:]}")
    return r.stdout


def main():
    src = os.path.join(REPO, "models", "demo")
    binary = os.environ.get("VOLTSERVE_BINARY", os.path.join(REPO, "build", "voltserve"))
    with tempfile.TemporaryDirectory() as out:
        dequantize.dequantize_folder(src, out)
        q, f = read_folder(src), read_folder(out)
        rng = random.Random(5)
        n_quant = 0
        for name, (dtype, shape, arr) in q.items():
            if name.endswith(".weight_scale") or name.endswith(".weight_scale_2"):
                check(name not in f, f"{name}: scales must not be copied")
                continue
            check(name in f and f[name][0] == "F32", f"{name}: missing or not F32 in the output")
            if name not in f:
                continue
            got = f[name][2]
            if dtype != "U8":
                check(got.shape == arr.shape and (got == to_f32(dtype, arr)).all(), f"{name}: value changed")
                continue
            n_quant += 1
            base = name[: -len(".weight")]
            scales, g = q[base + ".weight_scale"][2], float(q[base + ".weight_scale_2"][2].reshape(-1)[0])
            check(got.shape == (arr.shape[0], arr.shape[1] * 2), f"{name}: shape {got.shape}")
            for _ in range(64):
                r, c = rng.randrange(got.shape[0]), rng.randrange(got.shape[1])
                byte = int(arr[r, c // 2])
                want = e2m1_bits(byte >> 4 if c % 2 else byte & 15) * e4m3_bits(int(scales[r, c // 16])) * g
                check(abs(float(got[r, c]) - want) <= 1e-6 * abs(want), f"{name}[{r}, {c}]: {got[r, c]} != {want}")
        check(n_quant > 0, "no NVFP4 tensor found in models/demo")
        for prompt in ("What is 123 + 456?", "Extract the name, age and city as JSON: Mara Quillon, age 41, city: "
                       "Port Brert"):
            a, b = generate(binary, src, prompt), generate(binary, out, prompt)
            check(a == b and a.strip(), f"greedy output differs for {prompt!r}:\n{a}\n---\n{b}")
    for line in failures[:20]:
        print("FAIL:", line)
    print(f"dequantize: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
