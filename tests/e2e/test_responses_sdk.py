"""e2e: the official openai Python SDK's Responses API against a real voltserve (fixture model, CPU):
client.responses.create plain and streaming (the event iterator and the responses.stream helper), function calling
with a tool round trip, custom (free-form) tools as Codex sends them, reasoning effort and its budget,
previous_response_id continuation, retrieve/delete, input token counts, and refusals. The model is random-weight:
checks are on shapes, event order and invariants (streamed == non-streamed, continuation == explicit history)."""
import json

import openai

from harness import Checks, Server

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
FORCE = {"type": "function", "name": "get_weather"}


def check_event_order(c, events, what):
    """The documented order: created, in_progress, well-nested items, then exactly one terminal event."""
    types = [e.type for e in events]
    c.check(types[:2] == ["response.created", "response.in_progress"], f"{what}: starts created, in_progress: {types[:3]}")
    c.check(types[-1] in ("response.completed", "response.incomplete", "response.failed"), f"{what}: ends {types[-1]}")
    c.check(sum(t in ("response.completed", "response.incomplete", "response.failed") for t in types) == 1,
            f"{what}: one terminal event")
    c.check([e.sequence_number for e in events] == list(range(len(events))), f"{what}: sequence_number 0, 1, 2, ...")
    c.check(len({e.response.id for e in events if hasattr(e, "response") and e.response is not None}) == 1,
            f"{what}: one response id")
    open_item = None
    next_index = 0
    for e in events:
        if e.type == "response.output_item.added":
            c.check(open_item is None and e.output_index == next_index, f"{what}: item {e.output_index} opens in order")
            open_item = e.output_index
        elif e.type == "response.output_item.done":
            c.check(open_item == e.output_index, f"{what}: item {e.output_index} closes after it opened")
            open_item = None
            next_index += 1
        elif e.type.endswith(".delta") or e.type.endswith(".done") or e.type.startswith("response.content_part"):
            c.check(open_item is not None and getattr(e, "output_index", open_item) == open_item,
                    f"{what}: {e.type} inside its item")
    c.check(open_item is None, f"{what}: every item closed")


