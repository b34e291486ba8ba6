"""e2e: structured output on a real voltserve (fixture model, CPU). The model is random-weight, so unconstrained it
emits noise: every output below that ends with finish_reason "stop" must parse and validate against its schema (the
`jsonschema` validator), streaming and not, n > 1, through response_format, vLLM's structured_outputs / guided_*,
llama.cpp's json_schema, and the openai SDK's chat.completions.parse with a Pydantic model; the same requests without
the constraint must produce invalid output (so the checks can fail); bad schemas and grammars are 400s naming the
field, and the server stays up."""
import decimal
import json
import re
from typing import List, Literal, Optional

import jsonschema
import openai
import pydantic

import harness
from harness import Checks, Server

MSG = [{"role": "user", "content": "Give me the data."}]
OFF = {"chat_template_kwargs": {"enable_thinking": False}}

SCHEMAS = {
    "flat": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
             "required": ["name", "age"], "additionalProperties": False},
    "nested": {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 999}, "tags": {
            "type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 1, "maxItems": 3}},
            "required": ["id", "tags"], "additionalProperties": False}},
        "required": ["user"], "additionalProperties": False},
    "enum": {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
                                              "ok": {"type": "boolean"}},
             "required": ["color", "ok"], "additionalProperties": False},
    "anyof": {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": -9, "maximum": 9}, {"type": "null"},
                                                               {"type": "string", "maxLength": 4}]}},
              "required": ["v"], "additionalProperties": False},
    "pattern": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}},
                "required": ["code"], "additionalProperties": False},
    "optional": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 50}, "b": {"type": "string", "maxLength": 5}},
                 "required": ["a"], "additionalProperties": False},
    "ranges": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 17},
                                                "m": {"type": "integer", "minimum": -20, "maximum": -10}},
               "required": ["n", "m"], "additionalProperties": False},
    "bounded_array": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                      "minItems": 2, "maxItems": 4},
    # Ranged non-integer numbers (the grammar's own range rules, not XGrammar's): top level, nested, in arrays,
    # optional, nullable, through $ref, with multipleOf, and integers with non-integer bounds.
    "number_top": {"type": "number", "minimum": -1.5, "maximum": 2.25},
    "number_fields": {"type": "object", "properties": {
        "p": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "price": {"type": "number", "minimum": 0.01, "maximum": 1000, "multipleOf": 0.01},
        "temp": {"type": "number", "minimum": -273.15, "maximum": 1e3},
        "tiny": {"type": "number", "minimum": -1e-3, "maximum": 1e-3},
        "opt": {"type": "number", "exclusiveMaximum": -0.5, "minimum": -2},
        "nested": {"type": "object", "properties": {"w": {"type": "number", "minimum": 0.5, "maximum": 0.75}},
                   "required": ["w"], "additionalProperties": False}},
        "required": ["p", "price", "temp", "tiny", "nested"], "additionalProperties": False},
    "number_array": {"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "number", "minimum": 0.25, "maximum": 0.75}, "minItems": 1,
               "maxItems": 4}}, "required": ["xs"], "additionalProperties": False},
    "number_nullable": {"type": "object", "properties": {
        "a": {"type": ["number", "null"], "minimum": -10, "maximum": -9.5},
        "b": {"anyOf": [{"type": "number", "minimum": 99.5, "maximum": 100}, {"type": "null"}]}},
        "required": ["a", "b"], "additionalProperties": False},
    "number_defs": {"$defs": {"prob": {"type": "number", "minimum": 0, "maximum": 1}}, "type": "object",
                    "properties": {"x": {"$ref": "#/$defs/prob"}, "y": {"$ref": "#/$defs/prob"}},
                    "required": ["x", "y"], "additionalProperties": False},
    "integer_fraction_bounds": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 0.5, "maximum": 9.5},
        "m": {"type": "integer", "multipleOf": 5, "minimum": -50, "maximum": 50}},
        "required": ["n", "m"], "additionalProperties": False},
}


