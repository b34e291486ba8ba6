#!/usr/bin/env python3
"""End-to-end test of `voltserve tokenize` / `voltserve detokenize` against HF `tokenizers` on the qwen35-mini
fixture and the real Qwen3 tokenizer, plus the error paths (missing folder, bad ids, bad UTF-8, missing input).
Usage: cli_tokenize_test.py --voltserve build/voltserve --tokenizer DIR [--tokenizer DIR ...]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TEXTS = ["Hello, world!", "<|im_start|>user\nhi <think>x</think><|im_end|>\n", "中文 😀 e\u0301", "  a\r\n\tb  ", ""]


def run(exe, *args, stdin=None):
    p = subprocess.run([exe, *args], capture_output=True, input=stdin)
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8", "replace")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--voltserve", required=True)
    ap.add_argument("--tokenizer", action="append", required=True)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    exe = args.voltserve
    for d in args.tokenizer:
        if not os.path.isfile(os.path.join(d, "tokenizer.json")):
            failures.append(f"{d}/tokenizer.json is missing")
            continue
        hf = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf_plain = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf_plain.encode_special_tokens = True
        for text in TEXTS:
            want = hf.encode(text, add_special_tokens=False).ids
            rc, out, err = run(exe, "tokenize", "--tokenizer", d, "--text", text, "--special")
            expect(rc == 0 and json.loads(out) == {"ids": want}, f"tokenize --special {text!r}: {rc} {out} {err}")
            want_plain = hf_plain.encode(text, add_special_tokens=False).ids
            rc, out, err = run(exe, "tokenize", "--tokenizer", d, "--text", text)
            expect(rc == 0 and json.loads(out) == {"ids": want_plain}, f"tokenize {text!r}: {rc} {out} {err}")
            with tempfile.NamedTemporaryFile("wb", delete=False) as f:
                f.write(text.encode("utf-8"))
            rc, out, err = run(exe, "tokenize", "--tokenizer", d, "--file", f.name, "--special")
            os.unlink(f.name)
            expect(rc == 0 and json.loads(out) == {"ids": want}, f"tokenize --file {text!r}: {rc} {out} {err}")
            ids = ",".join(map(str, want))
            for skip in (False, True):
                rc, out, err = run(exe, "detokenize", "--tokenizer", d, "--ids", ids, *(["--skip-special"] if skip else []))
                expect(rc == 0 and json.loads(out) == {"text": hf.decode(want, skip_special_tokens=skip)},
                       f"detokenize {ids} skip={skip}: {rc} {out} {err}")
        vocab = hf.get_vocab_size(with_added_tokens=True)
        for bad, needle in ((f"1,{vocab}", f"{vocab} is not a token id"), ("1,x", "\"x\" is not an integer"),
                            ("-4", "-4 is not a token id"), ("1,,2", "empty item")):
            rc, out, err = run(exe, "detokenize", "--tokenizer", d, "--ids", bad)
            expect(rc != 0 and needle in err and out == "", f"detokenize --ids {bad}: rc={rc} err={err!r}")
        rc, out, err = run(exe, "tokenize", "--tokenizer", d, "--file", "-", stdin=b"abc\xff")
        expect(rc != 0 and "not valid UTF-8" in err, f"tokenize invalid UTF-8: rc={rc} err={err!r}")
        rc, out, err = run(exe, "tokenize", "--tokenizer", d)
        expect(rc != 0 and "--text or --file" in err, f"tokenize without input: rc={rc} err={err!r}")
    rc, out, err = run(exe, "tokenize", "--tokenizer", "/nonexistent/tok", "--text", "x")
    expect(rc != 0 and "/nonexistent/tok" in err and "does not exist" in err, f"missing dir: rc={rc} err={err!r}")
    rc, out, err = run(exe, "detokenize", "--tokenizer", "/nonexistent/tok", "--ids", "1")
    expect(rc != 0 and "does not exist" in err, f"detokenize missing dir: rc={rc} err={err!r}")

    print(f"cli tokenize/detokenize: {len(failures)} failures")
    for f in failures[:20]:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
