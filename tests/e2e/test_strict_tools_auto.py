"""e2e: strict tools under tool_choice "auto" on a real voltserve (fixture model, CPU). The model is random-weight; a
logit_bias on <tool_call> and on <|im_end|> makes it open calls often and end soon. Every tool_calls entry produced
under strict tools has arguments valid against its tool's schema (the `jsonschema` validator), over several schemas,
streaming and not, n > 1, with thinking on too; the same requests with the tool not strict produce invalid arguments
(so the checks can fail); with no bias the answer is plain text, the same as unconstrained."""
import json
import os

import jsonschema
import openai

import harness
from harness import Checks, Server

MSG = [{"role": "user", "content": "What is the weather?"}]
OFF = {"chat_template_kwargs": {"enable_thinking": False}}

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 10},
    "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "unit": {"enum": ["c", "f"]},
    "detail": {"type": "object", "properties": {"hourly": {"type": "boolean"}},
               "required": ["hourly"], "additionalProperties": False}},
    "required": ["city", "days", "unit", "detail"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {
    "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 1, "maxItems": 3},
    "v": {"anyOf": [{"type": "integer", "minimum": -9, "maximum": 9}, {"type": "null"}]},
    "w": {"type": ["number", "null"], "exclusiveMinimum": 0.5, "maximum": 0.75}},
    "required": ["code", "ids", "v", "w"], "additionalProperties": False}
PING = {"type": "object", "properties": {}, "additionalProperties": False}
SCHEMAS = {"get_weather": WEATHER, "lookup": LOOKUP, "ping": PING}


def tools(strict=("get_weather", "lookup", "ping")):
    out = []
    for name, schema in SCHEMAS.items():
        fn = {"name": name, "parameters": schema}
        if name in strict:
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


def token_id(text):
    with open(os.path.join(harness.MODEL_DIR, "tokenizer.json")) as f:
        for t in json.load(f)["added_tokens"]:
            if t["content"] == text:
                return t["id"]
    raise KeyError(text)


def valid(name, arguments):
    try:
        jsonschema.validate(json.loads(arguments), SCHEMAS[name])
        return True
    except (KeyError, ValueError, jsonschema.ValidationError):
        return False


