#!/usr/bin/env python3
"""Differential test: voltserve's tokenizer against Hugging Face `tokenizers` (and transformers' AutoTokenizer).

Runs the C++ `tokenizer_batch` tool (tests/tokenizer/tokenizer_batch.cpp) on a fixed varied corpus (many scripts,
code, whitespace runs, emoji/ZWJ, combining marks, contractions, digits, special-token text, edge cases) plus
seeded random strings and random id sequences, and checks, for each string x:
  - ids identical to HF `encode(x, add_special_tokens=False)`, with special tokens parsed (HF default) and not
    parsed (HF `encode_special_tokens = True`);
  - decode / decode(skip_special_tokens) identical to HF; decode(encode(x)) == NFC(x);
  - the IncrementalDecoder's chunks concatenate to decode() and never split a UTF-8 sequence;
  - on the fixed corpus, transformers' AutoTokenizer gives the same ids (it rebuilds the pipeline from
    tokenizer_class, so this also checks that the folder is loaded as intended).
Exits 1 on any difference, printing the first ones. Usage:
    tools/tokenizer_diff.py --batch build/tests/tokenizer/tokenizer_batch --tokenizer DIR [--random N] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXED_CORPUS = [
    "", " ", "  ", "\n", "\r\n", "\t", "a", "A", "0", "'", "'s", "é", "\u0301", "\u0301\u0302", " \u0301",
    "Hello world", "Hello, world!", "hello   world", "  leading spaces", "trailing spaces   ", "tabs\tin\tthe\tmiddle",
    "line1\nline2\n\nline4\n\n\n", "windows\r\nline\r\n\r\nendings\r\n", "mixed \t \n \r\n  \t\t ends  ", "\n\n\n\n",
    " \n \n \n", "x \ny", "x  \n  y", "\u00a0nbsp\u00a0here\u00a0", "\u3000ideographic\u3000space", "em\u2003space",
    "zero\u200bwidth", "a\u2028b\u2029c", "\u0085next line", "\x0bvt\x0cff",
    "I'm you're he's we've they'll I'd can't", "I'M YOU'RE HE'S WE'VE THEY'LL I'D CAN'T", "It'S mIxEd'Ll 'rE 'vE",
    "'s's's", "''s", "don't", "o'clock", "rock 'n' roll", "l'homme d'état", "'ſ 'K", "x'ſ",
    "12345", "3.14159", "1,000,000", "2024-01-15T10:30:00Z", "0xDEADBEEF", "١٢٣٤٥ ۱۲۳ ०१२३ ๑๒๓", "①②③ ⅠⅡⅢ ½ ² ³",
    "The quick brown fox jumps over the lazy dog.",
    "Le cœur a ses raisons que la raison ne connaît point.", "Größenwahn ist übertrieben, aber ſchön.",
    "¿Dónde está el baño? ¡Olé!", "Привет, мир! Как дела?", "Γειά σου Κόσμε", "Ելք", "გამარჯობა",
    "你好，世界！这是一个测试。", "我爱北京天安门", "日本語のテキスト、カタカナ、ひらがな。", "ｶﾀｶﾅ ＡＢＣ１２３",
    "한국어 텍스트입니다. 안녕하세요!", "\u1100\u1161\u11a8 (conjoining jamo)", "مرحبا بالعالم", "שָׁלוֹם עוֹלָם",
    "नमस्ते दुनिया", "ক্ষ বাংলা", "தமிழ் மொழி", "ไทยภาษา", "ລາວ", "བོད་སྐད", "ᠮᠣᠩᠭᠣᠯ", "አማርኛ", "ᏣᎳᎩ",
    "Tiếng Việt có dấu", "Tie\u0302\u0301ng Vie\u0323\u0302t (decomposed)", "e\u0301 vs \u00e9", "A\u030a \u212b \u00c5",
    "ﬁ ﬂ ﬀ ligatures", "Ǆ ǅ ǆ", "x\u0301\u0302\u0303\u0304\u0305\u0306\u0307", "\u0915\u093c \u0958",
    "q\u0307\u0323 q\u0323\u0307", "a\u0328\u0301", "\u1e0b\u0323",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "❤️", "🇩🇪🇯🇵🇺🇸", "👩🏾‍💻 at work", "🧑‍🤝‍🧑", "1️⃣ #️⃣",
    "emoji😀between😀words", "🤖🚀✨🔥💯", "☃ ★ ♠ ♥ ✓ ✗", "\U0001d400\U0001d401 math bold", "𠀀𠀁 ext-B", "\ue000\uf8ff pua",
    "\ufeffbom", "\ufffd replacement", "\u200d\u200c joiners", "\ufe0f\ufe0e selectors",
    "def f(x):\n    return x * 2\n", "if (a && b || !c) { x += 1; }", "for i in range(10):\n\tprint(i)\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; }\n", "x = {'a': [1, 2], \"b\": None}",
    "SELECT * FROM t WHERE id=42;", "<div class=\"x\">&nbsp;</div>", "$HOME/.config/app.yaml", "a->b => c :: d",
    "    indented\n        more\n    less\n", "{{ jinja }} {% if x %}", "```python\nprint('hi')\n```",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Users\\name\\file.txt", "~!@#$%^&*()_+-=[]{}|;:,.<>?/",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "<|im_end|><|im_end|>",
    "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<tool_response>ok</tool_response>",
    "<|im_start|", "<|im_start||>", "<<|im_end|>>", "< |im_end| >", "<|fim_prefix|>code<|fim_suffix|><|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>", "text<|endoftext|>text", "<think></think>", "</think><think>",
    "<|audio_start|><tts_pad><|audio_pad|>", "<|box_start|>(1,2)<|box_end|>", "é<|im_end|>\u0301",
    "a" * 300, "ab" * 200, "ä" * 150, "中" * 200, "😀" * 100, " " * 500, "\n" * 200, "\t " * 100, "1" * 100,
    "!" * 300, "-" * 200 + ">", "x" + "\u0301" * 100, "Supercalifragilisticexpialidocious" * 8,
    "pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "a\u0301" * 80, "\u0301" * 50, "é" * 10 + " " + "e\u0301" * 10,
]

# (start, end) code point blocks for random strings; weights favour text-like blocks.
BLOCKS = [
    (0x20, 0x7E, 30), (0x09, 0x0D, 4), (0xA0, 0xFF, 4), (0x100, 0x24F, 4), (0x250, 0x2FF, 1), (0x300, 0x36F, 5),
    (0x370, 0x3FF, 2), (0x400, 0x4FF, 3), (0x530, 0x58F, 1), (0x590, 0x5FF, 2), (0x600, 0x6FF, 3), (0x900, 0x97F, 3),
    (0x980, 0x9FF, 1), (0xB80, 0xBFF, 1), (0xE00, 0xE7F, 2), (0xF00, 0xFFF, 1), (0x10A0, 0x10FF, 1),
    (0x1100, 0x11FF, 2), (0x1E00, 0x1EFF, 2), (0x2000, 0x206F, 3), (0x20A0, 0x20CF, 1), (0x2100, 0x218F, 1),
    (0x2190, 0x22FF, 1), (0x2460, 0x24FF, 1), (0x2500, 0x27BF, 1), (0x3000, 0x303F, 2), (0x3040, 0x30FF, 4),
    (0x4E00, 0x9FFF, 8), (0xAC00, 0xD7A3, 4), (0xE000, 0xE0FF, 1), (0xFB00, 0xFB4F, 1), (0xFE00, 0xFE0F, 1),
    (0xFF00, 0xFFEF, 2), (0xFFF9, 0xFFFD, 1), (0x10000, 0x1007F, 1), (0x1D400, 0x1D7FF, 1), (0x1F1E6, 0x1F1FF, 1),
    (0x1F300, 0x1F64F, 5), (0x1F680, 0x1F6FF, 1), (0x1F900, 0x1F9FF, 2), (0x20000, 0x2A6DF, 1), (0xE0020, 0xE007F, 1),
]
FRAGMENTS = [" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "'re", "\u200d", "\ufe0f", "<|im_end|>", "<think>", "</think>",
             "<|endoftext|>", "<tool_call>", "<|im_start|>", "123", " the", "ing", "<|", "|>"]


def random_text(rng: random.Random) -> str:
    weights = [b[2] for b in BLOCKS]
    n = rng.choice([rng.randint(1, 8), rng.randint(1, 40), rng.randint(1, 40), rng.randint(40, 300)])
    out = []
    for _ in range(n):
        if rng.random() < 0.12:
            out.append(rng.choice(FRAGMENTS))
            continue
        lo, hi, _ = rng.choices(BLOCKS, weights)[0]
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp) * (rng.randint(2, 70) if rng.random() < 0.02 else 1))
    return "".join(out)


def random_ids(rng: random.Random, vocab_size: int, added: list[int], byte_ids: list[int]) -> list[int]:
    ids = []
    for _ in range(rng.randint(0, 30)):
        r = rng.random()
        if r < 0.4:
            ids.append(rng.choice(byte_ids))  # single bytes: split and invalid UTF-8
        elif r < 0.55:
            ids.append(rng.choice(added))
        elif r < 0.58:
            ids.append(vocab_size + rng.randint(0, 1000))  # not a token: dropped
        else:
            ids.append(rng.randrange(vocab_size))
    return ids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", required=True, help="path of the tokenizer_batch executable")
    ap.add_argument("--tokenizer", required=True, type=Path, help="folder with tokenizer.json")
    ap.add_argument("--random", type=int, default=2500, help="number of random strings (and random id sequences / 4)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-transformers", action="store_true", help="skip the AutoTokenizer check")
    ap.add_argument("--show", type=int, default=8, help="differences to print")
    args = ap.parse_args()

    if not (args.tokenizer / "tokenizer.json").is_file():
        print(f"FAIL: {args.tokenizer}/tokenizer.json not found (set VOLTSERVE_QWEN3_TOKENIZER_DIR or pass "
              f"--tokenizer)", file=sys.stderr)
        return 1
    from tokenizers import Tokenizer  # imported late so a missing tokenizer dir is reported first

    t0 = time.time()
    hf = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
    hf_plain = Tokenizer.from_file(str(args.tokenizer / "tokenizer.json"))
    hf_plain.encode_special_tokens = True

    rng = random.Random(args.seed)
    texts = list(FIXED_CORPUS) + [random_text(rng) for _ in range(args.random)]
    vocab_size = hf.get_vocab_size(with_added_tokens=True)
    added = sorted(hf.get_added_tokens_decoder().keys())
    vocab = hf.get_vocab(with_added_tokens=False)
    byte_ids = [i for tok, i in vocab.items() if len(tok) == 1]
    id_seqs = [random_ids(rng, vocab_size, added, byte_ids) for _ in range(max(50, args.random // 4))]

    requests = [json.dumps({"text": t}) for t in texts] + [json.dumps({"decode": s}) for s in id_seqs]
    proc = subprocess.run([args.batch, str(args.tokenizer)], input="\n".join(requests) + "\n", capture_output=True,
                          text=True, encoding="utf-8")
    if proc.returncode != 0:
        print(f"FAIL: tokenizer_batch exited {proc.returncode}: {proc.stderr.strip()}", file=sys.stderr)
        return 1
    results = [json.loads(line) for line in proc.stdout.split("\n") if line]
    if len(results) != len(requests):
        print(f"FAIL: {len(requests)} requests but {len(results)} results", file=sys.stderr)
        return 1

    failures = []

    def check(what: str, case, ours, theirs):
        if ours != theirs:
            failures.append((what, case, ours, theirs))

    n_ids = 0
    n_segment_nfc = 0
    for text, res in zip(texts, results[:len(texts)]):
        if "error" in res:
            failures.append(("error", text, res["error"], None))
            continue
        ids = hf.encode(text, add_special_tokens=False).ids
        n_ids += len(ids)
        check("ids", text, res["ids"], ids)
        check("ids (special tokens as text)", text, res["ids_plain"], hf_plain.encode(text, add_special_tokens=False).ids)
        check("decode", text, res["decoded"], hf.decode(ids, skip_special_tokens=False))
        check("decode(skip_special)", text, res["decoded_skip"], hf.decode(ids, skip_special_tokens=True))
        # HF normalizes each stretch between added tokens on its own, so a mark right after one (e.g. ">" + U+0338
        # after "<|endoftext|>") is not composed with it; there NFC(x) of the whole string is not the round trip
        # HF gives either, and matching HF's decode (checked above) is what counts.
        nfc = unicodedata.normalize("NFC", text)
        if hf.decode(ids, skip_special_tokens=False) == nfc:
            check("decode(encode(x)) == NFC(x)", text, res["decoded"], nfc)
        else:
            n_segment_nfc += 1
        check("incremental == decode", text, res["incremental"], res["decoded"])
        check("incremental(skip) == decode(skip)", text, res["incremental_skip"], res["decoded_skip"])
        check("chunks are whole UTF-8", text, res["split_ok"], True)
    for seq, res in zip(id_seqs, results[len(texts):]):
        check("decode(random ids)", seq, res.get("decoded"), hf.decode(seq, skip_special_tokens=False))
        check("decode(random ids, skip)", seq, res.get("decoded_skip"), hf.decode(seq, skip_special_tokens=True))
        check("incremental(random ids)", seq, res.get("incremental"), res.get("decoded"))
        check("incremental(random ids, skip)", seq, res.get("incremental_skip"), res.get("decoded_skip"))
        check("chunks are whole UTF-8 (random ids)", seq, res.get("split_ok"), True)

    n_auto = 0
    if not args.no_transformers:
        import transformers
        transformers.logging.set_verbosity_error()
        auto = transformers.AutoTokenizer.from_pretrained(str(args.tokenizer))
        for text, res in zip(FIXED_CORPUS, results):
            if "ids" in res:
                check("AutoTokenizer ids", text, res["ids"], auto.encode(text, add_special_tokens=False))
                n_auto += 1

    elapsed = time.time() - t0
    print(f"{args.tokenizer}: {len(texts)} strings ({len(FIXED_CORPUS)} fixed, {args.random} random, seed "
          f"{args.seed}, {n_ids} HF ids), {len(id_seqs)} random id sequences, {n_auto} AutoTokenizer checks, "
          f"{n_segment_nfc} strings where NFC applies per added-token segment: "
          f"{len(failures)} differences ({elapsed:.1f} s)")
    for what, case, ours, theirs in failures[: args.show]:
        print(f"  {what}: input {case!r}\n    voltserve: {ours!r}\n    reference: {theirs!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
