"""The demo model's chat format: a fast renderer of tools/demo/tokenizer/chat_template.jinja for the message shapes
the data generator writes, and the split of a conversation into (prompt, completion) training text.

Training text must be exactly what voltserve feeds the model, so tests/demo/data_test.py renders samples of every
task family through voltserve itself (tests/demo/demo_chat_check.cpp: render_chat_prompt with this template, its
tokenizer, and the server's reasoning + tool-call parsing) and requires byte-identical prompts. The renderer covers:
an optional system message, user turns, assistant turns (reasoning, content, tool calls with string/integer
arguments), tool results, the generation prompt with and without thinking. Anything else raises ValueError.
"""
import json

# The tool-call instructions of the demo template (the real Qwen3.5 text, shortened: one parameter in the example,
# no <IMPORTANT> block; every training example with tools carries it, so it is kept short).
TOOLS_PREAMBLE = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_FORMAT = ("\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
                "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
                "</parameter>\n</function>\n</tool_call>")

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"


def tojson(value):
    """The template's `tojson` (transformers' chat-template environment: json.dumps, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def _arg_text(value):
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"tool-call argument {value!r}: only strings and integers are rendered here")
    return str(value)


def _is_tool_response_turn(text):
    return text.startswith("<tool_response>") and text.endswith("</tool_response>")


def render_tool_calls(content, tool_calls):
    out = []
    for i, call in enumerate(tool_calls):
        fn = call.get("function", call)
        if i == 0:
            out.append(("\n\n" if content.strip() else "") + "<tool_call>\n<function=" + fn["name"] + ">\n")
        else:
            out.append("\n<tool_call>\n<function=" + fn["name"] + ">\n")
        args = fn.get("arguments", {})
        if isinstance(args, str):
            args = json.loads(args)
        for name, value in args.items():
            out.append("<parameter=" + name + ">\n" + _arg_text(value) + "\n</parameter>\n")
        out.append("</function>\n</tool_call>")
    return "".join(out)


def _assistant_body(message, with_reasoning):
    content = (message.get("content") or "").strip()
    reasoning = message.get("reasoning_content")
    if not isinstance(reasoning, str):
        reasoning = ""
        if "</think>" in content:
            raise ValueError("put reasoning in reasoning_content, not in content")
    reasoning = reasoning.strip()
    head = "<think>\n" + reasoning + "\n</think>\n\n" + content if with_reasoning else content
    return head + render_tool_calls(content, message.get("tool_calls") or [])


def render(messages, tools=None, add_generation_prompt=True, enable_thinking=True):
    """The template's output for these messages (see the module docstring for what is supported)."""
    if not messages:
        raise ValueError("no messages")
    out = []
    if tools:
        out.append(IM_START + "system\n" + TOOLS_PREAMBLE)
        for tool in tools:
            out.append("\n" + tojson(tool))
        out.append(TOOLS_FORMAT)
        if messages[0]["role"] == "system":
            text = messages[0]["content"].strip()
            if text:
                out.append("\n\n" + text)
        out.append(IM_END + "\n")
    elif messages[0]["role"] == "system":
        out.append(IM_START + "system\n" + messages[0]["content"].strip() + IM_END + "\n")

    last_query = None
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m["role"] == "user" and not _is_tool_response_turn(m["content"].strip()):
            last_query = i
            break
    if last_query is None:
        raise ValueError("no user query in the messages")

    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system":
            if i != 0:
                raise ValueError("a system message must come first")
        elif role == "user":
            out.append(IM_START + "user\n" + m["content"].strip() + IM_END + "\n")
        elif role == "assistant":
            out.append(IM_START + "assistant\n" + _assistant_body(m, i > last_query) + IM_END + "\n")
        elif role == "tool":
            if i > 0 and messages[i - 1]["role"] != "tool":
                out.append(IM_START + "user")
            out.append("\n<tool_response>\n" + m["content"].strip() + "\n</tool_response>")
            if i == len(messages) - 1 or messages[i + 1]["role"] != "tool":
                out.append(IM_END + "\n")
        else:
            raise ValueError(f"unexpected role {role!r}")
    if add_generation_prompt:
        out.append(IM_START + "assistant\n" + ("<think>\n" if enable_thinking else "<think>\n\n</think>\n\n"))
    return "".join(out)


def completion_text(message, enable_thinking=True):
    """What the model writes after the generation prompt for this final assistant message, <|im_end|> included."""
    body = _assistant_body(message, True)
    if not body.startswith("<think>\n"):
        raise AssertionError(body)
    body = body[len("<think>\n"):]
    if not enable_thinking:
        if not body.startswith("\n</think>\n\n"):
            raise ValueError("with thinking off the final assistant message must have no reasoning")
        body = body[len("\n</think>\n\n"):]
    return body + IM_END


def split_example(messages, tools=None, enable_thinking=True):
    """(prompt, completion) for a conversation whose last message is the assistant turn to learn."""
    if messages[-1]["role"] != "assistant":
        raise ValueError("the last message must be the assistant's")
    prompt = render(messages[:-1], tools, True, enable_thinking)
    return prompt, completion_text(messages[-1], enable_thinking)