def main():
    with Server() as srv:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        model = client.models.list().data[0].id

        def plain(c):
            r = client.responses.create(model=model, input="What is the capital of France?", max_output_tokens=12,
                                        temperature=0)
            c.check(r.object == "response" and r.id.startswith("resp_"), f"object/id: {r.object} {r.id}")
            c.check(r.status in ("completed", "incomplete"), f"status {r.status}")
            c.check(r.model == model, "model echoed")
            c.check(r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens, "usage adds up")
            c.check(1 <= r.usage.output_tokens <= 12, f"output tokens {r.usage.output_tokens}")
            c.check(0 <= r.usage.output_tokens_details.reasoning_tokens <= r.usage.output_tokens, "reasoning tokens")
            # The Qwen3.5 template thinks by default: the output starts with a reasoning item.
            c.check(r.output and r.output[0].type == "reasoning", f"first item {r.output[0].type if r.output else None}")
            if r.status == "incomplete":
                c.check(r.incomplete_details.reason == "max_output_tokens", "incomplete_details")
            again = client.responses.create(model=model, input="What is the capital of France?", max_output_tokens=12,
                                            temperature=0)
            c.check([o.model_dump(exclude={"id"}) for o in again.output] ==
                    [o.model_dump(exclude={"id"}) for o in r.output], "greedy is reproducible")
            off = client.responses.create(model=model, input="Hi", instructions="Be brief.", max_output_tokens=8,
                                          temperature=0, reasoning={"effort": "none"})
            c.check(all(o.type == "message" for o in off.output), f"effort none: no reasoning, {[o.type for o in off.output]}")
            c.check(off.output_text == off.output[0].content[0].text, "output_text is the message text")
            c.check(off.instructions == "Be brief." and off.reasoning.effort == "none", "request fields echoed")
            c.check(off.usage.output_tokens_details.reasoning_tokens == 0, "no reasoning tokens")
            msgs = client.responses.create(model=model, max_output_tokens=4, input=[
                {"role": "developer", "content": "Answer briefly."},
                {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}])
            c.check(msgs.status in ("completed", "incomplete"), "message items with content parts")

        def streaming(c):
            body = dict(model=model, input="Tell me a story.", max_output_tokens=16, temperature=0)
            events = list(client.responses.create(stream=True, **body))
            check_event_order(c, events, "stream")
            ref = client.responses.create(**body)
            final = events[-1].response
            c.check(final.status == ref.status, f"streamed status {final.status} vs {ref.status}")
            c.check(final.usage.output_tokens == ref.usage.output_tokens, "streamed usage == non-streamed")
            reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            ref_reasoning = "".join(p.text for o in ref.output if o.type == "reasoning" for p in (o.content or []))
            c.check(reasoning == ref_reasoning, "streamed reasoning == non-streamed")
            c.check(text == ref.output_text, "streamed text == non-streamed")
            done_items = [e.item for e in events if e.type == "response.output_item.done"]
            c.check([i.model_dump() for i in done_items] == [o.model_dump() for o in final.output],
                    "final output == the done items")
            # A completed response (a stop string cut from a greedy answer) through the SDK's stream helper.
            off = dict(model=model, input="Hello", max_output_tokens=24, temperature=0, reasoning={"effort": "none"},
                       extra_body={"ignore_eos": True})
            base = client.responses.create(**off).output_text
            if not c.check(len(base) >= 8, f"need text to cut, got {base!r}"):
                return
            stop = base[len(base) // 2: len(base) // 2 + 3]
            with client.responses.stream(**{**off, "extra_body": {"ignore_eos": True, "stop": [stop]}}) as s:
                for _ in s:
                    pass
                got = s.get_final_response()
            c.check(got.status == "completed", f"stop string completes the response: {got.status}")
            c.check(got.output_text == base[:base.find(stop)], f"helper text {got.output_text!r}")

        def function_calling(c):
            r = client.responses.create(model=model, input="Weather in Paris?", tools=TOOLS, tool_choice=FORCE,
                                        max_output_tokens=24, temperature=0)
            calls = [o for o in r.output if o.type == "function_call"]
            if not c.check(len(calls) >= 1 and calls[0].name == "get_weather", f"forced call: {r.output}"):
                return
            call = calls[0]
            c.check(call.call_id.startswith("call_") and call.id.startswith("fc_"), "call ids")
            c.check(isinstance(json.loads(call.arguments), dict), f"arguments a JSON object: {call.arguments!r}")
            c.check(r.tools[0].name == "get_weather" and r.tool_choice.name == "get_weather", "tools echoed")
            events = list(client.responses.create(stream=True, model=model, input="Weather in Paris?", tools=TOOLS,
                                                  tool_choice=FORCE, max_output_tokens=24, temperature=0))
            check_event_order(c, events, "tool stream")
            deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
            done = [e for e in events if e.type == "response.function_call_arguments.done"]
            c.check(done and done[0].arguments == deltas == call.arguments, f"streamed arguments {deltas!r}")
            added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
            c.check(added and added[0].name == "get_weather" and added[0].arguments == "", "call item added empty")
            # Round trip: the call and its output go back as input items.
            history = [{"role": "user", "content": "Weather in Paris?"}] + [o.model_dump(exclude_none=True) for o in r.output]
            history.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 24 C"})
            r2 = client.responses.create(model=model, input=history, tools=TOOLS, max_output_tokens=8)
            c.check(r2.status in ("completed", "incomplete"), "tool output round trip answers")
            c.check(r2.usage.input_tokens > r.usage.input_tokens, "the tool output is in the prompt")
            n_without = client.responses.input_tokens.count(model=model, input=history[:-1], tools=TOOLS).input_tokens
            c.check(n_without < r2.usage.input_tokens, "input_tokens counts the function_call_output")
            c.check(client.responses.input_tokens.count(model=model, input=history, tools=TOOLS).input_tokens ==
                    r2.usage.input_tokens, "input_tokens.count == usage.input_tokens")

        def custom_tools(c):
            tools = [{"type": "custom", "name": "apply_patch", "description": "Apply a patch to files",
                      "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}]
            choice = {"type": "custom", "name": "apply_patch"}
            r = client.responses.create(model=model, input="Fix the bug", tools=tools, tool_choice=choice,
                                        max_output_tokens=24, temperature=0)
            calls = [o for o in r.output if o.type == "custom_tool_call"]
            c.check(calls and calls[0].name == "apply_patch" and isinstance(calls[0].input, str),
                    f"custom tool call: {r.output}")
            events = list(client.responses.create(stream=True, model=model, input="Fix the bug", tools=tools,
                                                  tool_choice=choice, max_output_tokens=24, temperature=0))
            check_event_order(c, events, "custom tool stream")
            done = [e for e in events if e.type == "response.custom_tool_call_input.done"]
            if calls:
                c.check(done and done[0].input == calls[0].input, "custom_tool_call_input.done == the item input")
                history = [{"role": "user", "content": "Fix the bug"}, calls[0].model_dump(exclude_none=True),
                           {"type": "custom_tool_call_output", "call_id": calls[0].call_id, "output": "done"}]
                r2 = client.responses.create(model=model, input=history, tools=tools, max_output_tokens=4)
                c.check(r2.status in ("completed", "incomplete"), "custom tool round trip")

        def reasoning_budget(c):
            # effort "minimal" closes </think> after 256 reasoning tokens; without it the random model thinks on.
            r = client.responses.create(model=model, input="Think.", max_output_tokens=300, temperature=0,
                                        reasoning={"effort": "minimal"}, extra_body={"ignore_eos": True})
            types = [o.type for o in r.output]
            c.check(types == ["reasoning", "message"], f"reasoning then an answer: {types}")
            n = r.usage.output_tokens_details.reasoning_tokens
            c.check(256 <= n <= 260, f"reasoning tokens within the budget (+ the closing tag): {n}")
            free = client.responses.create(model=model, input="Think.", max_output_tokens=300, temperature=0,
                                           reasoning={"effort": "xhigh"}, extra_body={"ignore_eos": True})
            c.check(free.usage.output_tokens_details.reasoning_tokens > 260 or
                    [o.type for o in free.output] != ["reasoning"], "xhigh has no budget")

        def continuation(c):
            r1 = client.responses.create(model=model, input="Hi there", max_output_tokens=6, temperature=0)
            c.check(r1.store is True, "stored by default")
            got = client.responses.retrieve(r1.id)
            c.check(got.id == r1.id and [o.model_dump() for o in got.output] == [o.model_dump() for o in r1.output],
                    "retrieve returns the response")
            r2 = client.responses.create(model=model, previous_response_id=r1.id, input="And then?", max_output_tokens=4)
            c.check(r2.previous_response_id == r1.id, "previous_response_id echoed")
            explicit = [{"role": "user", "content": "Hi there"}] + [o.model_dump(exclude_none=True) for o in r1.output] + [
                {"role": "user", "content": "And then?"}]
            n_explicit = client.responses.input_tokens.count(model=model, input=explicit).input_tokens
            c.check(r2.usage.input_tokens == n_explicit,
                    f"continuation prompt == explicit history: {r2.usage.input_tokens} vs {n_explicit}")
            # The same with a reasoning item followed by a message (the budget closes the reasoning).
            rb = client.responses.create(model=model, input="Hi there", max_output_tokens=264, temperature=0,
                                         reasoning={"effort": "minimal"}, extra_body={"ignore_eos": True})
            c.check([o.type for o in rb.output] == ["reasoning", "message"], f"reasoning + message: {rb.output}")
            n_cont = client.responses.input_tokens.count(model=model, previous_response_id=rb.id, input="And then?")
            explicit = [{"role": "user", "content": "Hi there"}] + [o.model_dump(exclude_none=True) for o in rb.output] + [
                {"role": "user", "content": "And then?"}]
            c.check(n_cont.input_tokens == client.responses.input_tokens.count(model=model, input=explicit).input_tokens,
                    "continuation == explicit history with reasoning and a message")
            # Streamed responses are stored too; the chain goes on.
            s = list(client.responses.create(stream=True, model=model, previous_response_id=r2.id, input="More",
                                             max_output_tokens=3))
            r3 = client.responses.retrieve(s[-1].response.id)
            c.check(r3.usage.input_tokens > r2.usage.input_tokens, "a streamed continuation is stored")
            deleted = client.responses.delete(r1.id)
            c.check(deleted is None or getattr(deleted, "deleted", True), "delete")
            for what, call in [("retrieve", lambda: client.responses.retrieve(r1.id)),
                               ("delete", lambda: client.responses.delete(r1.id))]:
                try:
                    call()
                    c.check(False, f"{what} after delete must 404")
                except openai.NotFoundError:
                    c.check(True, "")
            try:
                client.responses.create(model=model, previous_response_id=r1.id, input="x", max_output_tokens=2)
                c.check(False, "a deleted previous_response_id must be refused")
            except openai.BadRequestError as e:
                c.check(e.body.get("param") == "previous_response_id", f"param {e.body}")
            unstored = client.responses.create(model=model, input="x", max_output_tokens=2, store=False)
            try:
                client.responses.retrieve(unstored.id)
                c.check(False, "store=false must not be retrievable")
            except openai.NotFoundError:
                c.check(True, "")

        def refusals(c):
            for tools, param in [([{"type": "web_search"}], "tools[0].type"), ([{"type": "file_search"}], "tools[0].type"),
                                 ([{"type": "computer_use_preview"}], "tools[0].type")]:
                try:
                    client.responses.create(model=model, input="x", tools=tools)
                    c.check(False, f"{tools} must be refused")
                except openai.BadRequestError as e:
                    c.check(e.body.get("param") == param and tools[0]["type"] in e.body.get("message", ""),
                            f"hosted tool refused naming it: {e.body}")
            try:
                client.responses.create(model=model, input="x",
                                        text={"format": {"type": "json_schema", "name": "x", "schema": "{no"}})
                c.check(False, "a malformed text.format schema must be refused")
            except openai.BadRequestError as e:
                c.check(e.body.get("param") == "text.format.schema", f"param {e.body}")
            try:
                client.responses.create(model="gpt-9", input="x")
                c.check(False, "unknown model must 404")
            except openai.NotFoundError as e:
                c.check(e.body.get("code") == "model_not_found", "model_not_found")

        Checks().run([plain, streaming, function_calling, custom_tools, reasoning_budget, continuation, refusals])


if __name__ == "__main__":
    main()
