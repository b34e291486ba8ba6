"""e2e: the official anthropic Python SDK against a real voltserve (fixture model, CPU): messages.create and
messages.stream (text, tool use with a tool_result round trip, thinking with its budget), count_tokens, errors in
Anthropic's shape, and x-api-key auth. The model is random-weight: checks are on shapes, event order and invariants
(streamed == non-streamed, count_tokens == usage.input_tokens + cache_read_input_tokens)."""
import json

import anthropic

from harness import Checks, Server

TOOLS = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
MSG = [{"role": "user", "content": "What is the capital of France?"}]
# This SDK version has no sampling parameters; the server still takes temperature / top_p / top_k (older clients and
# Claude Code send them), so the tests pass greedy decoding as a raw field.
GREEDY = {"temperature": 0}


def blocks(content):
    """Content blocks as plain dicts (the stream helper builds Parsed* subclasses of the same blocks)."""
    return [b.model_dump(exclude={"parsed_output", "citations"}) for b in content]


def check_stream_order(c, events, what):
    types = [e.type for e in events]
    c.check(types[0] == "message_start", f"{what}: message_start first, got {types[:2]}")
    c.check(types[-2:] == ["message_delta", "message_stop"], f"{what}: message_delta, message_stop last: {types[-2:]}")
    open_index, next_index = None, 0
    for e in events:
        if e.type == "content_block_start":
            c.check(open_index is None and e.index == next_index, f"{what}: block {e.index} starts in order")
            open_index = e.index
        elif e.type == "content_block_delta":
            c.check(e.index == open_index, f"{what}: delta inside block {e.index}")
        elif e.type == "content_block_stop":
            c.check(e.index == open_index, f"{what}: block {e.index} stops after it started")
            open_index, next_index = None, next_index + 1
    c.check(open_index is None, f"{what}: every block stopped")


def prompt_of(usage):
    # Anthropic's input_tokens exclude what was read from the cache (on by default here): the prompt is the sum.
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


