#!/usr/bin/env python3
"""Trains tests/fixtures/tokenizers/qwen35-mini: a small byte-level BPE in the exact Qwen3.5 style.

Same pipeline as the real Qwen3.5 tokenizer (MODEL.md §6.1): NFC normalizer, Split pre-tokenizer with the Qwen3.5
regex (\\p{M} joins letter runs), behaviour isolated, then ByteLevel(add_prefix_space=False, use_regex=False), ByteLevel
decoder, no unk, then the 33 Qwen3.5 added tokens in their order right after the regular vocab, with the special
flags of the real files. The corpus is generated here from a seed, so the fixture is reproducible:

    python3 tools/tokenizer_train_fixture.py [--out tests/fixtures/tokenizers/qwen35-mini] [--vocab 3000] [--seed 35]
"""
import argparse
import json
import os
import random
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

QWEN35_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (content, special) in Qwen3.5 order, ids vocab..vocab+32. <tool_call>, </tool_call>, the fim/repo/file_sep tokens,
# <tool_response>, </tool_response>, <think> and </think> are special: false in the real config (so they survive
# skip_special_tokens); every other one is special: true.
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
    ("<|audio_start|>", True), ("<|audio_end|>", True), ("<tts_pad>", True), ("<tts_text_bos>", True),
    ("<tts_text_eod>", True), ("<tts_text_bos_single>", True), ("<|audio_pad|>", True),
]

# Seed sentences in many scripts; the generator recombines them so merges cover each script a little.
SEED_TEXTS = [
    "The quick brown fox jumps over the lazy dog. It's what they'd said they'll do, and we've seen it.",
    "Tokenizers split text into pieces; a model sees only the ids. Numbers like 12345 and 3.14159 are split per digit.",
    "I'M SURE YOU'RE RIGHT, BUT WE'LL SEE. Don't, can't, won't, shouldn't've.",
    "Le café est très bon, n'est-ce pas ? Où êtes-vous allés hier soir ? Ça va très bien, merci.",
    "Die Straße ist nass, weil es geregnet hat. Größere Häuser kosten mehr Geld, übrigens.",
    "El niño comió una manzana en la mañana. ¿Dónde está la biblioteca? ¡Qué día tan bonito!",
    "Привет, как дела? Я люблю программирование и машинное обучение. Москва — столица России.",
    "Γειά σου κόσμε. Η γλώσσα είναι ελληνική και το αλφάβητο έχει είκοσι τέσσερα γράμματα.",
    "我们今天去公园散步，天气非常好。机器学习是人工智能的一个分支。北京是中国的首都。",
    "東京は日本の首都です。今日はとても暑いですね。ひらがなとカタカナと漢字を使います。",
    "안녕하세요. 저는 한국어를 공부하고 있습니다. 서울은 아름다운 도시입니다.",
    "مرحبا بالعالم. اللغة العربية جميلة جدا. نحن نتعلم البرمجة معًا.",
    "שלום עולם. אני אוהב ללמוד שפות חדשות בכל יום.",
    "नमस्ते दुनिया। मैं हिंदी सीख रहा हूँ। भारत एक विशाल देश है और यहाँ कई भाषाएँ बोली जाती हैं।",
    "வணக்கம் உலகம். தமிழ் ஒரு பழமையான மொழி.",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Xin chào thế giới. Tiếng Việt có nhiều dấu thanh: à á ả ã ạ ằ ắ ẳ ẵ ặ.",
    "Türkçe öğrenmek çok güzel. İstanbul büyük bir şehir.",
    "Zażółć gęślą jaźń. Čeština a slovenčina jsou si blízké.",
    "ქართული ენა ძალიან ლამაზია. Հայերենը հին լեզու է.",
    "Emoji: 😀 😃 😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇩🇪 🇯🇵 🤖 🚀 ✨",
    "Math: ∑ᵢ xᵢ² ≤ ∫₀¹ f(x) dx, α + β = γ, √2 ≈ 1.41421, ∞ ≠ 0, ∀x ∃y: x < y.",
    "Combining: e\u0301 a\u0300 n\u0303 o\u0308 u\u0302 c\u0327 and stacked x\u0301\u0302\u0303 q\u0323\u0307.",
    "Tabs\tand\ttabs\t\tagain, lines\r\nwith CRLF\r\n\r\nand   multiple    spaces    here.\n\n\n",
]

