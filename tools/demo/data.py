#!/usr/bin/env python3
"""The demo model's data: samples of tasks.py rendered in the chat format (chat_format.py), tokenized, and packed
into fixed-length training rows. Deterministic by seed; nothing is downloaded.

  python3 tools/demo/data.py --n 20 [--split heldout] [--family mul] [--eval-form]   # print samples as JSON lines
  python3 tools/demo/data.py --stats 5000                                             # mix and length statistics

A training example is (prompt ids, completion ids): the prompt is what voltserve renders and tokenizes for the
conversation so far (generation prompt included), the completion what the model must write, ending with
<|im_end|>. The two are tokenized separately, as at inference (the server tokenizes the prompt alone). Only
completion tokens carry loss. Rows hold whole examples separated by <|endoftext|> (no loss), padded with it at
the end; an example longer than a row is cut (counted). Tested by tests/demo/data_test.py.
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_format  # noqa: E402
import pools as pl  # noqa: E402
import tasks  # noqa: E402

TOKENIZER_DIR = os.path.join(HERE, "tokenizer")


def sample_texts(sample):
    return chat_format.split_example(sample.messages, sample.tools, sample.enable_thinking)


def sample_record(sample):
    """A JSON-able view of a sample: the messages, tools, texts and expectation."""
    prompt, completion = sample_texts(sample)
    return {"family": sample.family, "messages": sample.messages, "tools": sample.tools,
            "enable_thinking": sample.enable_thinking, "prompt": prompt, "completion": completion,
            "expect": sample.expect}


def load_tokenizer(path=TOKENIZER_DIR):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(path, "tokenizer.json"))


class ExampleStream:
    """An endless, seeded stream of tokenized training examples (prompt ids, completion ids, family)."""

    def __init__(self, tokenizer, seed, split="train", family=None, batch=256, pools=None, mix=None):
        self.tok, self.mix = tokenizer, mix
        self.rng = random.Random(seed)
        self.split, self.family, self.batch = split, family, batch
        self.pools = pools or pl.Pools()
        self.buffer = []

    def _refill(self):
        samples = [tasks.generate(self.rng, self.split, self.pools, self.family, mix=self.mix) for _ in range(self.batch)]
        texts = [sample_texts(s) for s in samples]
        prompts = self.tok.encode_batch([p for p, _ in texts], add_special_tokens=False)
        completions = self.tok.encode_batch([c for _, c in texts], add_special_tokens=False)
        self.buffer = [(p.ids, c.ids, s.family) for p, c, s in zip(prompts, completions, samples)][::-1]

    def __iter__(self):
        return self

    def __next__(self):
        if not self.buffer:
            self._refill()
        return self.buffer.pop()


class Packer:
    """Packs examples into rows of `seq_len` token ids with a 0/1 loss mask on the tokens to predict."""

    def __init__(self, examples, seq_len, sep_id):
        self.examples = examples
        self.seq_len, self.sep = seq_len, sep_id
        self.pending = None
        self.n_cut = 0
        self.n_examples = 0

    def row(self):
        ids, mask = [], []
        while True:
            ex = self.pending if self.pending is not None else next(self.examples)
            self.pending = None
            p, c, _ = ex
            n = len(p) + len(c) + (1 if ids else 0)
            if ids and len(ids) + n > self.seq_len:
                self.pending = ex
                break
            if ids:
                ids.append(self.sep)
                mask.append(0)
            ids += p + c
            mask += [0] * len(p) + [1] * len(c)
            self.n_examples += 1
            if len(ids) >= self.seq_len:
                if len(ids) > self.seq_len:
                    self.n_cut += 1
                ids, mask = ids[: self.seq_len], mask[: self.seq_len]
                break
        pad = self.seq_len - len(ids)
        return ids + [self.sep] * pad, mask + [0] * pad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10, help="samples to print as JSON lines")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--split", choices=["train", "heldout"], default="train")
    ap.add_argument("--family", choices=sorted(tasks.FAMILIES))
    ap.add_argument("--eval-form", action="store_true", help="the evaluation's exact wording")
    ap.add_argument("--stats", type=int, metavar="N", help="print mix and token-length statistics of N samples")
    ap.add_argument("--seq-len", type=int, default=1024, help="row length for --stats packing figures")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pools = pl.Pools()
    if args.stats:
        tok = load_tokenizer()
        stream = ExampleStream(tok, args.seed, args.split, args.family)
        per = {}
        for _ in range(args.stats):
            p, c, fam = next(stream)
            d = per.setdefault(fam, [0, 0, 0, 0])
            d[0] += 1
            d[1] += len(p)
            d[2] += len(c)
            d[3] = max(d[3], len(p) + len(c))
        total = sum(v[1] + v[2] for v in per.values())
        print(f"{'family':16s} {'share':>6s} {'prompt':>7s} {'compl.':>7s} {'max':>5s} {'tokens%':>8s}")
        for fam, (n, pt, ct, mx) in sorted(per.items(), key=lambda kv: -kv[1][0]):
            print(f"{fam:16s} {n / args.stats:6.3f} {pt / n:7.1f} {ct / n:7.1f} {mx:5d} {100 * (pt + ct) / total:8.1f}")
        packer = Packer(ExampleStream(tok, args.seed), args.seq_len, tok.token_to_id(chat_format.EOT))
        rows = [packer.row() for _ in range(200)]
        used = sum(sum(1 for t in m) for _, m in rows)
        loss = sum(sum(m) for _, m in rows)
        pad = sum(len(r) - len(r.__class__(x for x in r)) for r, _ in rows)
        print(f"packing {args.seq_len}: {packer.n_examples / len(rows):.1f} examples/row, "
              f"{100 * loss / (len(rows) * args.seq_len):.1f}% of tokens carry loss, {packer.n_cut} cut, {pad}")
        return
    for _ in range(args.n):
        s = tasks.generate(rng, args.split, pools, args.family, args.eval_form)
        print(json.dumps(sample_record(s), ensure_ascii=False))


if __name__ == "__main__":
    main()
