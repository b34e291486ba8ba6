#!/usr/bin/env python3
"""Trains the demo model's tokenizer (tools/demo/tokenizer/): a byte-level BPE in the exact Qwen3.5 style, on the
demo training data.

The pipeline is the real Qwen3.5 one (MODEL.md 6.1; the same code as tools/tokenizer_train_fixture.py, imported
from it): NFC, the Qwen3.5 split regex (digits one by one), ByteLevel, no unk, then the 33 Qwen3.5 added tokens in
their order and with their special flags (<|endoftext|> <|im_start|> <|im_end|> ... <tool_call> </tool_call> ...
<tool_response> </tool_response> <think> </think> ...) right after the regular vocabulary. The corpus is training
samples of tools/demo/tasks.py (prompts and completions), so held-out values never shape the merges.
tokenizer_config.json is written as a real Qwen3.5 checkpoint has it; chat_template.jinja is committed beside it.

    python3 tools/demo/make_tokenizer.py [--vocab 4000] [--samples 40000] [--seed 7]
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import chat_format  # noqa: E402
import pools as pl  # noqa: E402
import tasks  # noqa: E402
from tokenizer_train_fixture import ADDED_TOKENS, QWEN35_REGEX  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402


def corpus(n, seed):
    rng = random.Random(seed)
    pools = pl.Pools()
    for _ in range(n):
        s = tasks.generate(rng, "train", pools)
        prompt, completion = chat_format.split_example(s.messages, s.tools, s.enable_thinking)
        yield prompt + completion


def build(vocab, n_samples, seed):
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    # The added tokens are known to the trainer as specials so no merge spans them; they get their real ids below.
    specials = [c for c, _ in ADDED_TOKENS]
    trainer = trainers.BpeTrainer(vocab_size=vocab + len(specials), min_frequency=2, show_progress=False,
                                  special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(n_samples, seed), trainer=trainer)
    # Rebuild with the added tokens after the regular vocabulary (Qwen's layout: ids vocab .. vocab+32).
    data = json.loads(tok.to_str())
    regular = {t: i for t, i in data["model"]["vocab"].items() if t not in specials}
    order = sorted(regular, key=regular.get)
    data["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    data["added_tokens"] = []
    out = Tokenizer.from_str(json.dumps(data))
    for content, special in ADDED_TOKENS:
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        n = out.add_special_tokens([added]) if special else out.add_tokens([added])
        assert n == 1, f"{content} was not added"
    return out, len(order)


def tokenizer_config(data):
    decoder = {}
    for t in data["added_tokens"]:
        decoder[str(t["id"])] = {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
    return {
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
        # transformers 5 rebuilds the pipeline from this class; Qwen3_5Tokenizer keeps the Qwen3.5 regex (\p{M}).
        "tokenizer_class": "Qwen3_5Tokenizer",
        "unk_token": None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "tokenizer"))
    ap.add_argument("--vocab", type=int, default=4000, help="regular (BPE) vocabulary, the 256 bytes included")
    ap.add_argument("--samples", type=int, default=40000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    tok, n_regular = build(args.vocab, args.samples, args.seed)
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"), pretty=True)
    data = json.loads(tok.to_str())
    assert data["added_tokens"][0]["id"] == n_regular, (data["added_tokens"][0]["id"], n_regular)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(data), f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.out}: {n_regular} regular tokens, {len(data['model']['merges'])} merges, added tokens "
          f"{n_regular}..{data['added_tokens'][-1]['id']}")


if __name__ == "__main__":
    main()