CODE_TEXTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\nreturn sum;\n",
    "#include <stdio.h>\nint main(void) {\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
    "const x = await fetch(`/api/v1/items?id=${id}`);\nif (!x.ok) throw new Error('bad');\n",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;\n",
    "{\"name\": \"voltserve\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"cuda\"], \"ok\": true, \"n\": null}\n",
    "<html><body><div class=\"main\"><p>Hello &amp; welcome</p></div></body></html>\n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    Ok(())\n}\n",
    "$ git commit -m \"fix: handle \\r\\n\" && ./build.sh --release 2>&1 | tee log.txt\n",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nEasy.\n</think>\n\n4<|im_end|>\n",
]

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there would their we him been has when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our over "
    "man me even most made after also did many before must through back years where much your way well down "
    "should because each just those people how too little state good very make world still own see men work long "
    "get here between both life being under never day same another know while last might us great old year off "
    "come since against go came right used take three model token server request response stream batch kernel"
).split()


def random_words(rng: random.Random) -> str:
    n = rng.randint(5, 25)
    out = []
    for _ in range(n):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        out.append(w)
    s = " ".join(out)
    return s + rng.choice([".", "!", "?", ",", ";", ":", "", "\n", "\n\n"])


def random_numbers(rng: random.Random) -> str:
    forms = [
        lambda: str(rng.randint(0, 10**rng.randint(1, 9))),
        lambda: f"{rng.uniform(-1000, 1000):.{rng.randint(1, 5)}f}",
        lambda: f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1900, 2100)}",
        lambda: f"0x{rng.getrandbits(32):08x}",
        lambda: f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}",
    ]
    return " ".join(rng.choice(forms)() for _ in range(rng.randint(1, 6)))


def random_codepoints(rng: random.Random) -> str:
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x0E00, 0x0E7F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1F64F),
              (0x300, 0x36F)]
    lo, hi = rng.choice(blocks)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12)))


def build_corpus(seed: int, n_lines: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.35:
            lines.append(rng.choice(SEED_TEXTS))
        elif r < 0.55:
            lines.append(rng.choice(CODE_TEXTS))
        elif r < 0.8:
            lines.append(random_words(rng))
        elif r < 0.9:
            lines.append(random_numbers(rng))
        else:
            lines.append(random_codepoints(rng))
    return lines


def main() -> None:
    repo = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=repo / "tests/fixtures/tokenizers/qwen35-mini")
    ap.add_argument("--vocab", type=int, default=3000, help="regular (BPE) vocabulary size, 256 bytes included")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--lines", type=int, default=20000)
    args = ap.parse_args()

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab, min_frequency=2, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(build_corpus(args.seed, args.lines), trainer=trainer)
    n_regular = tok.get_vocab_size(with_added_tokens=False)

    for content, special in ADDED_TOKENS:
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        n = tok.add_special_tokens([added]) if special else tok.add_tokens([added])
        assert n == 1, f"{content} was not added"

    args.out.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out / "tokenizer.json"), pretty=True)

    # Added tokens as HF writes them into tokenizer_config.json (transformers reads the flags from here too).
    data = json.loads((args.out / "tokenizer.json").read_text(encoding="utf-8"))
    decoder = {}
    for t in data["added_tokens"]:
        decoder[str(t["id"])] = {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [c for c, s in ADDED_TOKENS if s and c not in ("<|endoftext|>", "<|im_end|>")],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        # transformers 5 rebuilds the pipeline from this class: Qwen2Tokenizer would swap in the Qwen2 regex (no
        # \p{M}); Qwen3_5Tokenizer keeps the file's pipeline, as the real Qwen3.5 configs name it.
        "tokenizer_class": "Qwen3_5Tokenizer",
        "unk_token": None,
    }
    (args.out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n",
                                                    encoding="utf-8")
    first_added = data["added_tokens"][0]["id"]
    assert first_added == n_regular, (first_added, n_regular)
    print(f"wrote {args.out}: {n_regular} regular tokens, {len(data['model']['merges'])} merges, "
          f"added tokens {first_added}..{data['added_tokens'][-1]['id']}")


if __name__ == "__main__":
    main()