def main():
    # The fixture's logits are peaked (it repeats a token); these biases make <tool_call> and <|im_end|> win and
    # compete (measured: one or two calls per request, then the end).
    call_bias = {str(token_id("<tool_call>")): 50, str(token_id("<|im_end|>")): 49}
    with Server("--max-running", "8", context=4096) as srv:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        model = client.models.list().data[0].id

        def chat(**kw):
            kw.setdefault("max_tokens", 300)
            kw.setdefault("temperature", 1.0)
            extra = dict(OFF)
            extra.update(kw.pop("extra_body", {}))
            return client.chat.completions.create(model=model, messages=MSG, extra_body=extra, **kw)

        def strict_calls_valid(c):
            n_calls, names = 0, set()
            for seed in range(6):
                r = chat(tools=tools(), tool_choice="auto", seed=seed, logit_bias=call_bias)
                for ch in r.choices:
                    for call in ch.message.tool_calls or []:
                        n_calls += 1
                        names.add(call.function.name)
                        c.check(valid(call.function.name, call.function.arguments),
                                f"seed {seed}: {call.function.name} arguments validate: {call.function.arguments!r}")
                    c.check(ch.finish_reason in ("tool_calls", "stop"), f"seed {seed}: finish {ch.finish_reason}")
            print(f"  {n_calls} strict calls of {sorted(names)}, all checked", flush=True)
            c.check(n_calls >= 6, f"the biased model calls tools ({n_calls} calls in 6 requests)")
            c.check(len(names) >= 2, f"several tools are called: {sorted(names)}")

        def stream_and_n(c):
            stream = chat(tools=tools(), tool_choice="auto", seed=21, n=3, stream=True, logit_bias=call_bias)
            calls, finish = {}, {}
            for chunk in stream:
                for ch in chunk.choices:
                    for d in ch.delta.tool_calls or []:
                        entry = calls.setdefault((ch.index, d.index), {"name": "", "arguments": ""})
                        if d.function and d.function.name:
                            entry["name"] = d.function.name
                        if d.function and d.function.arguments:
                            entry["arguments"] += d.function.arguments
                    if ch.finish_reason:
                        finish[ch.index] = ch.finish_reason
            c.check(sorted(finish) == [0, 1, 2], f"three streamed choices finish: {finish}")
            c.check(len(calls) >= 2, f"streamed calls ({len(calls)})")
            for key, entry in calls.items():
                c.check(valid(entry["name"], entry["arguments"]), f"streamed call {key} validates: {entry}")
            r = chat(tools=tools(), tool_choice="auto", seed=22, n=3, logit_bias=call_bias)
            n = 0
            for ch in r.choices:
                for call in ch.message.tool_calls or []:
                    n += 1
                    c.check(valid(call.function.name, call.function.arguments),
                            f"n=3 choice {ch.index}: {call.function.name} validates: {call.function.arguments!r}")
            c.check(n >= 2, f"n=3 calls ({n})")

        def single_call(c):
            # parallel_tool_calls false: at most one call, then the answer ends; with it true the biased fixture
            # writes two or more in some of the same requests (so the check can fail).
            most = {False: 0, True: 0}
            for parallel in (False, True):
                for seed in range(6):
                    r = chat(tools=tools(), tool_choice="auto", seed=seed, logit_bias=call_bias,
                             parallel_tool_calls=parallel)
                    calls = r.choices[0].message.tool_calls or []
                    most[parallel] = max(most[parallel], len(calls))
                    for call in calls:
                        c.check(valid(call.function.name, call.function.arguments),
                                f"parallel {parallel} seed {seed}: {call.function.name} validates")
            c.check(most[False] == 1, f"parallel_tool_calls false: at most one call, and one made ({most[False]})")
            c.check(most[True] >= 2, f"parallel_tool_calls true: several calls in a request ({most[True]})")

        def not_strict_is_invalid(c):
            # The same requests with get_weather not strict: its calls keep the call's shape (so they parse) but not
            # its schema, and fail it (the checks above can fail); without any strict tool nothing is constrained.
            n_weather, n_invalid = 0, 0
            for seed in range(6):
                r = chat(tools=tools(strict=("ping",)), tool_choice="auto", seed=seed, logit_bias=call_bias)
                for call in r.choices[0].message.tool_calls or []:
                    if call.function.name == "get_weather":
                        n_weather += 1
                        n_invalid += 0 if valid("get_weather", call.function.arguments) else 1
            print(f"  non-strict get_weather: {n_invalid} of {n_weather} calls invalid", flush=True)
            c.check(n_weather >= 1 and n_invalid >= 1,
                    f"non-strict get_weather calls are invalid at least sometimes ({n_invalid} of {n_weather})")
            n_valid = 0
            for seed in range(3):
                r = chat(tools=tools(strict=()), tool_choice="auto", seed=seed, logit_bias=call_bias)
                for call in r.choices[0].message.tool_calls or []:
                    n_valid += 1 if valid(call.function.name, call.function.arguments) else 0
            c.check(n_valid == 0, f"unconstrained noise yields no valid call ({n_valid})")

        def plain_text(c):
            # No bias: the model writes text, which strict tools leave alone.
            for seed in range(3):
                r = chat(tools=tools(), tool_choice="auto", seed=seed, max_tokens=40)
                ch = r.choices[0]
                c.check(bool(ch.message.content) and not ch.message.tool_calls,
                        f"seed {seed}: a text answer under strict tools: {ch.message.content!r}")

        def thinking_on(c):
            # Thinking on: the prompt opens <think> and the biased model writes <tool_call> at once, without
            # </think> (Qwen3.5 does this too; the reasoning parser ends the reasoning there): those calls are
            # constrained as well. A call cut by max_tokens (finish "length") may be incomplete, as everywhere.
            bias = {str(token_id("<tool_call>")): 50, str(token_id("<|im_end|>")): 40}
            n = 0
            for seed in range(3):
                r = client.chat.completions.create(
                    model=model, messages=MSG, tools=tools(), tool_choice="auto", max_tokens=300, temperature=1.0,
                    seed=seed, logit_bias=bias, extra_body={"thinking_token_budget": 5})
                ch = r.choices[0]
                if ch.finish_reason == "length":
                    continue
                for call in ch.message.tool_calls or []:
                    n += 1
                    c.check(valid(call.function.name, call.function.arguments),
                            f"seed {seed}: call with thinking on validates: {call.function.arguments!r}")
            c.check(n >= 1, f"calls with thinking on ({n})")

        Checks().run([strict_calls_valid, stream_and_n, single_call, not_strict_is_invalid, plain_text, thinking_on])


if __name__ == "__main__":
    main()
