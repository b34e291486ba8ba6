#!/usr/bin/env python3
"""Differential test of voltserve's chat-template engine against Hugging Face transformers.

Renders every case with transformers (apply_chat_template / its compiled Jinja environment, the reference) and with
voltserve (`render --batch` and `render --model DIR --request F`), and requires byte-identical text. Where transformers
raises, voltserve must fail too, and for the template's own raise_exception(...) with the same message.

  tests/chat/template_snippets.json  small templates exercising each interpreter feature, rendered with fixed
                                     variables (the transformers side uses the exact environment apply_chat_template
                                     builds: trim_blocks, lstrip_blocks, sandbox, its tojson, raise_exception, ...)
  tests/chat/conversations.json      chat-completions request bodies, rendered with the Qwen3 template (from the
                                     real Qwen3 tokenizer_config.json) and tests/fixtures/templates/qwen3_{5,6,8}.jinja
  random whitespace templates        seeded random mixes of text, spaces, tabs, newlines and tags with every
                                     whitespace-control form, for the lexer's trim_blocks/lstrip_blocks rules

The request preprocessing below is the contract of render_chat_prompt (server/chat/chat_prompt.h): what a server does
before apply_chat_template (vLLM-style argument parsing, developer -> system, reasoning_effort).

Usage: tools/template_diff.py --render build/voltserve [--qwen3-dir build/fixtures/tokenizers/qwen3] [-v]
(the Qwen3 folder is tests/fixtures/tokenizers/qwen3 as unpacked by configuring the build)
Exit status 0 only when every case matches.
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = ("qwen3_5", "qwen3_6", "qwen3_8")


def preprocess(request):
    """The request -> (messages, tools, kwargs, add_generation_prompt) mapping render_chat_prompt implements."""
    messages = []
    for m in request["messages"]:
        m = copy.deepcopy(m)
        if m.get("role") == "developer":
            m["role"] = "system"
        if m.get("tool_calls") is not None:
            if m["tool_calls"] == []:
                del m["tool_calls"]
            else:
                for call in m["tool_calls"]:
                    fn = call.get("function")
                    if fn is None:
                        continue
                    args = fn.get("arguments")
                    if args is None or (isinstance(args, str) and not args.strip()):
                        fn["arguments"] = {}
                    elif isinstance(args, str):
                        fn["arguments"] = json.loads(args)
        messages.append(m)
    kwargs = {}
    effort = request.get("reasoning_effort")
    if effort is not None:
        if effort == "none":
            kwargs["enable_thinking"] = False
        else:
            kwargs["reasoning_effort"] = effort
    kwargs.update(request.get("chat_template_kwargs") or {})
    return messages, request.get("tools"), kwargs, request.get("add_generation_prompt", True)


def hf_result(fn):
    import jinja2

    try:
        return {"ok": True, "text": fn()}
    except Exception as e:  # noqa: BLE001 - any failure of the reference is compared as a failure
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "raised": type(e) is jinja2.exceptions.TemplateError,
                "message": str(e)}


def compare(name, ref, got, failures, verbose):
    if ref["ok"] and got.get("ok"):
        if ref["text"] == got["text"]:
            return "same"
        failures.append(f"{name}: output differs\n  transformers: {ref['text']!r}\n  voltserve:    {got['text']!r}")
        return "diff"
    if not ref["ok"] and not got.get("ok"):
        if ref["raised"] and (not got.get("raised_by_template", True) or ref["message"] not in got.get("error", "")):
            failures.append(f"{name}: raise_exception message differs\n  transformers: {ref['message']!r}\n"
                            f"  voltserve:    {got.get('error')!r}")
            return "diff"
        if verbose:
            print(f"  {name}: both fail\n    transformers: {ref['error']}\n    voltserve:    {got.get('error')}")
        return "both_fail"
    failures.append(f"{name}: only one side failed\n  transformers: {ref.get('error', repr(ref.get('text')))}\n"
                    f"  voltserve:    {got.get('error', repr(got.get('text')))}")
    return "diff"


def run_batch(render, cases):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
        path = f.name
    try:
        proc = subprocess.run([render, "render", "--batch", path], capture_output=True, timeout=600)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        sys.exit(f"{render} render --batch failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    results = json.loads(proc.stdout.decode("utf-8"))
    if len(results) != len(cases):
        sys.exit(f"render --batch returned {len(results)} results for {len(cases)} cases")
    return results


def run_cli(render, model_dir, request):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(request, f, ensure_ascii=False)
        path = f.name
    try:
        proc = subprocess.run([render, "render", "--model", model_dir, "--request", path], capture_output=True,
                              timeout=120)
    finally:
        os.unlink(path)
    if proc.returncode == 0:
        return {"ok": True, "text": proc.stdout.decode("utf-8")}
    return {"ok": False, "error": proc.stderr.decode("utf-8", errors="replace")}


def random_templates(n, seed):
    """Seeded random templates mixing text, spaces, tabs, newlines and tags with -/+ whitespace control."""
    import random

    rng = random.Random(seed)
    texts = ["", " ", "  ", "\t", "\n", "\n\n", " \n ", "x", "a b", "\n  ", "  \n", "\r\n", "\u3000", "\xa0"]
    out = []
    for _ in range(n):
        parts, stack = [], []
        for _ in range(rng.randint(1, 12)):
            parts.append(rng.choice(texts))
            open_mod = rng.choice(["", "-", "+"])
            close_mod = rng.choice(["", "-", "+"])
            kind = rng.random()
            if kind < 0.25:
                parts.append("{%" + open_mod + " if " + rng.choice(["true", "false", "x"]) + " " + close_mod + "%}")
                stack.append("endif")
            elif kind < 0.4 and stack:
                parts.append("{%" + open_mod + " " + stack.pop() + " " + close_mod + "%}")
            elif kind < 0.5:
                parts.append("{%" + open_mod + " for i in [1, 2] " + close_mod + "%}")
                stack.append("endfor")
            elif kind < 0.65:
                parts.append("{{" + rng.choice(["", "-"]) + " " + rng.choice(["'v'", "i", "' '", "'\\n'"]) + " " +
                             rng.choice(["", "-"]) + "}}")
            elif kind < 0.75:
                parts.append("{#" + open_mod + " c " + close_mod + "#}")
            elif kind < 0.8:
                parts.append("{%" + open_mod + " set y = 1 " + close_mod + "%}")
            elif kind < 0.85:
                parts.append("{%" + open_mod + " raw " + close_mod + "%}" + rng.choice(texts) + " {{ r }} " +
                             "{%" + rng.choice(["", "-", "+"]) + " endraw " + rng.choice(["", "-", "+"]) + "%}")
        while stack:
            parts.append(rng.choice(texts) + "{% " + stack.pop() + " %}")
        parts.append(rng.choice(texts))
        out.append("".join(parts))
    return out


def summarize(label, counts):
    total = sum(counts.values())
    print(f"{label}: {total} cases, {counts['same']} identical, {counts['both_fail']} failing on both sides, "
          f"{counts['diff']} mismatches")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", required=True, help="binary with the `render` command (build/voltserve)")
    ap.add_argument("--qwen3-dir", default=os.path.join(ROOT, "build", "fixtures", "tokenizers", "qwen3"),
                    help="the real Qwen3 tokenizer folder as the build unpacks it (default: build/fixtures/...)")
    ap.add_argument("--snippets", default=os.path.join(ROOT, "tests", "chat", "template_snippets.json"))
    ap.add_argument("--conversations", default=os.path.join(ROOT, "tests", "chat", "conversations.json"))
    ap.add_argument("--random-templates", type=int, default=2000, help="how many random whitespace templates")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    from transformers import AutoTokenizer
    from transformers.utils.chat_template_utils import _compile_jinja_template

    if not os.path.isfile(os.path.join(args.qwen3_dir, "tokenizer_config.json")):
        sys.exit(f"missing the Qwen3 tokenizer at {args.qwen3_dir} (configure the build, which unpacks "
                 "tests/fixtures/tokenizers/qwen3, or pass --qwen3-dir)")
    tok = AutoTokenizer.from_pretrained(args.qwen3_dir)
    templates = {"qwen3": tok.chat_template}
    for name in TEMPLATES:
        with open(os.path.join(ROOT, "tests", "fixtures", "templates", name + ".jinja"), encoding="utf-8") as f:
            templates[name] = f.read()
    eos = tok.special_tokens_map.get("eos_token", "")
    bos = tok.special_tokens_map.get("bos_token", "") or ""
    failures = []

    # 1. Interpreter features: each snippet with its variables, as transformers' environment renders it.
    with open(args.snippets, encoding="utf-8") as f:
        snippets = json.load(f)

    def hf_snippet(s):
        return _compile_jinja_template(s["template"]).render(**s["variables"])

    refs = [hf_result(lambda s=s: hf_snippet(s)) for s in snippets]
    got = run_batch(args.render, [{"template": s["template"], "variables": s["variables"]} for s in snippets])
    counts = {"same": 0, "both_fail": 0, "diff": 0}
    for i, (s, r, g) in enumerate(zip(snippets, refs, got)):
        counts[compare(f"snippet {i} {s['template'][:60]!r}", r, g, failures, args.verbose)] += 1
    summarize("snippets", counts)

    # 1b. Whitespace control on seeded random templates.
    randoms = random_templates(args.random_templates, args.seed)
    refs = [hf_result(lambda t=t: _compile_jinja_template(t).render(i=0)) for t in randoms]
    got = run_batch(args.render, [{"template": t, "variables": {"i": 0}} for t in randoms])
    counts = {"same": 0, "both_fail": 0, "diff": 0}
    for t, r, g in zip(randoms, refs, got):
        counts[compare(f"random template {t!r}", r, g, failures, args.verbose)] += 1
    summarize(f"random whitespace templates (seed {args.seed})", counts)

    # 2. Conversations x templates through render_chat_prompt (batch) and apply_chat_template.
    with open(args.conversations, encoding="utf-8") as f:
        conversations = json.load(f)
    if len(conversations) < 25:
        sys.exit(f"only {len(conversations)} conversations; the acceptance asks for at least 25")
    batch, refs, names = [], [], []
    for tname, src in templates.items():
        for conv in conversations:
            req = conv["request"]

            def hf_conv(req=req, src=src):
                messages, tools, kwargs, agp = preprocess(req)
                return tok.apply_chat_template(messages, tools=tools, chat_template=src, add_generation_prompt=agp,
                                               tokenize=False, **kwargs)

            refs.append(hf_result(hf_conv))
            batch.append({"template": src, "request": req, "add_generation_prompt": req.get("add_generation_prompt", True),
                          "bos_token": bos, "eos_token": eos})
            names.append(f"{tname}/{conv['name']}")
    got = run_batch(args.render, batch)
    per_template = {t: {"same": 0, "both_fail": 0, "diff": 0} for t in templates}
    for name, r, g in zip(names, refs, got):
        per_template[name.split("/")[0]][compare(name, r, g, failures, args.verbose)] += 1
    for t, c in per_template.items():
        summarize(f"conversations with {t}", c)

    # 3. The CLI end to end: `render --model DIR --request F` reading the template and eos from a model folder.
    tmp = tempfile.mkdtemp(prefix="template_diff_")
    try:
        dirs = {"qwen3": args.qwen3_dir}
        with open(os.path.join(args.qwen3_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config.pop("chat_template", None)
        for name in TEMPLATES:
            d = os.path.join(tmp, name)
            os.makedirs(d)
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f)
            shutil.copy(os.path.join(ROOT, "tests", "fixtures", "templates", name + ".jinja"),
                        os.path.join(d, "chat_template.jinja"))
            dirs[name] = d
        counts = {"same": 0, "both_fail": 0, "diff": 0}
        index = {n: r for n, r in zip(names, refs)}
        for tname, d in dirs.items():
            for conv in conversations:
                name = f"cli {tname}/{conv['name']}"
                counts[compare(name, index[f"{tname}/{conv['name']}"], run_cli(args.render, d, conv["request"]),
                               failures, args.verbose)] += 1
        summarize("voltserve render --model", counts)
    finally:
        shutil.rmtree(tmp)

    for f in failures:
        print("MISMATCH " + f)
    if failures:
        print(f"{len(failures)} mismatches")
        return 1
    print("all cases identical to transformers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