def rf(schema, name="out"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def valid(text, schema):
    # Numbers as Decimal on both sides: exclusive bounds and multipleOf are then checked exactly, not in binary.
    try:
        exact = json.loads(json.dumps(schema), parse_float=decimal.Decimal)
        jsonschema.validate(json.loads(text, parse_float=decimal.Decimal), exact)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def main():
    with Server("--max-running", "8") as srv:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        model = client.models.list().data[0].id

        def chat(**kw):
            kw.setdefault("max_tokens", 400)
            extra = dict(OFF)
            extra.update(kw.pop("extra_body", {}))
            return client.chat.completions.create(model=model, messages=MSG, extra_body=extra, **kw)

        def schemas_non_stream(c):
            for name, schema in SCHEMAS.items():
                n_stop = 0
                for seed in range(3):
                    r = chat(response_format=rf(schema), temperature=1.0, seed=seed)
                    ch = r.choices[0]
                    if ch.finish_reason == "stop":
                        n_stop += 1
                        c.check(valid(ch.message.content, schema),
                                f"{name} seed {seed}: stop output validates: {ch.message.content!r}")
                c.check(n_stop >= 2, f"{name}: constrained outputs end (stop in {n_stop} of 3 within 400 tokens)")

        def unconstrained_is_invalid(c):
            # The checks above can fail: the same fixture without a constraint emits noise that is not JSON.
            n_invalid = 0
            for seed in range(3):
                r = chat(temperature=1.0, seed=seed, max_tokens=40)
                n_invalid += 0 if valid(r.choices[0].message.content or "", SCHEMAS["flat"]) else 1
            c.check(n_invalid == 3, f"unconstrained outputs are invalid ({n_invalid} of 3)")

        def stream_and_n(c):
            schema = SCHEMAS["nested"]
            stream = chat(response_format=rf(schema), temperature=1.0, seed=7, n=3, stream=True)
            text, finish = {}, {}
            for chunk in stream:
                for ch in chunk.choices:
                    text[ch.index] = text.get(ch.index, "") + (ch.delta.content or "")
                    if ch.finish_reason:
                        finish[ch.index] = ch.finish_reason
            c.check(sorted(text) == [0, 1, 2], f"three streamed choices {sorted(text)}")
            for i in text:
                if finish.get(i) == "stop":
                    c.check(valid(text[i], schema), f"streamed choice {i} validates: {text[i]!r}")
            c.check(sum(1 for f in finish.values() if f == "stop") >= 2, f"streamed choices end: {finish}")
            r = chat(response_format=rf(schema), temperature=1.0, seed=9, n=3)
            for ch in r.choices:
                if ch.finish_reason == "stop":
                    c.check(valid(ch.message.content, schema), f"n=3 choice {ch.index} validates")

        def json_object(c):
            for seed in range(3):
                r = chat(response_format={"type": "json_object"}, temperature=1.0, seed=seed)
                ch = r.choices[0]
                if ch.finish_reason == "stop":
                    c.check(isinstance(json.loads(ch.message.content), dict), f"json_object is an object: {ch.message.content!r}")

        def extensions(c):
            r = chat(temperature=1.0, seed=1, extra_body={"structured_outputs": {"regex": "[a-c]{3}-[0-9]{2}"}})
            c.check(re.fullmatch("[a-c]{3}-[0-9]{2}", r.choices[0].message.content) is not None,
                    f"structured_outputs.regex: {r.choices[0].message.content!r}")
            r = chat(temperature=1.0, seed=2, extra_body={"guided_choice": ["alpha", "beta", "gamma"]})
            c.check(r.choices[0].message.content in ("alpha", "beta", "gamma"), f"guided_choice: {r.choices[0].message.content!r}")
            r = chat(temperature=1.0, seed=3, extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
            c.check(r.choices[0].message.content in ("yes", "no"), "structured_outputs.choice")
            gbnf = 'root ::= "x" digit digit\ndigit ::= [0-9]'
            r = chat(temperature=1.0, seed=4, extra_body={"grammar": gbnf})
            c.check(re.fullmatch("x[0-9][0-9]", r.choices[0].message.content) is not None, f"llama.cpp grammar: {r.choices[0].message.content!r}")
            r = chat(temperature=1.0, seed=5, extra_body={"guided_grammar": gbnf})
            c.check(re.fullmatch("x[0-9][0-9]", r.choices[0].message.content) is not None, "guided_grammar")
            schema = SCHEMAS["enum"]
            for field in ("guided_json", "json_schema"):
                r = chat(temperature=1.0, seed=6, extra_body={field: schema})
                if r.choices[0].finish_reason == "stop":
                    c.check(valid(r.choices[0].message.content, schema), f"{field} validates")
            r = chat(temperature=1.0, seed=6, extra_body={"structured_outputs": {"json": schema}})
            if r.choices[0].finish_reason == "stop":
                c.check(valid(r.choices[0].message.content, schema), "structured_outputs.json validates")
            # Completions take the vLLM fields too.
            cr = client.completions.create(model=model, prompt="Answer:", max_tokens=20, temperature=1.0, seed=1,
                                           extra_body={"guided_regex": "[0-9]{4}"})
            c.check(re.fullmatch("[0-9]{4}", cr.choices[0].text) is not None, f"completions guided_regex: {cr.choices[0].text!r}")

        def sdk_parse(c):
            class Item(pydantic.BaseModel):
                name: str = pydantic.Field(max_length=10)
                qty: int = pydantic.Field(ge=0, le=99)

            class Order(pydantic.BaseModel):
                status: Literal["open", "closed"]
                items: List[Item] = pydantic.Field(max_length=2)
                note: Optional[str] = None

            n_parsed = 0
            for seed in range(3):
                r = client.chat.completions.parse(model=model, messages=MSG, response_format=Order, max_tokens=400,
                                                  temperature=1.0, seed=seed, extra_body=OFF)
                ch = r.choices[0]
                if ch.finish_reason == "stop":
                    c.check(isinstance(ch.message.parsed, Order), f"parse() gives an Order: {ch.message.content!r}")
                    n_parsed += 1
            c.check(n_parsed >= 2, f"parse() outputs end ({n_parsed} of 3)")

            # Pydantic float fields with ranges (Field(ge=..., le=...), gt/lt, an Optional one): minimum / maximum /
            # exclusive* on "number" in the schema the SDK sends.
            class Reading(pydantic.BaseModel):
                probability: float = pydantic.Field(ge=0.0, le=1.0)
                price: float = pydantic.Field(gt=0, lt=100.5)
                offset: Optional[float] = pydantic.Field(default=None, ge=-2.5, le=-1.25)

            n_parsed = 0
            for seed in range(3):
                r = client.chat.completions.parse(model=model, messages=MSG, response_format=Reading, max_tokens=400,
                                                  temperature=1.0, seed=seed, extra_body=OFF)
                ch = r.choices[0]
                if ch.finish_reason == "stop":
                    p = ch.message.parsed
                    c.check(isinstance(p, Reading), f"parse() gives a Reading: {ch.message.content!r}")
                    c.check(valid(ch.message.content, Reading.model_json_schema()),
                            f"the Reading validates: {ch.message.content!r}")
                    n_parsed += 1
            c.check(n_parsed >= 2, f"parse() of ranged floats ends ({n_parsed} of 3)")

        def reasoning_then_constraint(c):
            # Thinking on with a budget: the reasoning is free, the constraint starts after </think>.
            schema = SCHEMAS["flat"]
            r = client.chat.completions.create(model=model, messages=MSG, response_format=rf(schema), max_tokens=400,
                                               temperature=1.0, seed=11, extra_body={"thinking_token_budget": 5})
            ch = r.choices[0]
            extra = ch.message.model_extra or {}
            c.check(bool(extra.get("reasoning_content")), "reasoning is produced before the constraint")
            if ch.finish_reason == "stop":
                c.check(valid(ch.message.content, schema), f"content after reasoning validates: {ch.message.content!r}")

        def forced_tool_calls(c):
            params = {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 10},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "lat": {"type": "number", "minimum": -90, "maximum": 90},
                "unit": {"enum": ["c", "f"]},
                "detail": {"type": "object", "properties": {"hourly": {"type": "boolean"}},
                           "required": ["hourly"], "additionalProperties": False}},
                "required": ["city", "days", "lat", "unit", "detail"], "additionalProperties": False}
            other = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 8}}, "required": ["q"]}
            tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params, "strict": True}},
                     {"type": "function", "function": {"name": "search", "parameters": other}}]
            choices = [{"type": "function", "function": {"name": "get_weather"}}, "required"]
            for tool_choice in choices:
                for seed in range(3):
                    r = chat(tools=tools, tool_choice=tool_choice, temperature=1.0, seed=seed, max_tokens=200)
                    ch = r.choices[0]
                    calls = ch.message.tool_calls or []
                    c.check(len(calls) == 1, f"{tool_choice} seed {seed}: one tool call, got {calls} / {ch.message.content!r}")
                    if not calls:
                        continue
                    fn = calls[0].function
                    schema = {"get_weather": params, "search": other}.get(fn.name)
                    if isinstance(tool_choice, dict):
                        c.check(fn.name == "get_weather", f"named call: {fn.name}")
                    c.check(schema is not None and valid(fn.arguments, schema),
                            f"{tool_choice} seed {seed}: arguments validate: {fn.name} {fn.arguments!r}")
                    c.check(ch.finish_reason == "tool_calls", f"finish_reason {ch.finish_reason}")

        def responses_text_format(c):
            schema = SCHEMAS["enum"]
            n_done = 0
            for seed in range(3):
                r = client.responses.create(
                    model=model, input="Give me the data.", max_output_tokens=400, temperature=1.0,
                    text={"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}},
                    extra_body={"seed": seed, "reasoning": {"effort": "none"}})
                if r.status == "completed":
                    n_done += 1
                    c.check(valid(r.output_text, schema), f"/v1/responses text.format validates: {r.output_text!r}")
            c.check(n_done >= 2, f"/v1/responses constrained outputs complete ({n_done} of 3)")

        def bad_requests(c):
            cases = [
                ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": "not json"}}},
                 "response_format.json_schema.schema"),
                ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}}},
                 "response_format.json_schema.schema"),
                ({"response_format": {"type": "yaml"}}, "response_format.type"),
                ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
                ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex"),
                ({"guided_grammar": "root ::= "}, "guided_grammar"),
                ({"grammar": "root ::= undefined_rule"}, "grammar"),
                ({"guided_choice": []}, "guided_choice"),
                ({"response_format": rf({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.3}}})},
                 "response_format.json_schema.schema"),
                ({"response_format": rf({"type": "number", "minimum": 2, "exclusiveMaximum": 2})},
                 "response_format.json_schema.schema"),
                ({"guided_json": {"type": "integer", "multipleOf": 1000000}}, "guided_json"),
                ({"guided_regex": "a+", "guided_choice": ["a"]}, "guided_choice"),
            ]
            for extra, param in cases:
                body = {"model": model, "messages": MSG, "max_tokens": 4, **extra}
                status, _, raw = srv.post("/v1/chat/completions", body)
                err = json.loads(raw).get("error", {}) if raw else {}
                c.check(status == 400, f"{extra}: status {status} {raw[:200]!r}")
                c.check(err.get("param") == param, f"{extra}: param {err.get('param')!r}, want {param!r}")
            status, _, _ = srv.get("/health")
            c.check(status == 200, "server healthy after bad schemas")

        def speculation_composes(c):
            # Served with speculation on (e2e_spec_structured_output: the MTP fixture), every check above ran against
            # it; here, a constrained request decodes without drafts even when it asks for them, and is valid, while
            # the same request unconstrained does draft (so the check can fail).
            if not harness.E2E_MODEL:
                return
            schema = SCHEMAS["flat"]
            n_stop = 0
            for seed in range(3):
                r = chat(response_format=rf(schema), temperature=1.0, seed=seed, extra_body={"speculative_k": 3})
                ch = r.choices[0]
                c.check("speculative" not in (r.usage.model_extra or {}),
                        f"seed {seed}: a constrained request drafts nothing: {r.usage.model_extra}")
                if ch.finish_reason == "stop":
                    n_stop += 1
                    c.check(valid(ch.message.content, schema), f"seed {seed}: speculative server, output validates: "
                                                               f"{ch.message.content!r}")
            c.check(n_stop >= 2, f"constrained outputs end on the speculative server (stop in {n_stop} of 3)")
            r = chat(temperature=1.0, seed=0, max_tokens=40, extra_body={"speculative_k": 3})
            spec = (r.usage.model_extra or {}).get("speculative")
            c.check(spec is not None and spec["drafted_tokens"] > 0, f"the unconstrained request drafts: {spec}")

        Checks().run([schemas_non_stream, unconstrained_is_invalid, stream_and_n, json_object, extensions, sdk_parse,
                      reasoning_then_constraint, forced_tool_calls, responses_text_format, bad_requests,
                      speculation_composes])


if __name__ == "__main__":
    main()