def main():
    with Server() as srv:
        client = anthropic.Anthropic(base_url=srv.base, api_key="unused", max_retries=0, timeout=120)
        model = json.loads(srv.get("/v1/models")[2])["data"][0]["id"]

        def text(c):
            m = client.messages.create(model=model, max_tokens=12, messages=MSG, extra_body=GREEDY)
            c.check(m.type == "message" and m.role == "assistant" and m.id.startswith("msg_"), f"shape {m.type} {m.id}")
            c.check(m.model == model, "model echoed")
            c.check(m.stop_reason in ("end_turn", "max_tokens"), f"stop_reason {m.stop_reason}")
            c.check(all(b.type == "text" for b in m.content), f"no thinking unless asked: {[b.type for b in m.content]}")
            c.check(1 <= m.usage.output_tokens <= 12 and m.usage.input_tokens > 0, f"usage {m.usage}")
            again = client.messages.create(model=model, max_tokens=12, messages=MSG, extra_body=GREEDY)
            c.check(blocks(again.content) == blocks(m.content), "greedy is reproducible")
            sys_blocks = client.messages.create(model=model, max_tokens=4, messages=MSG, extra_body=GREEDY,
                                                system=[{"type": "text", "text": "Be brief."}],
                                                metadata={"user_id": "u1"})
            sys_text = client.messages.create(model=model, max_tokens=4, messages=MSG, extra_body=GREEDY, system="Be brief.")
            c.check(prompt_of(sys_blocks.usage) == prompt_of(sys_text.usage) > prompt_of(m.usage),
                    "system as blocks == as a string, and it is in the prompt")
            # A stop sequence cut from the greedy answer.
            base = client.messages.create(model=model, max_tokens=24, messages=MSG, extra_body=GREEDY).content
            whole = "".join(b.text for b in base if b.type == "text")
            if c.check(len(whole) >= 8, f"need text to cut, got {whole!r}"):
                stop = whole[len(whole) // 2: len(whole) // 2 + 3]
                cut = client.messages.create(model=model, max_tokens=24, messages=MSG, extra_body=GREEDY,
                                             stop_sequences=[stop])
                c.check(cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop,
                        f"stop_sequence: {cut.stop_reason} {cut.stop_sequence!r}")
                c.check("".join(b.text for b in cut.content if b.type == "text") == whole[:whole.find(stop)],
                        "text before the stop sequence")

        def context_window(c):
            # Claude Code asks for max_tokens far above a small context: generation runs until the context is full.
            m = client.messages.create(model=model, max_tokens=32000, messages=MSG,
                                       extra_body={**GREEDY, "ignore_eos": True})
            c.check(m.stop_reason == "model_context_window_exceeded", f"stop_reason {m.stop_reason}")
            c.check(prompt_of(m.usage) + m.usage.output_tokens == 1024, f"the 1024-token context is full: {m.usage}")

        def streaming(c):
            with client.messages.stream(model=model, max_tokens=16, messages=MSG, extra_body=GREEDY) as s:
                events = list(s)
                final = s.get_final_message()
            check_stream_order(c, events, "stream")
            ref = client.messages.create(model=model, max_tokens=16, messages=MSG, extra_body=GREEDY)
            c.check(blocks(final.content) == blocks(ref.content), "streamed content == non-streamed")
            c.check(final.stop_reason == ref.stop_reason and final.usage.output_tokens == ref.usage.output_tokens,
                    f"stop_reason/usage: {final.stop_reason} {final.usage} vs {ref.stop_reason} {ref.usage}")
            raw = list(client.messages.create(model=model, max_tokens=4, messages=MSG, stream=True))
            c.check(raw[0].type == "message_start" and raw[0].message.usage.input_tokens == prompt_of(ref.usage),
                    "message_start carries the input tokens (all of them: the cache is looked up later)")
            delta = [e for e in raw if e.type == "message_delta"][-1]
            c.check(prompt_of(delta.usage) == prompt_of(ref.usage) and delta.usage.cache_read_input_tokens > 0,
                    f"message_delta's usage splits the prompt into uncached and cached: {delta.usage}")

        def tool_use(c):
            choice = {"type": "tool", "name": "get_weather"}
            m = client.messages.create(model=model, max_tokens=24, messages=MSG, tools=TOOLS, tool_choice=choice,
                                       extra_body=GREEDY)
            uses = [b for b in m.content if b.type == "tool_use"]
            if not c.check(uses and uses[0].name == "get_weather", f"forced tool_use: {m.content}"):
                return
            c.check(uses[0].id.startswith("toolu_") and isinstance(uses[0].input, dict), f"tool_use block {uses[0]}")
            c.check(m.stop_reason in ("tool_use", "max_tokens"), f"stop_reason {m.stop_reason}")
            with client.messages.stream(model=model, max_tokens=24, messages=MSG, tools=TOOLS, tool_choice=choice,
                                        extra_body=GREEDY) as s:
                events = list(s)
                final = s.get_final_message()
            check_stream_order(c, events, "tool stream")
            partial = "".join(e.delta.partial_json for e in events
                              if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
            c.check(partial == "" or json.loads(partial) == uses[0].input,
                    f"input_json_delta pieces parse to the input: {partial!r}")
            c.check([b.type for b in final.content] == [b.type for b in m.content], "streamed blocks == non-streamed")
            # Round trip: the tool_use goes back with its tool_result.
            history = MSG + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                             {"role": "user", "content": [
                                 {"type": "tool_result", "tool_use_id": uses[0].id, "content": "sunny, 24 C"},
                                 {"type": "text", "text": "Thanks, and tomorrow?"}]}]
            r2 = client.messages.create(model=model, max_tokens=6, messages=history, tools=TOOLS)
            c.check(r2.stop_reason in ("end_turn", "max_tokens", "tool_use"), "tool_result round trip answers")
            c.check(prompt_of(r2.usage) > prompt_of(m.usage), "the tool result is in the prompt")
            err = client.messages.create(model=model, max_tokens=2, messages=history[:-1] + [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": uses[0].id, "is_error": True,
                 "content": [{"type": "text", "text": "no network"}]}]}], tools=TOOLS)
            c.check(err.type == "message", "is_error tool_result with block content")
            anyc = client.messages.create(model=model, max_tokens=16, messages=MSG, tools=TOOLS,
                                          tool_choice={"type": "any"}, extra_body=GREEDY)
            c.check(any(b.type == "tool_use" for b in anyc.content) or anyc.stop_reason == "max_tokens",
                    "tool_choice any forces a call")

        def thinking(c):
            free = client.messages.create(model=model, max_tokens=40, messages=MSG, extra_body=GREEDY,
                                          thinking={"type": "enabled", "budget_tokens": 1000})
            c.check(free.content and free.content[0].type == "thinking", f"thinking first: {[b.type for b in free.content]}")
            c.check(isinstance(free.content[0].signature, str), "thinking block has a signature field")
            c.check(free.stop_reason == "max_tokens" and len(free.content) == 1,
                    "with a budget above max_tokens the random model thinks to the end")
            cut = client.messages.create(model=model, max_tokens=40, messages=MSG, extra_body=GREEDY,
                                         thinking={"type": "enabled", "budget_tokens": 8})
            types = [b.type for b in cut.content]
            c.check(types[:1] == ["thinking"] and (types[1:] == ["text"] or cut.stop_reason == "end_turn"),
                    f"budget 8 closes the thinking and an answer follows: {types} {cut.stop_reason}")
            c.check(len(cut.content[0].thinking) < len(free.content[0].thinking), "the budget shortened the thinking")
            with client.messages.stream(model=model, max_tokens=40, messages=MSG, extra_body=GREEDY,
                                        thinking={"type": "enabled", "budget_tokens": 8}) as s:
                events = list(s)
                final = s.get_final_message()
            check_stream_order(c, events, "thinking stream")
            c.check(any(e.type == "content_block_delta" and e.delta.type == "thinking_delta" for e in events),
                    "thinking_delta events")
            c.check(blocks(final.content) == blocks(cut.content), "streamed thinking == non-streamed")
            history = MSG + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in cut.content]},
                             {"role": "user", "content": "Go on."}]
            c.check(client.messages.create(model=model, max_tokens=2, messages=history).type == "message",
                    "thinking blocks are accepted back in history")
            # (The effort -> budget table is the Responses one, tested there: a 1024-token budget does not fit in this
            # server's 1024-token context.)
            adaptive = client.messages.create(model=model, max_tokens=8, messages=MSG, extra_body=GREEDY,
                                              thinking={"type": "adaptive"}, output_config={"effort": "low"})
            c.check([b.type for b in adaptive.content] == ["thinking"], "adaptive thinking with an effort")
            try:
                client.messages.create(model=model, max_tokens=8, messages=MSG, output_config={
                    "format": {"type": "json_schema", "schema": {"type": "object"}}})
                c.check(False, "structured output must be refused until it exists")
            except anthropic.BadRequestError as e:
                c.check("output_config.format" in e.body["error"]["message"], f"names output_config.format {e.body}")
            off = client.messages.create(model=model, max_tokens=8, messages=MSG, extra_body=GREEDY,
                                         thinking={"type": "disabled"})
            c.check(all(b.type != "thinking" for b in off.content), "disabled: no thinking")

        def count_tokens(c):
            n = client.messages.count_tokens(model=model, messages=MSG)
            m = client.messages.create(model=model, max_tokens=2, messages=MSG)
            c.check(n.input_tokens == prompt_of(m.usage), f"count_tokens {n.input_tokens} == usage {m.usage}")
            t = client.messages.count_tokens(model=model, messages=MSG, tools=TOOLS, system="Be brief.")
            c.check(t.input_tokens > n.input_tokens, "tools and system are counted")

        def errors(c):
            try:
                client.messages.create(model=model, max_tokens=4, messages=[])
                c.check(False, "empty messages must be refused")
            except anthropic.BadRequestError as e:
                c.check(e.body.get("type") == "error" and e.body["error"]["type"] == "invalid_request_error",
                        f"Anthropic error shape {e.body}")
            try:
                client.messages.create(model="claude-9", max_tokens=4, messages=MSG)
                c.check(False, "unknown model must 404")
            except anthropic.NotFoundError as e:
                c.check(e.body["error"]["type"] == "not_found_error", f"not_found_error {e.body}")
            try:
                client.messages.create(model=model, max_tokens=4, messages=MSG,
                                       tools=[{"type": "web_search_20250305", "name": "web_search"}])
                c.check(False, "server tools must be refused")
            except anthropic.BadRequestError as e:
                c.check("web_search_20250305" in e.body["error"]["message"], f"names the tool type {e.body}")

        def auth(c):
            with Server(api_key="sk-e2e") as keyed:
                ok = anthropic.Anthropic(base_url=keyed.base, api_key="sk-e2e", max_retries=0)
                m = ok.messages.create(model=model, max_tokens=2, messages=MSG)
                c.check(m.type == "message", "x-api-key accepted")
                bad = anthropic.Anthropic(base_url=keyed.base, api_key="wrong", max_retries=0)
                try:
                    bad.messages.create(model=model, max_tokens=2, messages=MSG)
                    c.check(False, "a wrong key must be refused")
                except anthropic.AuthenticationError as e:
                    c.check(e.body["error"]["type"] == "authentication_error", f"Anthropic 401 shape {e.body}")

        Checks().run([text, context_window, streaming, tool_use, thinking, count_tokens, errors, auth])


if __name__ == "__main__":
    main()
