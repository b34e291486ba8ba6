"""e2e robustness of /v1/responses and /v1/messages: hostile inputs (wrong types, missing required fields, unknown
item and block types, hosted tools, oversized bodies, bad previous_response_id, malformed JSON) each answered with a
4xx in the route's own error shape (OpenAI's {"error": {message, type, param, code}} naming the field; Anthropic's
{"type": "error", "error": {type, message}} whose message names it), early disconnects of both streams, and the
server healthy afterwards with its pools full again."""
import json
import socket
import time

from harness import Checks, Server

USER = [{"role": "user", "content": "hi"}]


def resp(**fields):
    body = {"input": "hi", "max_output_tokens": 4}
    body.update(fields)
    return body


def msg(**fields):
    body = {"model": "tiny-chat", "max_tokens": 4, "messages": USER}
    body.update(fields)
    return body


def items(*xs):
    return resp(input=list(xs))


def umsg(*blocks):
    return msg(messages=[{"role": "user", "content": list(blocks)}])


FN = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
ATOOL = {"name": "f", "input_schema": {"type": "object", "properties": {}}}

# (name, body (dict or raw bytes), expected status, expected param (OpenAI) or None for "don't care")
RESPONSES = [
    ("malformed json", b'{"input": [', 400, None),
    ("array body", b"[]", 400, None),
    ("invalid utf-8", b'{"input": "\xff\xfe"}', 400, None),
    ("absurd nesting", b'{"input":' + b"[" * 100000 + b"]" * 100000 + b"}", 400, None),
    ("input missing", {"max_output_tokens": 3}, 400, "input"),
    ("input number", resp(input=5), 400, "input"),
    ("input empty", resp(input=[]), 400, "input"),
    ("item not object", items(5), 400, "input[0]"),
    ("unknown item type", items({"type": "telepathy"}), 400, "input[0].type"),
    ("hosted item", items({"type": "computer_call", "call_id": "c"}), 400, "input[0].type"),
    ("item_reference", items({"type": "item_reference", "id": "msg_1"}), 400, "input[0].type"),
    ("message bad role", items({"role": "wizard", "content": "x"}), 400, "input[0].role"),
    ("message no content", items({"role": "user"}), 400, "input[0].content"),
    ("image part", items({"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}), 400,
     "input[0].content[0]"),
    ("unknown part", items({"role": "user", "content": [{"type": "hologram"}]}), 400, "input[0].content[0].type"),
    ("part text number", items({"role": "user", "content": [{"type": "input_text", "text": 5}]}), 400,
     "input[0].content[0].text"),
    ("call without call_id", items({"type": "function_call", "name": "f", "arguments": "{}"}), 400, "input[0].call_id"),
    ("call arguments not json", items({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{nope"}), 400,
     "input[0].arguments"),
    ("call arguments array", items({"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}), 400,
     "input[0].arguments"),
    ("output without output", items({"type": "function_call_output", "call_id": "c"}), 400, "input[0].output"),
    ("output number", items({"type": "function_call_output", "call_id": "c", "output": 7}), 400, "input[0].output"),
    ("tools object", resp(tools={"type": "function"}), 400, "tools"),
    ("tool without type", resp(tools=[{"name": "f"}]), 400, "tools[0].type"),
    ("hosted web_search", resp(tools=[{"type": "web_search"}]), 400, "tools[0].type"),
    ("hosted file_search", resp(tools=[{"type": "file_search", "vector_store_ids": ["v"]}]), 400, "tools[0].type"),
    ("hosted computer", resp(tools=[{"type": "computer_use_preview"}]), 400, "tools[0].type"),
    ("unknown tool type", resp(tools=[{"type": "spell"}]), 400, "tools[0].type"),
    ("tool bad name", resp(tools=[{"type": "function", "name": "a b"}]), 400, "tools[0].name"),
    ("tool duplicate", resp(tools=[FN, FN]), 400, "tools[1].name"),
    ("tool parameters string", resp(tools=[{"type": "function", "name": "f", "parameters": "x"}]), 400,
     "tools[0].parameters"),
    ("custom bad format", resp(tools=[{"type": "custom", "name": "f", "format": {"type": "yaml"}}]), 400,
     "tools[0].format.type"),
    ("tool_choice missing tool", resp(tools=[FN], tool_choice={"type": "function", "name": "g"}), 400,
     "tool_choice.name"),
    ("tool_choice without tools", resp(tool_choice="required"), 400, "tool_choice"),
    ("tool_choice hosted", resp(tools=[FN], tool_choice={"type": "web_search_preview"}), 400, "tool_choice.type"),
    ("allowed_tools unknown", resp(tools=[FN], tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [
        {"type": "function", "name": "g"}]}), 400, "tool_choice.tools"),
    ("max_output_tokens 0", resp(max_output_tokens=0), 400, "max_output_tokens"),
    ("max_output_tokens string", resp(max_output_tokens="10"), 400, "max_output_tokens"),
    ("max_output_tokens huge", resp(max_output_tokens=10**12), 400, "max_output_tokens"),
    ("temperature 5", resp(temperature=5), 400, "temperature"),
    ("top_p 0", resp(top_p=0), 400, "top_p"),
    ("stream yes", resp(stream="yes"), 400, "stream"),
    ("reasoning string", resp(reasoning="high"), 400, "reasoning"),
    ("reasoning effort", resp(reasoning={"effort": "ultra"}), 400, "reasoning.effort"),
    ("text json_schema", resp(text={"format": {"type": "json_schema", "name": "x", "schema": "{no"}}), 400,
     "text.format.schema"),
    ("text format nonsense", resp(text={"format": {"type": "xml"}}), 400, "text.format.type"),
    ("metadata value", resp(metadata={"k": 5}), 400, "metadata.k"),
    ("background", resp(background=True), 400, "background"),
    ("conversation", resp(conversation="conv_1"), 400, "conversation"),
    ("top_logprobs", resp(top_logprobs=5), 400, "top_logprobs"),
    ("store yes", resp(store="yes"), 400, "store"),
    ("previous id unknown", resp(previous_response_id="resp_does_not_exist"), 400, "previous_response_id"),
    ("previous id number", resp(previous_response_id=5), 400, "previous_response_id"),
    ("unknown model", resp(model="gpt-9"), 404, "model"),
    ("context exceeded", resp(input="word " * 5000), 400, "input"),
    ("oversized body", {"input": "x" * 300000}, 413, None),
]

# (name, body, expected status, a word the Anthropic error message must contain)
MESSAGES = [
    ("malformed json", b'{"messages": [', 400, "JSON"),
    ("array body", b"[]", 400, "object"),
    ("model missing", {"max_tokens": 4, "messages": USER}, 400, "model"),
    ("max_tokens missing", {"model": "tiny-chat", "messages": USER}, 400, "max_tokens"),
    ("max_tokens 0", msg(max_tokens=0), 400, "max_tokens"),
    ("max_tokens huge", msg(max_tokens=10**9), 400, "max_tokens"),
    ("max_tokens string", msg(max_tokens="4"), 400, "max_tokens"),
    ("messages missing", {"model": "tiny-chat", "max_tokens": 4}, 400, "messages"),
    ("messages empty", msg(messages=[]), 400, "messages"),
    ("messages string", msg(messages="hi"), 400, "messages"),
    ("message not object", msg(messages=[5]), 400, "messages[0]"),
    ("role system", msg(messages=[{"role": "system", "content": "x"}]), 400, "messages[0].role"),
    ("content number", msg(messages=[{"role": "user", "content": 5}]), 400, "messages[0].content"),
    ("unknown block", umsg({"type": "hologram"}), 400, "hologram"),
    ("block without type", umsg({"text": "x"}), 400, "type"),
    ("text not string", umsg({"type": "text", "text": 5}), 400, "text"),
    ("image block", umsg({"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}), 400, "image"),
    ("document block", umsg({"type": "document", "source": {"type": "text", "data": "x"}}), 400, "document"),
    ("tool_use from user", umsg({"type": "tool_use", "id": "t", "name": "f", "input": {}}), 400, "tool_use"),
    ("tool_result without id", umsg({"type": "tool_result", "content": "x"}), 400, "tool_use_id"),
    ("tool_use input string", msg(messages=USER + [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}, {"role": "user", "content": "ok"}]), 400, "input"),
    ("server tool block", umsg({"type": "web_search_tool_result", "tool_use_id": "t", "content": []}), 400,
     "web_search_tool_result"),
    ("prefill", msg(messages=USER + [{"role": "assistant", "content": "Sure"}]), 400, "prefill"),
    ("system number", msg(system=5), 400, "system"),
    ("tools not array", msg(tools={"name": "f"}), 400, "tools"),
    ("tool without schema", msg(tools=[{"name": "f"}]), 400, "input_schema"),
    ("tool schema string", msg(tools=[{"name": "f", "input_schema": "x"}]), 400, "input_schema"),
    ("tool bad name", msg(tools=[{"name": "a b", "input_schema": {"type": "object"}}]), 400, "name"),
    ("server tool", msg(tools=[{"type": "bash_20250124", "name": "bash"}]), 400, "bash_20250124"),
    ("tool_choice string", msg(tools=[ATOOL], tool_choice="auto"), 400, "tool_choice"),
    ("tool_choice type", msg(tools=[ATOOL], tool_choice={"type": "sometimes"}), 400, "tool_choice.type"),
    ("tool_choice missing tool", msg(tools=[ATOOL], tool_choice={"type": "tool", "name": "g"}), 400, "g"),
    ("tool_choice any without tools", msg(tool_choice={"type": "any"}), 400, "tool_choice"),
    ("thinking type", msg(thinking={"type": "maybe"}), 400, "thinking.type"),
    ("thinking no budget", msg(thinking={"type": "enabled"}), 400, "budget_tokens"),
    ("thinking budget 0", msg(thinking={"type": "enabled", "budget_tokens": 0}), 400, "budget_tokens"),
    ("temperature 1.5", msg(temperature=1.5), 400, "temperature"),
    ("top_p 0", msg(top_p=0), 400, "top_p"),
    ("stop_sequences string", msg(stop_sequences="x"), 400, "stop_sequences"),
    ("stop_sequences numbers", msg(stop_sequences=[1]), 400, "stop"),
    ("stream yes", msg(stream="yes"), 400, "stream"),
    ("metadata string", msg(metadata="u"), 400, "metadata"),
    ("output_config format", msg(output_config={"format": {"type": "json_schema", "schema": {}}}), 400,
     "output_config.format"),
    ("unknown model", msg(model="claude-9"), 404, "claude-9"),
    ("context exceeded", msg(messages=[{"role": "user", "content": "word " * 5000}]), 400, "context"),
    ("oversized body", {"messages": [{"role": "user", "content": "x" * 300000}]}, 413, "bytes"),
]


def main():
    with Server("--max-body-bytes", "262144", "--max-running", "4") as srv:
        def responses_hostile(c):
            for name, body, want, param in RESPONSES:
                status, headers, raw = srv.post("/v1/responses", body)
                ok = c.check(status == want, f"responses {name}: status {status}, want {want}: {raw[:200]!r}")
                try:
                    err = json.loads(raw)["error"]
                except (ValueError, KeyError, TypeError):
                    c.check(False, f"responses {name}: not an OpenAI error body: {raw[:200]!r}")
                    continue
                c.check(headers.get("content-type", "").startswith("application/json"), f"responses {name}: JSON")
                c.check(set(err) == {"message", "type", "param", "code"} and err["message"], f"responses {name}: {err}")
                if ok and param is not None:
                    c.check(err["param"] == param, f"responses {name}: param {err['param']!r}, want {param!r}")

        def messages_hostile(c):
            for name, body, want, word in MESSAGES:
                status, headers, raw = srv.post("/v1/messages", body)
                c.check(status == want, f"messages {name}: status {status}, want {want}: {raw[:200]!r}")
                try:
                    j = json.loads(raw)
                except ValueError:
                    c.check(False, f"messages {name}: not JSON: {raw[:200]!r}")
                    continue
                c.check(j.get("type") == "error" and set(j.get("error", {})) == {"type", "message"},
                        f"messages {name}: not the Anthropic error shape: {j}")
                c.check(headers.get("content-type", "").startswith("application/json"), f"messages {name}: JSON")
                message = j.get("error", {}).get("message", "")
                c.check(word.lower() in message.lower(), f"messages {name}: message names {word!r}: {message!r}")
            status, _, raw = srv.post("/v1/messages/count_tokens", {"model": "tiny-chat", "messages": 5})
            c.check(status == 400 and json.loads(raw)["type"] == "error", f"count_tokens hostile: {status} {raw[:120]!r}")

        def other_statuses(c):
            for method, path in [("GET", "/v1/responses/resp_nope"), ("DELETE", "/v1/responses/resp_nope")]:
                status, _, raw = srv_request(srv, method, path)
                c.check(status == 404 and "error" in json.loads(raw), f"{method} {path}: {status} {raw[:100]!r}")
            status, _, raw = srv_request(srv, "GET", "/v1/messages/nope")
            j = json.loads(raw)
            c.check(status == 404 and j.get("type") == "error" and j["error"]["type"] == "not_found_error",
                    f"unknown /v1/messages route in the Anthropic shape: {status} {j}")
            status, _, raw = srv_request(srv, "GET", "/v1/responses")
            c.check(status in (404, 405) and "error" in json.loads(raw), f"GET /v1/responses: {status}")

        def disconnects(c):
            # Streams closed right after their first bytes: both are cancelled and their slots come back.
            for path, body in [("/v1/responses", resp(stream=True, max_output_tokens=200)),
                               ("/v1/messages", msg(stream=True, max_tokens=200))]:
                data = json.dumps(body).encode()
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                c.check(b"200" in s.recv(64), f"{path}: stream started")
                s.close()

        def healthy_afterwards(c):
            deadline = time.time() + 20
            while time.time() < deadline:
                m = srv.metrics()
                if m.get("voltserve_num_requests_running", 1) == 0 and m.get("voltserve_num_requests_waiting", 1) == 0:
                    break
                time.sleep(0.1)
            m = srv.metrics()
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total"), f"KV pages back: {m}")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total"), "state slots back")
            status, _, _ = srv.get("/health")
            c.check(status == 200, "healthy after the hostile suite")
            status, _, raw = srv.post("/v1/responses", resp())
            c.check(status == 200 and json.loads(raw)["object"] == "response", f"/v1/responses still answers: {status}")
            status, _, raw = srv.post("/v1/messages", msg())
            c.check(status == 200 and json.loads(raw)["type"] == "message", f"/v1/messages still answers: {status}")
            counted = {k: v for k, v in m.items() if k.startswith("voltserve_requests_total{")}
            c.check(any('endpoint="/v1/responses"' in k for k in counted) and
                    any('endpoint="/v1/messages"' in k for k in counted), "both routes are counted in /metrics")

        Checks().run([responses_hostile, messages_hostile, other_statuses, disconnects, healthy_afterwards])


def srv_request(srv, method, path):
    from harness import request
    return request(method, srv.base + path, headers=srv.headers())


if __name__ == "__main__":
    main()
