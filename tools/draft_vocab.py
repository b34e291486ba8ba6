#!/usr/bin/env python3
"""Writes a model's draft vocabulary for speculative decoding: draft_vocab.json, the token ids that occur most often
when the model's tokenizer encodes a corpus, most frequent first (engine/model/draft_vocab.h reads the first
--draft-vocab N of them). The tokenizer's added tokens (<|im_end|>, <think>, <tool_call> ...) always lead the list:
a chat's replies end with them. Use a corpus like the traffic to be served (chats, code, the languages in use).

  python3 tools/draft_vocab.py --model DIR --corpus a.txt b.jsonl ... [--n 32768] [--out DIR/draft_vocab.json]

.jsonl lines contribute their "text" field, or every string in their "messages" contents; other files their text.
"""
import argparse
import collections
import json
import os
import sys


def texts(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        if not path.endswith(".jsonl"):
            yield f.read()
            return
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = json.loads(line)
            if isinstance(row.get("text"), str):
                yield row["text"]
            for m in row.get("messages", []) or []:
                if isinstance(m, dict) and isinstance(m.get("content"), str):
                    yield m["content"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder with tokenizer.json")
    ap.add_argument("--corpus", nargs="+", required=True, help="text or .jsonl files")
    ap.add_argument("--n", type=int, default=32768, help="ids to write (default 32768)")
    ap.add_argument("--out", help="default: MODEL/draft_vocab.json")
    a = ap.parse_args()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    counts = collections.Counter()
    n_tokens = 0
    for path in a.corpus:
        for text in texts(path):
            ids = tok.encode(text, add_special_tokens=False).ids
            counts.update(ids)
            n_tokens += len(ids)
    if n_tokens == 0:
        sys.exit("draft_vocab: the corpus encodes to no tokens")
    added = sorted(tok.get_added_tokens_decoder().keys())
    order = added + [i for i, _ in counts.most_common() if i not in set(added)]
    order = order[: a.n]
    covered = sum(counts[i] for i in order)
    out = a.out or os.path.join(a.model, "draft_vocab.json")
    with open(out, "w") as f:
        json.dump(order, f)
    print(f"draft_vocab: {len(order)} ids ({len(added)} added tokens) cover {100.0 * covered / n_tokens:.2f}% of "
          f"{n_tokens} corpus tokens ({len(counts)} distinct) -> {out}")


if __name__ == "__main__":
    main()
