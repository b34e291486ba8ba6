"""e2e: the official openai Python SDK against a real voltserve (fixture model, CPU): chat and completions,
streaming and not, usage, n > 1, stop strings across token boundaries, logprobs, reasoning fields, forced tool
calls (named tool_choice primes the call, so the parser's streaming is exercised on the random-weight model),
and SDK error mapping. The model is random-weight: text is gibberish, so checks are on shapes and invariants."""
import json

import openai

from harness import E2E_MODEL, Checks, Server

SPECULATING = E2E_MODEL == "tiny-chat-mtp"

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
MSG = [{"role": "user", "content": "What is the capital of France?"}]


def main():
    with Server() as srv:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=60)
        model = client.models.list().data[0].id

        def models(c):
            listed = client.models.list()
            c.check(len(listed.data) == 1 and listed.data[0].object == "model", "models.list shape")
            got = client.models.retrieve(model)
            c.check(got.id == model, "models.retrieve returns the served model")
            try:
                client.models.retrieve("gpt-9")
                c.check(False, "unknown model must 404")
            except openai.NotFoundError:
                c.check(True, "")

        def chat_non_stream(c):
            r = client.chat.completions.create(model=model, messages=MSG, max_tokens=8, temperature=0)
            c.check(r.object == "chat.completion", "object")
            c.check(r.id.startswith("chatcmpl-"), "id prefix")
            c.check(isinstance(r.created, int), "created is an int")
            c.check(r.choices[0].message.role == "assistant", "role")
            c.check(r.choices[0].finish_reason in ("stop", "length"), f"finish_reason {r.choices[0].finish_reason}")
            u = r.usage
            c.check(u.total_tokens == u.prompt_tokens + u.completion_tokens, "usage adds up")
            c.check(1 <= u.completion_tokens <= 8, f"completion tokens {u.completion_tokens}")
            # Thinking is on by default in the Qwen3.5 template: output starts inside <think>.
            extra = r.choices[0].message.model_extra or {}
            if r.choices[0].message.content is None:
                c.check(bool(extra.get("reasoning_content")), "all-reasoning output has reasoning_content")
                c.check(extra.get("reasoning") == extra.get("reasoning_content"), "reasoning mirrors reasoning_content")
            again = client.chat.completions.create(model=model, messages=MSG, max_tokens=8, temperature=0)
            c.check(again.choices[0].message == r.choices[0].message, "greedy is reproducible")
            # Speculative decoding (the e2e_spec_* runs serve a model with an MTP head, default k auto): the same
            # greedy text with it off, and usage says what was drafted only when it was on.
            plain = client.chat.completions.create(model=model, messages=MSG, max_tokens=8, temperature=0,
                                                   extra_body={"speculative_k": 0})
            c.check(plain.choices[0].message == r.choices[0].message, "speculative_k 0 gives the same greedy text")
            c.check("speculative" not in (plain.usage.model_extra or {}), "no speculative usage when off")
            spec = (r.usage.model_extra or {}).get("speculative")
            if SPECULATING:
                c.check(spec is not None and spec["drafted_tokens"] > 0, f"usage.speculative when speculating: {spec}")
                c.check(0 <= spec["accepted_tokens"] <= spec["drafted_tokens"], "accepted <= drafted")
            else:
                c.check(spec is None, "no speculative usage on a model without an MTP head")

        def chat_thinking_off(c):
            r = client.chat.completions.create(model=model, messages=MSG, max_tokens=8, temperature=0,
                                               extra_body={"chat_template_kwargs": {"enable_thinking": False}})
            extra = r.choices[0].message.model_extra or {}
            c.check("reasoning_content" not in extra, "enable_thinking=false: no reasoning field")
            c.check(isinstance(r.choices[0].message.content, str), "content is text")
            r2 = client.chat.completions.create(model=model, messages=MSG, max_tokens=8, temperature=0,
                                                reasoning_effort="none")
            c.check(r2.choices[0].message.content == r.choices[0].message.content, "reasoning_effort none == thinking off")

        def chat_stream(c):
            chunks = list(client.chat.completions.create(model=model, messages=MSG, max_tokens=12, temperature=0,
                                                         stream=True, stream_options={"include_usage": True}))
            c.check(len({ch.id for ch in chunks}) == 1, "all chunks share the id")
            c.check(len({ch.created for ch in chunks}) == 1, "all chunks share created")
            c.check(all(ch.object == "chat.completion.chunk" for ch in chunks), "chunk object")
            c.check(chunks[0].choices[0].delta.role == "assistant", "role in the first delta")
            c.check(all(ch.choices[0].delta.role is None for ch in chunks[1:] if ch.choices), "role only once")
            finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
            c.check(len(finishes) == 1, f"exactly one finish_reason, got {finishes}")
            c.check(chunks[-1].choices == [] and chunks[-1].usage is not None, "usage chunk last with empty choices")
            c.check(all(ch.usage is None for ch in chunks[:-1]), "no usage before the last chunk")
            reasoning = "".join((ch.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                                for ch in chunks if ch.choices)
            content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            ref = client.chat.completions.create(model=model, messages=MSG, max_tokens=12, temperature=0)
            ref_extra = ref.choices[0].message.model_extra or {}
            c.check(reasoning == (ref_extra.get("reasoning_content") or ""), "streamed reasoning == non-streamed")
            c.check(content == (ref.choices[0].message.content or ""), "streamed content == non-streamed")
            no_usage = list(client.chat.completions.create(model=model, messages=MSG, max_tokens=4, stream=True))
            c.check(all(ch.choices for ch in no_usage), "no empty-choices chunk without include_usage")

        def chat_n(c):
            r = client.chat.completions.create(model=model, messages=MSG, max_tokens=4, n=3, seed=7, temperature=1)
            c.check([ch.index for ch in r.choices] == [0, 1, 2], "n=3 gives indices 0,1,2")
            chunks = list(client.chat.completions.create(model=model, messages=MSG, max_tokens=4, n=2, stream=True))
            for i in range(2):
                roles = [ch for ch in chunks if ch.choices and ch.choices[0].index == i and ch.choices[0].delta.role]
                fins = [ch for ch in chunks if ch.choices and ch.choices[0].index == i and ch.choices[0].finish_reason]
                c.check(len(roles) == 1 and len(fins) == 1, f"choice {i}: one role chunk, one finish chunk")

        def stop_strings(c):
            # Stop matching end to end: take a greedy completion, stop on a piece of it that spans tokens.
            base = client.completions.create(model=model, prompt="Once upon a time", max_tokens=24, temperature=0,
                                             extra_body={"ignore_eos": True})
            text = base.choices[0].text
            if not c.check(len(text) >= 8, f"need some text to cut, got {text!r}"):
                return
            stop = text[len(text) // 2: len(text) // 2 + 3]
            cut = text[:text.find(stop)]
            r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=24, temperature=0,
                                          stop=[stop], extra_body={"ignore_eos": True})
            c.check(r.choices[0].text == cut, f"text before the stop string: {r.choices[0].text!r} vs {cut!r}")
            c.check(r.choices[0].finish_reason == "stop", "finish_reason stop")
            s = client.completions.create(model=model, prompt="Once upon a time", max_tokens=24, temperature=0,
                                          stop=[stop], stream=True, extra_body={"ignore_eos": True})
            streamed = "".join(ch.choices[0].text for ch in s if ch.choices)
            c.check(streamed == cut, f"streamed text before the stop string: {streamed!r} vs {cut!r}")

        def completions(c):
            r = client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0)
            c.check(r.object == "text_completion" and r.id.startswith("cmpl-"), "completion shape")
            c.check(r.usage.completion_tokens <= 5, "max_tokens honoured")
            ids = client.completions.create(model=model, prompt=[1, 2, 3], max_tokens=3)
            c.check(ids.usage.prompt_tokens == 3, "token-id prompt")
            two = client.completions.create(model=model, prompt=["a", "b"], max_tokens=2)
            c.check([ch.index for ch in two.choices] == [0, 1], "two prompts, two choices")
            chunks = list(client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0, stream=True))
            c.check(all(ch.object == "text_completion" for ch in chunks), "streamed chunks are text_completion")
            c.check("".join(ch.choices[0].text for ch in chunks) == r.choices[0].text, "streamed == non-streamed")
            lp = client.completions.create(model=model, prompt="Hello", max_tokens=3, logprobs=2)
            c.check(len(lp.choices[0].logprobs.token_logprobs) == lp.usage.completion_tokens, "legacy logprobs per token")
            try:
                client.completions.create(model=model, prompt="x", echo=True)
                c.check(False, "echo must be rejected")
            except openai.BadRequestError as e:
                c.check(e.body.get("param") == "echo", f"echo param {e.body}")

        def logprobs(c):
            r = client.chat.completions.create(model=model, messages=MSG, max_tokens=4, logprobs=True, top_logprobs=3)
            content = r.choices[0].logprobs.content
            c.check(len(content) == r.usage.completion_tokens, "one logprob entry per token")
            c.check(all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in content), "3 alternatives each")
            try:
                client.chat.completions.create(model=model, messages=MSG, logprobs=True, top_logprobs=21)
                c.check(False, "top_logprobs 21 must be rejected")
            except openai.BadRequestError as e:
                c.check(e.body.get("param") == "top_logprobs", "param top_logprobs")

        def tools_named(c):
            choice = {"type": "function", "function": {"name": "get_weather"}}
            r = client.chat.completions.create(model=model, messages=MSG, tools=TOOLS, tool_choice=choice,
                                               max_tokens=16, temperature=0)
            calls = r.choices[0].message.tool_calls
            c.check(calls and calls[0].function.name == "get_weather", f"forced call: {calls}")
            c.check(calls and calls[0].id.startswith("call_") and calls[0].type == "function", "call id/type")
            c.check(r.choices[0].finish_reason in ("tool_calls", "length"), f"finish {r.choices[0].finish_reason}")
            if calls:
                c.check(isinstance(json.loads(calls[0].function.arguments), dict), "arguments is a JSON object string")
            stream = client.chat.completions.create(model=model, messages=MSG, tools=TOOLS, tool_choice=choice,
                                                    max_tokens=16, temperature=0, stream=True)
            deltas = [tc for ch in stream if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
            c.check(sum(1 for d in deltas if d.id) == 1, "tool call id sent once")
            c.check(sum(1 for d in deltas if d.function and d.function.name) == 1, "tool name sent once")
            args = "".join(d.function.arguments or "" for d in deltas if d.function)
            if calls:
                c.check(args == calls[0].function.arguments, f"streamed arguments == final: {args!r}")
            # The SDK's own accumulator must accept the stream.
            with client.chat.completions.stream(model=model, messages=MSG, tools=TOOLS, tool_choice=choice,
                                                max_tokens=16, temperature=0) as s:
                for _ in s:
                    pass
                # get_final_completion() would raise LengthFinishReasonError: the random model runs to max_tokens.
                snapshot = s.current_completion_snapshot
            c.check(snapshot.choices[0].message.tool_calls[0].function.name == "get_weather", "SDK stream helper")

        def tools_auto_and_history(c):
            history = MSG + [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
            r = client.chat.completions.create(model=model, messages=history, tools=TOOLS, max_tokens=6)
            c.check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "auto tool choice runs")
            try:
                client.chat.completions.create(model=model, messages=MSG, tools=TOOLS,
                                               tool_choice={"type": "function", "function": {"name": "nope"}})
                c.check(False, "missing tool must be rejected")
            except openai.BadRequestError as e:
                c.check(e.body.get("param") == "tool_choice.function.name", f"param {e.body}")

        def errors(c):
            try:
                client.chat.completions.create(model=model, messages=MSG, temperature=5)
                c.check(False, "temperature 5 must be rejected")
            except openai.BadRequestError as e:
                c.check(e.status_code == 400 and e.body.get("param") == "temperature", "400 naming temperature")
            try:
                client.chat.completions.create(model="gpt-9", messages=MSG)
                c.check(False, "unknown model must 404")
            except openai.NotFoundError as e:
                c.check(e.body.get("code") == "model_not_found", "code model_not_found")

        Checks().run([models, chat_non_stream, chat_thinking_off, chat_stream, chat_n, stop_strings, completions,
                      logprobs, tools_named, tools_auto_and_history, errors])


if __name__ == "__main__":
    main()
