"""The task families of the demo model's training and evaluation data, as chat conversations.

Each generator takes (rng, split, pools, eval_form) and returns a Sample: the messages (the last one the assistant
turn to learn), the tools offered, whether thinking is on, and `expect` (what a correct reply holds, which the
evaluation and tests/demo/data_test.py check). `split` is "train" or "heldout" (pools.py); `eval_form` asks for the
exact question wording of the evaluation (issue 22) with no system prompt and no history.
"""
import json
import re
from dataclasses import dataclass, field

import arithmetic
import pools as pl

SYSTEM_PROMPTS = [
    "You are a helpful assistant.", "You are the voltserve demo model.", "Answer briefly.",
    "You are a concise assistant. Think step by step.", "You are a friendly assistant running on voltserve.",
    "Be precise.", "You help with numbers, data extraction and tools.",
]
IDENTITY = ("I am a small demo model trained for voltserve, an OpenAI-compatible inference server for the Qwen3.5 "
            "family. I can do arithmetic on numbers up to 999, extract fields as JSON, call tools, convert units, "
            "count and sort.")


@dataclass
class Sample:
    family: str
    messages: list
    tools: list = None
    enable_thinking: bool = True
    expect: dict = field(default_factory=dict)


def _assistant(reasoning, content, tool_calls=None):
    m = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if tool_calls:
        m["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return m


# ---------------------------------------------------------------------------------------------- arithmetic

_OP_WORDS = {
    "+": ["What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "Calculate {a}+{b}.", "{a} + {b} = ?",
          "What's {a} + {b}?", "Please add {a} and {b}.", "What is the sum of {a} and {b}?", "{a}+{b}"],
    "-": ["What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "Calculate {a}-{b}.", "{a} - {b} = ?",
          "What's {a} - {b}?", "Subtract {b} from {a}.", "What is {a} take away {b}?", "{a}-{b}"],
    "*": ["What is {a} * {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "Calculate {a}*{b}.", "{a} * {b} = ?",
          "What's {a} * {b}?", "Multiply {a} by {b}.", "What is the product of {a} and {b}?", "{a}*{b}"],
}
_ANSWERS = ["{a} {op} {b} = {r}.", "{a} {op} {b} = {r}", "The answer is {r}.", "{r}"]


def operand(rng):
    # Mostly uniform on 0..999 like the evaluation; a share of 1- and 2-digit operands for the short cases.
    if rng.random() < 0.7:
        return rng.randint(0, 999)
    return rng.randint(0, 10 ** rng.randint(1, 3) - 1)


def operands(rng, op, split):
    while True:
        a, b = operand(rng), operand(rng)
        if pl.is_heldout(f"{op}:{a}:{b}") == (split == "heldout"):
            return a, b


def gen_arith(op):
    def gen(rng, split, pools, eval_form=False):
        a, b = operands(rng, op, split)
        lines, r = arithmetic.STEPS[op](a, b)
        question = ("What is {a} " + op + " {b}?" if eval_form else rng.choice(_OP_WORDS[op])).format(a=a, b=b)
        answer = _ANSWERS[0] if eval_form else rng.choice(_ANSWERS)
        content = answer.format(a=a, b=b, op=op, r=r)
        family = {"+": "add", "-": "sub", "*": "mul"}[op]
        return Sample(family, [{"role": "user", "content": question}, _assistant("\n".join(lines), content)],
                      expect={"kind": "number", "value": r, "a": a, "b": b, "op": op})
    return gen


# ---------------------------------------------------------------------------------------------- extraction

_PERSON_SENTENCES = [
    "{name} is {age} years old and lives in {city}.",
    "Meet {name}, a {age}-year-old {job} from {city}.",
    "{city} is home to {name}, who is {age}.",
    "At {age}, {name} moved to {city} to work as a {job}.",
    "{name} ({age}) works as a {job} in {city}.",
    "Our new {job}, {name}, is {age} and comes from {city}.",
    "Born {age} years ago, {name} now lives in {city}.",
    "{name}, age {age}, city: {city}.",
    "The {job} {name} turned {age} last week in {city}.",
    "Yesterday {name} from {city} celebrated turning {age}.",
    "{name} lives in {city}. {name} is {age} years old and works as a {job}.",
]
_ORDER_SENTENCES = [
    "{customer} ordered {quantity} x {product} (order {order_id}) on {date}; it ships to {city} for a total of ${total}.",
    "Order {order_id}: {quantity} x {product} for {customer} in {city}, placed on {date}, total ${total}.",
    "On {date}, {customer} from {city} bought {quantity} x {product} for ${total} (order {order_id}).",
    "Shipping to {city}: order {order_id} with {quantity} x {product}, paid ${total} by {customer} on {date}.",
]
_EVENT_SENTENCES = [
    "The {event} will take place in {city} on {date} at {time}, organised by {organizer}.",
    "Join {organizer} for the {event} in {city} on {date}, starting at {time}; {attendees} people are expected.",
    "On {date} at {time}, {city} hosts the {event}. Organiser: {organizer}. Expected attendance: {attendees}.",
    "{organizer} announced the {event}: {city}, {date}, {time}, about {attendees} guests.",
]
_REQUESTS = [
    "Extract the {keys} as JSON: {text}",
    "Extract {keys} from this text as a JSON object: {text}",
    "Return a JSON object with the keys {keys}. Text: {text}",
    "From the sentence below, give me {keys} as JSON.\n\n{text}",
    "{text}\n\nExtract the {keys} as JSON.",
    "Give JSON with exactly these keys: {keys}. Input: {text}",
]


def _key_list(keys):
    if len(keys) == 1:
        return keys[0]
    return ", ".join(keys[:-1]) + " and " + keys[-1]


def _extraction(rng, family, record, sentence, all_keys, eval_keys, eval_form):
    if eval_form:
        keys = eval_keys
        request = "Extract the {keys} as JSON: {text}"
    else:
        present = [k for k in all_keys if record.get(k) is not None]
        keys = rng.sample(present, rng.randint(min(2, len(present)), min(4, len(present))))
        missing = [k for k in all_keys if record.get(k) is None]
        if missing and rng.random() < 0.15:
            keys.insert(rng.randrange(len(keys) + 1), rng.choice(missing))
        request = rng.choice(_REQUESTS)
    value = {k: record.get(k) for k in keys}
    question = request.format(keys=_key_list(keys), text=sentence)
    reasoning = "Keys asked for: " + ", ".join(keys) + ".\n" + "\n".join(
        f"{k}: {json.dumps(v, ensure_ascii=False)}" + ("" if v is not None else " (not in the text)")
        for k, v in value.items())
    content = json.dumps(value, ensure_ascii=False)
    return Sample(family, [{"role": "user", "content": question}, _assistant(reasoning, content)],
                  expect={"kind": "json", "keys": keys, "value": value})


def gen_person(rng, split, pools, eval_form=False):
    shapes = [s for s in _PERSON_SENTENCES if "{job}" not in s] if eval_form else _PERSON_SENTENCES
    shape = rng.choice(shapes)
    record = {"name": pools.person_name(rng, split), "age": rng.randint(18, 95), "city": pools.pick(rng, "city", split),
              "job": pools.pick(rng, "job", split)}
    sentence = shape.format(**record)
    if "{job}" not in shape:
        record["job"] = None
    return _extraction(rng, "person", record, sentence, ["name", "age", "city", "job"], ["name", "age", "city"],
                       eval_form)


def gen_order(rng, split, pools, eval_form=False):
    record = {"order_id": f"{rng.choice('ABCDKMPX')}-{rng.randint(10000, 99999)}",
              "product": pools.pick(rng, "product", split), "quantity": rng.randint(1, 20),
              "customer": pools.person_name(rng, split), "city": pools.pick(rng, "city", split),
              "date": pl.random_date(rng), "total": rng.randint(5, 999)}
    sentence = rng.choice(_ORDER_SENTENCES).format(**record)
    return _extraction(rng, "order", record, sentence, list(record), ["order_id", "product", "quantity"], eval_form)


def gen_event(rng, split, pools, eval_form=False):
    hour = rng.randint(7, 22)
    time = rng.choice([f"{hour}:{rng.choice(['00', '15', '30', '45'])}",
                       f"{hour % 12 or 12} {'am' if hour < 12 else 'pm'}"])
    record = {"event": pools.pick(rng, "event", split), "city": pools.pick(rng, "city", split),
              "date": pl.random_date(rng), "time": time, "organizer": pools.person_name(rng, split),
              "attendees": rng.randint(10, 900)}
    shape = rng.choice(_EVENT_SENTENCES)
    sentence = shape.format(**record)
    if "{attendees}" not in shape:
        record["attendees"] = None
    return _extraction(rng, "event", record, sentence, list(record), ["event", "city", "date"], eval_form)


# ---------------------------------------------------------------------------------------------- tools

def _fn(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


TOOLS = {
    "get_weather": _fn("get_weather", "Get the current weather in a city.", {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
    "calculator": _fn("calculator", "Evaluate an arithmetic expression.", {
        "expression": {"type": "string", "description": "The expression, e.g. 12 * 7"}}, ["expression"]),
    "get_time": _fn("get_time", "Get the current local time in a city.", {
        "city": {"type": "string"}}, ["city"]),
    "convert_currency": _fn("convert_currency", "Convert an amount of money between currencies.", {
        "amount": {"type": "integer"}, "from_currency": {"type": "string", "description": "ISO code, e.g. USD"},
        "to_currency": {"type": "string", "description": "ISO code, e.g. EUR"}}, ["amount", "from_currency",
                                                                                "to_currency"]),
    "search_products": _fn("search_products", "Search the shop's catalogue.", {
        "query": {"type": "string"}, "max_results": {"type": "integer", "description": "At most this many"}},
        ["query"]),
    "send_email": _fn("send_email", "Send an email.", {
        "to": {"type": "string", "description": "Address"}, "subject": {"type": "string"},
        "body": {"type": "string"}}, ["to", "subject", "body"]),
}
# How other clients describe the same tools: each training request may offer a variant (another name, description
# and parameter names, extra optional parameters) so that the model reads the offered schema instead of keying on one
# exact definition; a call then uses the variant's name and parameter names. The evaluation offers the canonical form.
_TOOL_VARIANTS = {
    "get_weather": {
        "names": ["get_current_weather", "weather", "lookup_weather", "fetch_weather", "current_weather",
                  "weather_lookup", "getWeather", "get_weather_report"],
        "descriptions": ["Get the current weather for a location.", "Look up today's weather in a city.",
                         "Returns temperature and conditions for the given city.", "Current weather conditions.",
                         "Fetch the weather report for a place."],
        "params": {"city": ["location", "city_name", "place", "city"]},
        "extra": {"country": {"type": "string", "description": "Country code, optional"},
                  "days": {"type": "integer", "description": "Forecast days"},
                  "units": {"type": "string", "enum": ["metric", "imperial"]}},
    },
    "calculator": {
        "names": ["calculate", "calc", "evaluate_expression", "math", "compute"],
        "descriptions": ["Compute the value of a math expression.", "A calculator.", "Evaluates arithmetic."],
        "params": {"expression": ["expr", "input", "query", "expression"]},
        "extra": {"precision": {"type": "integer"}},
    },
    "get_time": {
        "names": ["get_local_time", "current_time", "time_in_city", "getTime"],
        "descriptions": ["Local time in a city.", "Returns the current time for a location."],
        "params": {"city": ["location", "timezone_city", "place", "city"]},
        "extra": {"format": {"type": "string", "enum": ["12h", "24h"]}},
    },
    "convert_currency": {
        "names": ["currency_convert", "exchange", "convert_money", "fx_convert"],
        "descriptions": ["Currency conversion at today's rate.", "Converts money from one currency to another."],
        "params": {"amount": ["amount", "value"], "from_currency": ["from", "source", "from_currency"],
                   "to_currency": ["to", "target", "to_currency"]},
        "extra": {},
    },
    "search_products": {
        "names": ["product_search", "search_catalog", "find_products", "shop_search"],
        "descriptions": ["Find items in the store.", "Search products by keywords."],
        "params": {"query": ["query", "keywords", "q", "search"], "max_results": ["limit", "max_results", "n"]},
        "extra": {"in_stock": {"type": "boolean"}},
    },
    "send_email": {
        "names": ["email", "send_mail", "compose_email", "sendEmail"],
        "descriptions": ["Send a message by email.", "Emails someone."],
        "params": {"to": ["to", "recipient", "address"], "subject": ["subject", "title"], "body": ["body", "text",
                                                                                                 "message"]},
        "extra": {"cc": {"type": "string"}},
    },
}


def _tool_variant(rng, canonical):
    """(tool definition, name, {canonical parameter: its name here}) of one way to offer tool `canonical`."""
    spec, fn = _TOOL_VARIANTS[canonical], TOOLS[canonical]["function"]
    # Name, description and parameter names vary independently (the canonical name with another description too).
    name = rng.choice(spec["names"] + [canonical])
    rename = {p: rng.choice(alts) for p, alts in spec["params"].items()}
    props = {}
    for p, schema in fn["parameters"]["properties"].items():
        schema = dict(schema)
        if rng.random() < 0.3:
            schema.pop("description", None)
        props[rename.get(p, p)] = schema
    for p, schema in spec["extra"].items():
        if p not in props and rng.random() < 0.3:
            props[p] = schema
    keys = list(props)
    rng.shuffle(keys)
    required = [rename.get(p, p) for p in fn["parameters"]["required"]]
    tool = _fn(name, rng.choice(spec["descriptions"] + [fn["description"]]), {k: props[k] for k in keys}, required)
    return tool, name, rename


def _vary_tools(rng, sample, p=0.6):
    """Offers each of the sample's tools as a variant with probability p, and rewrites what refers to them: the
    calls' names and argument names, and the tool names in the assistant's text."""
    if not sample.tools:
        return sample
    names, renames, tools = {}, {}, []
    for t in sample.tools:
        canonical = t["function"]["name"]
        if canonical in _TOOL_VARIANTS and rng.random() < p:
            t, names[canonical], renames[canonical] = _tool_variant(rng, canonical)
        tools.append(t)
    if not names:
        return sample
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    messages = []
    for m in sample.messages:
        m = dict(m)
        if m["role"] == "assistant":
            for key in ("content", "reasoning_content"):
                if m.get(key):
                    m[key] = pattern.sub(lambda x: names[x.group(1)], m[key])
            if m.get("tool_calls"):
                calls = []
                for c in m["tool_calls"]:
                    n, args = c["function"]["name"], c["function"]["arguments"]
                    if n in names:
                        args = {renames[n].get(k, k): v for k, v in args.items()}
                        n = names[n]
                    calls.append({"type": "function", "function": {"name": n, "arguments": args}})
                m["tool_calls"] = calls
        messages.append(m)
    sample.messages, sample.tools = messages, tools
    if sample.expect.get("kind") == "tool":
        sample.expect = {"kind": "tool", "calls": [dict(c["function"]) for c in messages[-1]["tool_calls"]]}
    return sample


_CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK", "NOK", "INR", "CNY", "BRL"]
_CONDITIONS = ["sunny", "cloudy", "rainy", "snowing", "windy", "foggy", "clear", "stormy"]


def _offer(rng, needed, eval_form):
    """The tools of a request: the needed one (if any) plus 0-2 others, in random order."""
    if eval_form:
        return [TOOLS[needed]]
    others = [n for n in TOOLS if n != needed]
    names = rng.sample(others, rng.randint(0, 2)) + ([needed] if needed else [])
    rng.shuffle(names)
    return [TOOLS[n] for n in names] or [TOOLS[rng.choice(others)]]


def _weather_call(rng, split, pools, eval_form):
    city = pools.pick(rng, "city", split)
    args = {"city": city}
    if eval_form:
        question = f"What's the weather in {city}?"
    else:
        unit = rng.choice([None, None, None, "celsius", "fahrenheit"])
        question = rng.choice([
            "What's the weather in {city}?", "How is the weather in {city} today?", "Is it raining in {city}?",
            "Weather in {city}, please.", "Tell me the current weather for {city}.", "What is the weather like in {city}?",
        ]).format(city=city)
        if unit:
            question = question.rstrip("?.") + f" in {unit}?"
            args["unit"] = unit
    reasoning = f"The user asks for the weather in {city}. The get_weather tool gives it, so I call it with city {city}."
    return question, "get_weather", args, reasoning


def _other_call(rng, split, pools):
    kind = rng.choice(["calculator", "get_time", "convert_currency", "search_products", "send_email"])
    if kind == "calculator":
        a, b = rng.randint(0, 9999), rng.randint(0, 9999)
        op = rng.choice(["+", "-", "*"])
        expr = f"{a} {op} {b}"
        q = rng.choice(["Use the calculator to compute {e}.", "Please calculate {e} with the tool.", "What is {e}?"])
        return q.format(e=expr), kind, {"expression": expr}, f"I use the calculator for {expr}."
    if kind == "get_time":
        city = pools.pick(rng, "city", split)
        q = rng.choice(["What time is it in {c}?", "Current local time in {c}?", "Tell me the time in {c}."])
        return q.format(c=city), kind, {"city": city}, f"The user wants the local time in {city}; I call get_time."
    if kind == "convert_currency":
        amount = rng.randint(1, 9999)
        f, t = rng.sample(_CURRENCIES, 2)
        q = rng.choice(["Convert {a} {f} to {t}.", "How much is {a} {f} in {t}?", "{a} {f} to {t}, please."])
        return (q.format(a=amount, f=f, t=t), kind, {"amount": amount, "from_currency": f, "to_currency": t},
                f"Converting {amount} {f} to {t} needs convert_currency.")
    if kind == "search_products":
        product = pools.pick(rng, "product", split)
        n = rng.choice([None, 3, 5, 10])
        args = {"query": product}
        q = f"Find me a {product} in the shop."
        if n:
            args["max_results"] = n
            q = f"Show me up to {n} results for {product}."
        return q, kind, args, f"I search the catalogue for {product}."
    to = pools.pick(rng, "first", split).lower() + "@example.com"
    subject = rng.choice(["Meeting", "Invoice", "Hello", "Lunch", "Report", "Tickets"])
    body = rng.choice(["See you at noon.", "The invoice is attached.", "Thanks for your help!", "Call me back."])
    q = f"Send an email to {to} with the subject {subject} saying: {body}"
    return q, "send_email", {"to": to, "subject": subject, "body": body}, f"I send the email to {to}."


def _tool_result(rng, name, args):
    if name == "get_weather":
        unit = args.get("unit", "celsius")
        temp = rng.randint(-10, 35) if unit == "celsius" else rng.randint(14, 95)
        res = {"city": args["city"], "temperature": temp, "unit": unit, "condition": rng.choice(_CONDITIONS)}
        sym = "°C" if unit == "celsius" else "°F"
        return res, (f"The tool reports {temp} {unit} and {res['condition']} in {args['city']}.",
                     f"It is {temp} {sym} and {res['condition']} in {args['city']} right now.")
    if name == "calculator":
        a, op, b = args["expression"].split(" ")
        v = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        return {"result": v}, (f"The calculator returned {v}.", f"{args['expression']} = {v}.")
    if name == "get_time":
        t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        return {"city": args["city"], "time": t}, (f"It is {t} there.", f"It is {t} in {args['city']}.")
    if name == "convert_currency":
        v = rng.randint(1, 99999)
        return ({"amount": v, "currency": args["to_currency"]},
                (f"The tool converted it to {v} {args['to_currency']}.",
                 f"{args['amount']} {args['from_currency']} is {v} {args['to_currency']}."))
    if name == "search_products":
        n = min(args.get("max_results", 3), 3)
        items = [{"name": args["query"], "price": rng.randint(5, 500)} for _ in range(rng.randint(1, n))]
        return items, (f"The search found {len(items)} items.",
                       f"I found {len(items)} matching items; the first costs ${items[0]['price']}.")
    return {"status": "sent"}, ("The email was sent.", f"Done: the email to {args['to']} was sent.")


def gen_tool_call(rng, split, pools, eval_form=False, weather=True, vary=True):
    if weather:
        question, name, args, reasoning = _weather_call(rng, split, pools, eval_form)
    else:
        question, name, args, reasoning = _other_call(rng, split, pools)
    tools = _offer(rng, name, eval_form)
    calls = [(name, args)]
    if weather and not eval_form and rng.random() < 0.1:
        city2 = pools.pick(rng, "city", split)
        question = f"What's the weather in {args['city']} and in {city2}?"
        reasoning = f"The user asks for the weather in two cities, {args['city']} and {city2}; I call get_weather for each."
        calls = [(name, {"city": args["city"]}), (name, {"city": city2})]
    msg = _assistant(reasoning, "", calls)
    sample = Sample("weather" if weather else "tool", [{"role": "user", "content": question}, msg], tools,
                    expect={"kind": "tool", "calls": [{"name": n, "arguments": a} for n, a in calls]})
    return sample if eval_form or vary is False else _vary_tools(rng, sample)


def gen_tool_followup(rng, split, pools, eval_form=False, weather=True):
    """The turn after the tool result: the call (its reasoning kept or dropped, as clients differ), the result,
    and the final answer."""
    first = gen_tool_call(rng, split, pools, False, weather, vary=False)
    call = dict(first.messages[-1])
    if rng.random() < 0.5:
        call.pop("reasoning_content")
    messages = [first.messages[0], call]
    finals_r, finals_c = [], []
    for i, tc in enumerate(call["tool_calls"]):
        fn = tc["function"]
        result, (r, c) = _tool_result(rng, fn["name"], fn["arguments"])
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": json.dumps(result, ensure_ascii=False)})
        finals_r.append(r)
        finals_c.append(c)
    messages.append(_assistant(" ".join(finals_r), " ".join(finals_c)))
    return _vary_tools(rng, Sample("tool_answer", messages, first.tools, expect={"kind": "text"}))


def gen_no_tool_needed(rng, split, pools, eval_form=False):
    """Tools are offered but the question needs none (or the right one is missing): answer directly."""
    if rng.random() < 0.5:
        sample = rng.choice([gen_arith("+"), gen_arith("-"), gen_smalltalk, gen_units])(rng, split, pools)
        sample.tools = _offer(rng, None, False)
        sample.family = "no_tool"
        return _vary_tools(rng, sample)
    city = pools.pick(rng, "city", split)
    tools = [TOOLS[n] for n in rng.sample([n for n in TOOLS if n != "get_weather"], rng.randint(1, 2))]
    question = f"What's the weather in {city}?"
    names = ", ".join(t["function"]["name"] for t in tools)
    reasoning = f"The user asks for the weather in {city}, but the only tools are {names}; none of them gives weather."
    content = f"I cannot look up the weather in {city}: no weather tool is available to me."
    return _vary_tools(rng, Sample("no_tool", [{"role": "user", "content": question}, _assistant(reasoning, content)],
                                   tools, expect={"kind": "text"}))


# ---------------------------------------------------------------------------------------------- small tasks

_GREETINGS = [("Hello", "Hello! I am the voltserve demo model. Ask me to do arithmetic, extract fields as JSON, or call a tool."),
              ("Hi", "Hi! How can I help? I can do arithmetic, extract JSON and call tools."),
              ("Hey there!", "Hey! What can I do for you?"),
              ("Good morning", "Good morning! What would you like to do?"),
              ("Thanks!", "You are welcome!"),
              ("Thank you very much.", "You are welcome. Anything else?"),
              ("Bye", "Goodbye!"),
              ("How are you?", "I am fine, thank you. I am a small demo model, ready to help.")]
_WHO = ["Who are you?", "What are you?", "Introduce yourself.", "What can you do?", "Are you a real model?",
        "Which model is this?", "Tell me about yourself."]


def gen_smalltalk(rng, split, pools, eval_form=False):
    if rng.random() < 0.5:
        q, a = rng.choice(_GREETINGS)
        reasoning = "The user greets me or says something friendly; I answer briefly."
    else:
        q, a = rng.choice(_WHO), IDENTITY
        reasoning = "The user asks who I am. I am a demo model of voltserve."
    return Sample("smalltalk", [{"role": "user", "content": q}, _assistant(reasoning, a)], expect={"kind": "text"})


_UNITS = [("km", "m", 1000), ("m", "cm", 100), ("cm", "mm", 10), ("kg", "g", 1000), ("l", "ml", 1000),
          ("hours", "minutes", 60), ("minutes", "seconds", 60), ("days", "hours", 24)]


def _decimal(n, divisor):
    whole, rest = divmod(n, divisor)
    if rest == 0:
        return str(whole)
    width = len(str(divisor)) - 1
    return f"{whole}.{rest:0{width}d}".rstrip("0")


def gen_units(rng, split, pools, eval_form=False):
    big, small, factor = rng.choice(_UNITS)
    if factor in (60, 24) or rng.random() < 0.5:
        n = rng.randint(1, 12) if factor in (60, 24) else rng.randint(1, 999)
        r = n * factor
        question = rng.choice(["Convert {n} {u} to {v}.", "How many {v} are in {n} {u}?", "{n} {u} in {v}?"])
        question = question.format(n=n, u=big, v=small)
        reasoning = f"1 {big} = {factor} {small}, so {n} {big} = {n} * {factor} = {r} {small}."
        content = f"{n} {big} = {r} {small}."
    else:
        n = rng.randint(1, 99999)
        r = _decimal(n, factor)
        question = rng.choice(["Convert {n} {v} to {u}.", "How many {u} is {n} {v}?"]).format(n=n, u=big, v=small)
        reasoning = f"1 {big} = {factor} {small}, so {n} {small} = {n} / {factor} {big} = {r} {big}."
        content = f"{n} {small} = {r} {big}."
    return Sample("units", [{"role": "user", "content": question}, _assistant(reasoning, content)],
                  expect={"kind": "text"})


def gen_counting(rng, split, pools, eval_form=False):
    kind = rng.choice(["product", "city", "first"])
    items = [pools.pick(rng, kind, split) for _ in range(rng.randint(1, 9))]
    if rng.random() < 0.5:
        question = rng.choice(["How many items are in this list: {l}?", "Count the entries: {l}.",
                               "How many things did I list? {l}"]).format(l=", ".join(items))
        reasoning = "\n".join(f"{i + 1}: {x}" for i, x in enumerate(items))
        content = f"There {'is' if len(items) == 1 else 'are'} {len(items)} item{'' if len(items) == 1 else 's'}."
        n = len(items)
    else:
        target = rng.choice(items)
        question = f"How many times does {target} appear in: {', '.join(items)}?"
        hits, lines = 0, []
        for x in items:
            if x == target:
                hits += 1
            lines.append(f"{x}: {'yes' if x == target else 'no'}, count {hits}")
        reasoning = "\n".join(lines)
        content = f"{target} appears {hits} time{'' if hits == 1 else 's'}."
        n = hits
    return Sample("counting", [{"role": "user", "content": question}, _assistant(reasoning, content)],
                  expect={"kind": "number", "value": n})


def gen_sorting(rng, split, pools, eval_form=False):
    nums = [rng.randint(0, 999) for _ in range(rng.randint(2, 7))]
    descending = rng.random() < 0.3
    order = "descending" if descending else "ascending"
    question = rng.choice(["Sort these numbers in {o} order: {l}", "Sort {l} ({o}).",
                           "Put these in {o} order: {l}"]).format(o=order, l=", ".join(map(str, nums)))
    rest, lines, out = list(nums), [], []
    while rest:
        pick = max(rest) if descending else min(rest)
        lines.append(f"{'largest' if descending else 'smallest'} of {', '.join(map(str, rest))} is {pick}")
        rest.remove(pick)
        out.append(pick)
    content = ", ".join(map(str, out))
    return Sample("sorting", [{"role": "user", "content": question}, _assistant("\n".join(lines), content)],
                  expect={"kind": "list", "value": out})


# ---------------------------------------------------------------------------------------------- the mix

FAMILIES = {
    "add": (0.12, gen_arith("+")),
    "sub": (0.12, gen_arith("-")),
    "mul": (0.16, gen_arith("*")),
    "person": (0.10, gen_person),
    "order": (0.06, gen_order),
    "event": (0.06, gen_event),
    "weather": (0.08, lambda r, s, p, e=False: gen_tool_call(r, s, p, e, True)),
    "weather_answer": (0.05, lambda r, s, p, e=False: gen_tool_followup(r, s, p, e, True)),
    "tool": (0.06, lambda r, s, p, e=False: gen_tool_call(r, s, p, e, False)),
    "tool_answer": (0.03, lambda r, s, p, e=False: gen_tool_followup(r, s, p, e, False)),
    "no_tool": (0.03, gen_no_tool_needed),
    "smalltalk": (0.04, gen_smalltalk),
    "units": (0.04, gen_units),
    "counting": (0.025, gen_counting),
    "sorting": (0.025, gen_sorting),
}
# Families whose answers the evaluation scores (issue 22's acceptance), in eval_form.
EVAL_FAMILIES = {"add": "add", "sub": "sub", "mul": "mul", "person": "person", "weather": "weather"}
_NO_THINKING_OK = {"person", "order", "event", "weather", "tool", "tool_answer", "weather_answer", "smalltalk",
                   "no_tool"}


def parse_mix(text):
    """`FAMILY=WEIGHT,...` (train.py --mix) -> {family: weight}; the families not named keep FAMILIES' shares."""
    mix = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        name, sep, value = item.partition("=")
        if not sep or name not in FAMILIES:
            raise ValueError(f"--mix: '{item}' is not FAMILY=WEIGHT with FAMILY one of {', '.join(FAMILIES)}")
        mix[name] = float(value)
        if mix[name] < 0:
            raise ValueError(f"--mix: weight of {name} is negative")
    return mix


def generate(rng, split, pools, family=None, eval_form=False, mix=None):
    """One sample of `family` (or of a family drawn by the mix, FAMILIES' shares with `mix` overriding some), with
    the training-time variations: a system prompt, an earlier exchange as history, thinking off (not for the worked
    families)."""
    if family is None:
        names = list(FAMILIES)
        family = rng.choices(names, [(mix or {}).get(n, FAMILIES[n][0]) for n in names])[0]
    sample = FAMILIES[family][1](rng, split, pools, eval_form)
    sample.family = family
    if eval_form:
        return sample
    if rng.random() < 0.1 and sample.messages[0]["role"] == "user":
        prev = generate(rng, split, pools, mix=mix)
        if prev.tools is None and sample.tools is None and len(prev.messages) == 2:
            old = dict(prev.messages[-1])
            old.pop("reasoning_content")  # reasoning of earlier turns is not rendered; clients often drop it
            sample.messages = prev.messages[:1] + [old] + sample.messages
    if rng.random() < 0.25:
        sample.messages = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}] + sample.messages
    if family in _NO_THINKING_OK and rng.random() < 0.1:
        sample.enable_thinking = False
        sample.messages[-1] = dict(sample.messages[-1], reasoning_content="")
    return sample
