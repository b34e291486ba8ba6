#!/usr/bin/env python3
"""Tests of the demo data (tools/demo): the worked arithmetic re-checked step by step, extraction answers that are
valid JSON with exactly the asked keys copied from the request, a held-out split disjoint from training, and — through
voltserve itself — training prompts byte-identical to what voltserve renders from the same messages with the demo
template, voltserve's tokenizer agreeing with `tokenizers` on them, and every completion parsed by voltserve's
reasoning and tool-call parsers into the reasoning, content and tool calls the data meant. Run by ctest (demo_data);
VOLTSERVE_BINARY and VOLTSERVE_DEMO_PARSE name the binaries."""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

REPO = os.environ.get("VOLTSERVE_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "tools", "demo")
sys.path.insert(0, DEMO)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import chat_format  # noqa: E402
import data  # noqa: E402
import evaluate  # noqa: E402
import pools as pl  # noqa: E402
import tasks  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


EXPR = re.compile(r"(?<![\d)])(-?\d+(?:\s*[-+*]\s*\d+)+)\s*=\s*(-?\d+)")
WRITE_CARRY = re.compile(r"= (\d+), write (\d+), carry (\d+)")


def check_arithmetic(sample):
    msg = sample.messages[-1]
    exp = sample.expect
    lines = msg["reasoning_content"].split("\n")
    n_checked = 0
    for line in lines:
        for expr, value in EXPR.findall(line):
            n_checked += 1
            check(eval(expr) == int(value), f"{sample.family}: wrong step {line!r}")  # digits and + - * only
        m = WRITE_CARRY.search(line)
        if m:
            v, w, c = map(int, m.groups())
            check(w == v % 10 and c == v // 10, f"{sample.family}: wrong write/carry in {line!r}")
        if "borrow 1" in line:
            check("is negative" in line, f"{sample.family}: borrow without a negative column in {line!r}")
    a, b, op = exp["a"], exp["b"], exp["op"]
    truth = {"+": a + b, "-": a - b, "*": a * b}[op]
    check(exp["value"] == truth, f"{sample.family}: expected value {exp['value']} for {a} {op} {b}")
    check(lines[-1].endswith(f"= {truth}"), f"{sample.family}: reasoning ends {lines[-1]!r}, not = {truth}")
    check(n_checked >= 1, f"{sample.family}: only {n_checked} checkable steps in {lines}")
    nums = re.findall(r"-?\d+", msg["content"])
    check(nums and int(nums[-1]) == truth, f"{sample.family}: answer {msg['content']!r} is not {truth}")


def check_extraction(sample):
    exp = sample.expect
    content = sample.messages[-1]["content"]
    try:
        value = json.loads(content)
    except ValueError:
        check(False, f"{sample.family}: not JSON: {content!r}")
        return
    check(list(value) == exp["keys"], f"{sample.family}: keys {list(value)} != asked {exp['keys']}")
    question = sample.messages[-2]["content"]
    for k in exp["keys"]:
        check(k in question, f"{sample.family}: key {k} not named in {question!r}")
        v = value.get(k)
        if v is not None:
            check(str(v) in question, f"{sample.family}: value {v!r} of {k} is not in the request {question!r}")


def test_values():
    rng = random.Random(5)
    pools = pl.Pools()
    counts = {}
    for split in ("train", "heldout"):
        for fam in tasks.FAMILIES:
            for i in range(40):
                s = tasks.generate(rng, split, pools, fam, eval_form=(i % 2 == 0))
                counts[fam] = counts.get(fam, 0) + 1
                if fam in ("add", "sub", "mul"):
                    check_arithmetic(s)
                    check(pl.is_heldout(f"{s.expect['op']}:{s.expect['a']}:{s.expect['b']}") == (split == "heldout"),
                          f"{fam}: operands {s.expect} in the wrong split ({split})")
                elif fam in ("person", "order", "event"):
                    check_extraction(s)
    # The evaluation's exact wording (issue 22).
    s = tasks.generate(rng, "heldout", pools, "add", eval_form=True)
    check(re.fullmatch(r"What is \d+ \+ \d+\?", s.messages[0]["content"]), f"eval wording {s.messages[0]}")
    s = tasks.generate(rng, "heldout", pools, "person", eval_form=True)
    check(s.messages[0]["content"].startswith("Extract the name, age and city as JSON: "), f"eval wording {s.messages}")
    s = tasks.generate(rng, "heldout", pools, "weather", eval_form=True)
    check(re.fullmatch(r"What's the weather in .+\?", s.messages[0]["content"]) and len(s.tools) == 1,
          f"eval wording {s.messages} {s.tools}")


def test_split_disjoint():
    pools = pl.Pools()
    for name, p in pools.pools.items():
        if name == "job":
            continue
        if name.startswith("real_"):  # the short lists of real-style names: both splits hold some
            check(len(p["heldout"]) >= 5 and len(p["train"]) > 3 * len(p["heldout"]),
                  f"pool {name}: {len(p['train'])} train / {len(p['heldout'])} held-out values")
        else:
            check(len(p["heldout"]) > 20 and len(p["train"]) > 5 * len(p["heldout"]),
                  f"pool {name}: {len(p['train'])} train / {len(p['heldout'])} held-out values")
        check(not set(p["train"]) & set(p["heldout"]), f"pool {name}: a value in both splits")
    rng = random.Random(9)
    train_cities = {pools.pick(rng, "city", "train") for _ in range(3000)}
    held = [tasks.generate(rng, "heldout", pools, "weather", eval_form=True) for _ in range(200)]
    leaked = [s.expect["calls"][0]["arguments"]["city"] for s in held
              if s.expect["calls"][0]["arguments"]["city"] in train_cities]
    check(not leaked, f"held-out weather cities seen in training draws: {leaked[:5]}")
    train_names = {pools.person_name(rng, "train") for _ in range(3000)}
    people = [tasks.generate(rng, "heldout", pools, "person", eval_form=True) for _ in range(200)]
    check(not [p for p in people if p.expect["value"]["name"] in train_names], "held-out names seen in training")


def test_tool_variants():
    """A varied tool offer stays self-consistent: every call names an offered tool and only its parameters, with
    every required one."""
    pools, rng = pl.Pools(), random.Random(11)
    varied = 0
    for _ in range(600):
        s = tasks.generate(rng, "train", pools, rng.choice(["weather", "tool", "tool_answer", "weather_answer",
                                                             "no_tool"]))
        offered = {t["function"]["name"]: t["function"]["parameters"] for t in s.tools or []}
        varied += any(n not in tasks.TOOLS for n in offered)
        for m in s.messages:
            for c in m.get("tool_calls") or []:
                fn = c["function"]
                params = offered.get(fn["name"])
                if not check(params is not None, f"{s.family}: call {fn['name']} not offered ({list(offered)})"):
                    continue
                check(set(fn["arguments"]) <= set(params["properties"]) and set(params["required"]) <= set(fn["arguments"]),
                      f"{s.family}: arguments {fn['arguments']} against {params}")
        if s.family == "no_tool" and "weather" in s.messages[-2]["content"]:
            check(not any("weather" in n.lower() for n in offered), f"no_tool offers a weather tool: {list(offered)}")
    check(varied > 150, f"only {varied} of 600 tool samples offered a variant")
    for _ in range(50):
        s = tasks.generate(rng, "heldout", pools, "weather", eval_form=True)
        check([t["function"]["name"] for t in s.tools] == ["get_weather"], "the evaluation offers the canonical tool")


def test_mix():
    check(tasks.parse_mix("") == {}, "empty --mix")
    check(tasks.parse_mix("person=0.3, weather=0") == {"person": 0.3, "weather": 0.0}, "--mix parsing")
    for bad in ("persons=1", "person", "person=-1", "person=x"):
        try:
            tasks.parse_mix(bad)
            check(False, f"--mix {bad!r} accepted")
        except ValueError:
            pass
    pools, rng = pl.Pools(), random.Random(3)
    only = {n: 0.0 for n in tasks.FAMILIES}
    only["person"] = 1.0
    families = {tasks.generate(rng, "train", pools, mix=only).family for _ in range(200)}
    check(families == {"person"}, f"a mix giving only person drew {families}")
    drawn = [tasks.generate(rng, "train", pools, mix={"person": 1.0}).family for _ in range(2000)]
    share = drawn.count("person") / len(drawn)
    check(0.45 < share < 0.62, f"person share {share:.2f} with weight 1.0 against the others' 1.0 (expect ~0.53)")


def test_evaluate_scoring():
    pools = pl.Pools()
    rng = random.Random(3)
    for fam in evaluate.THRESHOLDS:
        s = tasks.generate(rng, "heldout", pools, fam, eval_form=True)
        m = dict(s.messages[-1])
        if m.get("tool_calls"):
            m["tool_calls"] = [{"type": "function", "function": {"name": c["function"]["name"],
                                                                 "arguments": json.dumps(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        ok, why = evaluate.score(s, m)
        check(ok, f"evaluate.score rejects the reference answer of {fam}: {why}")
        bad = dict(m)
        if fam in ("add", "sub", "mul"):
            bad["content"] = f"The answer is {s.expect['value'] + 1}."
        elif fam == "person":
            bad["content"] = json.dumps({**s.expect["value"], "job": None})
        else:
            bad["tool_calls"] = [{"type": "function", "function": {"name": "get_weather",
                                                                   "arguments": json.dumps({"city": "Nowhere"})}}]
        ok, _ = evaluate.score(s, bad)
        check(not ok, f"evaluate.score accepts a wrong answer of {fam}: {bad}")


def samples_of_every_family(n_per_family, seed):
    rng = random.Random(seed)
    pools = pl.Pools()
    out = []
    for fam in tasks.FAMILIES:
        for _ in range(n_per_family):
            out.append(tasks.generate(rng, "train", pools, fam))
    # The mix's variations (system prompts, history, thinking off) must be among them.
    out += [tasks.generate(rng, "train", pools) for _ in range(60)]
    return out


def request_of(sample, upto):
    req = {"messages": sample.messages[:upto]}
    if sample.tools:
        req["tools"] = sample.tools
    req["chat_template_kwargs"] = {"enable_thinking": sample.enable_thinking}
    return req


def test_through_voltserve(binary, parse_binary):
    samples = samples_of_every_family(4, 11)
    check(any(not s.enable_thinking for s in samples), "no sample with thinking off")
    check(any(s.messages[0]["role"] == "system" for s in samples), "no sample with a system prompt")
    with open(os.path.join(DEMO, "tokenizer", "chat_template.jinja")) as f:
        template = f.read()
    cases = []
    for s in samples:
        cases.append({"template": template, "request": request_of(s, -1), "bos_token": "", "eos_token": "<|im_end|>",
                      "add_generation_prompt": True})
        cases.append({"template": template, "request": request_of(s, len(s.messages)), "bos_token": "",
                      "eos_token": "<|im_end|>", "add_generation_prompt": False})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.json")
        with open(path, "w") as f:
            json.dump(cases, f, ensure_ascii=False)
        out = subprocess.run([binary, "render", "--batch", path], capture_output=True, text=True, check=True)
        rendered = json.loads(out.stdout)
        check(len(rendered) == len(cases), f"render --batch returned {len(rendered)} of {len(cases)}")
        texts = []
        for i, s in enumerate(samples):
            prompt, completion = data.sample_texts(s)
            texts.append((prompt, completion))
            r_prompt, r_full = rendered[2 * i], rendered[2 * i + 1]
            if not check(r_prompt.get("ok") and r_full.get("ok"), f"{s.family}: voltserve render failed: {r_prompt} {r_full}"):
                continue
            check(r_prompt["text"] == prompt, f"{s.family}: training prompt differs from voltserve's render:\n"
                  f"  ours:      {prompt!r}\n  voltserve: {r_prompt['text']!r}")
            # The whole conversation rendered as history is the prompt, the completion and the turn's newline.
            check(r_full["text"] == prompt + completion + "\n", f"{s.family}: prompt + completion differs from the "
                  f"rendered conversation:\n  ours:      {prompt + completion!r}\n  voltserve: {r_full['text']!r}")

        # voltserve's tokenizer agrees with `tokenizers` on the training texts (special tokens parsed).
        tok = data.load_tokenizer()
        for i, (prompt, completion) in enumerate(texts[:: max(1, len(texts) // 25)]):
            text = prompt + completion
            p = os.path.join(tmp, "text.txt")
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            got = json.loads(subprocess.run([binary, "tokenize", "--tokenizer", os.path.join(DEMO, "tokenizer"),
                                             "--file", p, "--special"], capture_output=True, text=True,
                                            check=True).stdout)["ids"]
            want = tok.encode(text, add_special_tokens=False).ids
            check(got == want, f"tokenizer disagreement on {text[:60]!r}...: voltserve {got[:20]}... vs {want[:20]}...")
            # Prompt and completion are tokenized apart in training, as the server tokenizes the prompt alone;
            # the split must fall on a token boundary so the model sees the ids it will see at inference.
            split = tok.encode(prompt, add_special_tokens=False).ids + tok.encode(completion, add_special_tokens=False).ids
            check(split == want, f"prompt/completion split is not a token boundary in {text[:60]!r}")

        # voltserve's reasoning + tool-call parsing recovers what the data meant.
        parse_cases = [{"prompt": p, "completion": c, "tools": s.tools} for s, (p, c) in zip(samples, texts)]
        with open(path, "w") as f:
            json.dump(parse_cases, f, ensure_ascii=False)
        parsed = json.loads(subprocess.run([parse_binary, path], capture_output=True, text=True, check=True).stdout)
        n_calls = 0
        for s, got in zip(samples, parsed):
            m = s.messages[-1]
            want_calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                          for c in m.get("tool_calls") or []]
            n_calls += len(want_calls)
            check(got["reasoning"].strip() == (m.get("reasoning_content") or "").strip(),
                  f"{s.family}: parsed reasoning {got['reasoning']!r} != {m.get('reasoning_content')!r}")
            check(got["content"].strip() == (m.get("content") or "").strip(),
                  f"{s.family}: parsed content {got['content']!r} != {m.get('content')!r}")
            check(got["calls"] == want_calls, f"{s.family}: parsed tool calls {got['calls']} != {want_calls}")
        check(n_calls >= 10, f"only {n_calls} tool calls among the parsed samples")
        print(f"through voltserve: {len(samples)} samples rendered (prompt and whole conversation), "
              f"{len(texts[:: max(1, len(texts) // 25)])} tokenized, {len(parsed)} parsed ({n_calls} tool calls)")


def main():
    binary = os.environ.get("VOLTSERVE_BINARY", os.path.join(REPO, "build", "voltserve"))
    parse_binary = os.environ.get("VOLTSERVE_DEMO_PARSE", os.path.join(REPO, "build", "tests", "demo",
                                                                         "demo_parse_check"))
    test_values()
    test_split_disjoint()
    test_mix()
    test_tool_variants()
    test_evaluate_scoring()
    for b in (binary, parse_binary):
        check(os.path.exists(b), f"missing binary {b} (build the voltserve and demo_parse_check targets)")
    if not FAILURES:
        test_through_voltserve(binary, parse_binary)
    for f in FAILURES[:40]:
        print("FAIL:", f)
    print(f"demo data test: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
