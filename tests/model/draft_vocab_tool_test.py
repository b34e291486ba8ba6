#!/usr/bin/env python3
"""tools/draft_vocab.py on the demo model's tokenizer: added tokens first, then the corpus's tokens by frequency,
cut at --n; the file is what engine/model/draft_vocab.h reads (a JSON array of distinct ids)."""
import json
import os
import subprocess
import sys
import tempfile

src = os.environ.get("VOLTSERVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
model = os.path.join(src, "models", "demo")
try:
    from tokenizers import Tokenizer
except ImportError:
    print("tokenizers is not installed (scripts/setup.sh installs it)")
    sys.exit(1)
tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
with tempfile.TemporaryDirectory() as d:
    corpus = os.path.join(d, "c.txt")
    with open(corpus, "w") as f:
        f.write("banana " * 500 + "apple " * 50 + "cherry " * 5)
    with open(os.path.join(d, "c.jsonl"), "w") as f:
        f.write(json.dumps({"messages": [{"role": "user", "content": "kiwi " * 200}]}) + "\n")
    def run(n):
        out = os.path.join(d, f"draft_vocab_{n}.json")
        subprocess.run([sys.executable, os.path.join(src, "tools", "draft_vocab.py"), "--model", model, "--corpus",
                        corpus, os.path.join(d, "c.jsonl"), "--n", str(n), "--out", out], check=True)
        return json.load(open(out))
    ids = run(1000)
    cut = run(36)
added = sorted(tok.get_added_tokens_decoder().keys())
corpus_ids = set()
for text in ["banana " * 500 + "apple " * 50 + "cherry " * 5, "kiwi " * 200]:
    corpus_ids.update(tok.encode(text, add_special_tokens=False).ids)
assert len(set(ids)) == len(ids), "ids are distinct"
assert ids[: len(added)] == added, "added tokens lead"
assert set(ids[len(added):]) == corpus_ids - set(added), "every corpus token (the .jsonl messages too), nothing else"
assert len(cut) == 36 and cut == ids[:36], "--n cuts the same order"
# The most frequent corpus token ("banana", 500 times) comes first after the added ones.
assert ids[len(added)] in set(tok.encode("banana " * 3, add_special_tokens=False).ids), ids[len(added):][:5]
print(f"ok: {len(ids)} ids, {len(added)} added tokens first, most frequent corpus token {ids[len(added)]}")
