"""e2e: the prefix cache through HTTP on the bundled fixture (CPU, on by default). A chat's second turn (history +
the first reply + a new message) reports usage.prompt_tokens_details.cached_tokens covering the first turn's prompt
up to its generation prompt (the template re-renders the turn without its <think> block from there) and prefills
only the rest; a completion's next turn (prompt + reply + more) covers the whole first prompt and reply (voltserve_prefix_cache_hit_tokens_total); the streamed final usage chunk
says the same; /v1/completions, /v1/responses (input_tokens_details) and /v1/messages (cache_read_input_tokens, with
input_tokens the uncached rest) report it; `prefix_cache: false` and a different `cache_salt` get nothing from the
cache; an empty cache_salt is a 400 naming it; a server started with --no-prefix-cache reports 0 everywhere; greedy
output is the same with the cache as without it."""
import json
import random

from harness import Checks, Server, sse_events


def chat(srv, messages, **extra):
    body = {"messages": messages, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
            "chat_template_kwargs": {"enable_thinking": False}}
    body.update(extra)
    status, _, raw = srv.post("/v1/chat/completions", body, timeout=120)
    assert status == 200, (status, raw[:300])
    return json.loads(raw)


def cached(usage):
    return usage["prompt_tokens_details"]["cached_tokens"]


def main():
    rng = random.Random(25)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    text = lambda n: " ".join(rng.choice(words) for _ in range(n))
    first_msg = [{"role": "system", "content": text(40)}, {"role": "user", "content": text(30)}]
    results = {}

    with Server() as srv:

        def second_turn(c):
            hit0 = srv.metrics().get("voltserve_prefix_cache_hit_tokens_total", 0)
            r1 = chat(srv, first_msg)
            results["turn1"] = r1["choices"][0]["message"]["content"]
            n1 = r1["usage"]["prompt_tokens"]
            c.check(cached(r1["usage"]) == 0, f"turn 1 finds nothing cached: {r1['usage']}")
            reply = r1["choices"][0]["message"]["content"]
            turn2 = first_msg + [{"role": "assistant", "content": reply}, {"role": "user", "content": text(12)}]
            hit1 = srv.metrics()["voltserve_prefix_cache_hit_tokens_total"]
            r2 = chat(srv, turn2)
            n2, k2 = r2["usage"]["prompt_tokens"], cached(r2["usage"])
            # Qwen3.5's template renders an earlier turn without its <think> block, so turn 2 repeats turn 1's
            # prompt up to its generation prompt (the last <|im_start|>), where the engine snapshots for it.
            _, _, raw = srv.post("/tokenize", {"messages": first_msg,
                                               "chat_template_kwargs": {"enable_thinking": False}})
            ids1 = json.loads(raw)["tokens"]
            im_start = json.loads(srv.post("/tokenize", {"prompt": "<|im_start|>"})[2])["tokens"][0]
            gen_start = max(i for i, t in enumerate(ids1) if t == im_start)
            print(f"  turn 1: {n1} prompt tokens (generation prompt from {gen_start}); turn 2: {n2} prompt tokens, "
                  f"{k2} cached")
            c.check(len(ids1) == n1, "/tokenize counts the chat prompt as usage does")
            c.check(k2 >= gen_start and k2 >= n1 - 8,
                    f"turn 2's cached_tokens {k2} cover turn 1's prompt of {n1} up to its generation prompt")
            c.check(k2 < n2, f"the new message is prefilled ({k2} < {n2})")
            hit2 = srv.metrics()["voltserve_prefix_cache_hit_tokens_total"]
            c.check(hit2 - hit1 == k2, f"/metrics hit tokens grew by exactly cached_tokens ({hit2 - hit1} vs {k2})")
            c.check(hit1 == hit0, "turn 1 hit nothing in /metrics")
            results["turn2"] = (turn2, r2)

        def completion_turns(c):
            p1 = text(50)
            body = {"prompt": p1, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
            r1 = json.loads(srv.post("/v1/completions", body)[2])
            n1 = r1["usage"]["prompt_tokens"]
            body["prompt"] = p1 + r1["choices"][0]["text"] + " " + text(8)
            r2 = json.loads(srv.post("/v1/completions", body)[2])
            k2 = cached(r2["usage"])
            print(f"  completions: turn 1 {n1} prompt tokens, turn 2 {r2['usage']['prompt_tokens']}, {k2} cached")
            # At least the prompt end minus one (its last token may merge with the reply's first when re-tokenized);
            # the reply too wherever it re-tokenizes to the same ids (the end-of-request snapshot).
            c.check(k2 >= n1 - 1, f"turn 2 covers turn 1's prompt ({k2} >= {n1} - 1)")

        def streamed_usage(c):
            turn2, r2 = results["turn2"]
            body = {"messages": turn2, "max_tokens": 24, "temperature": 0, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}, "chat_template_kwargs": {"enable_thinking": False}}
            status, _, raw = srv.post("/v1/chat/completions", body, timeout=120)
            c.check(status == 200, f"stream status {status}")
            chunks = [json.loads(e) for e in sse_events(raw)[0] if e != "[DONE]"]
            usage = chunks[-1].get("usage")
            c.check(usage is not None and chunks[-1]["choices"] == [], "a final usage chunk")
            c.check(usage and cached(usage) >= r2["usage"]["prompt_tokens"] - 1,
                    f"the repeat resumes at its prompt end: {usage}")
            text_out = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
            c.check(text_out == r2["choices"][0]["message"]["content"], "same greedy text from the cache")

        def n_siblings(c):
            msgs = [{"role": "user", "content": text(50)}]
            r = chat(srv, msgs, n=3)
            u = r["usage"]
            c.check(cached(u) == 0, f"n = 3 on a new prompt: the prompt-level figure is 0 ({u})")
            texts = {ch["message"]["content"] for ch in r["choices"]}
            c.check(len(r["choices"]) == 3 and len(texts) == 1, "greedy siblings agree")
            r_again = chat(srv, msgs, n=2)
            c.check(cached(r_again["usage"]) >= u["prompt_tokens"] - 1, f"the repeat: {r_again['usage']}")

        def completions_route(c):
            prompt = text(60)
            body = {"prompt": prompt, "max_tokens": 8, "temperature": 0}
            status, _, raw = srv.post("/v1/completions", body)
            c.check(status == 200, f"status {status}")
            status, _, raw = srv.post("/v1/completions", body)
            u = json.loads(raw)["usage"]
            c.check(cached(u) == u["prompt_tokens"] - 1, f"completions repeat: {u}")

        def opt_out_and_salt(c):
            msgs = [{"role": "user", "content": text(45)}]
            base = chat(srv, msgs)
            off = chat(srv, msgs, prefix_cache=False)
            c.check(cached(off["usage"]) == 0, f"prefix_cache false: {off['usage']}")
            c.check(off["choices"][0]["message"] == base["choices"][0]["message"], "same output without the cache")
            salted = chat(srv, msgs, cache_salt="tenant-b")
            c.check(cached(salted["usage"]) == 0, f"another salt shares nothing: {salted['usage']}")
            again = chat(srv, msgs, cache_salt="tenant-b")
            c.check(cached(again["usage"]) > 0, f"the same salt does: {again['usage']}")
            status, _, raw = srv.post("/v1/chat/completions", {"messages": msgs, "cache_salt": ""})
            err = json.loads(raw).get("error", {})
            c.check(status == 400 and err.get("param") == "cache_salt", f"empty salt: {status} {raw[:200]}")
            status, _, raw = srv.post("/v1/chat/completions", {"messages": msgs, "prefix_cache": "no"})
            c.check(status == 400 and json.loads(raw)["error"].get("param") == "prefix_cache", f"non-bool: {status}")

        def responses_and_messages(c):
            instr, question = text(40), text(20)
            body = {"input": question, "instructions": instr, "max_output_tokens": 8, "temperature": 0,
                    "reasoning": {"effort": "none"}, "store": False}
            srv.post("/v1/responses", body)
            status, _, raw = srv.post("/v1/responses", body)
            u = json.loads(raw)["usage"]
            c.check(status == 200 and u["input_tokens_details"]["cached_tokens"] >= u["input_tokens"] - 1,
                    f"responses repeat: {u}")
            model = json.loads(srv.get("/v1/models")[2])["data"][0]["id"]
            mbody = {"model": model, "max_tokens": 8, "system": instr,
                     "messages": [{"role": "user", "content": question}]}
            srv.post("/v1/messages", mbody)
            status, _, raw = srv.post("/v1/messages", mbody)
            mu = json.loads(raw)["usage"]
            status, _, counted = srv.post("/v1/messages/count_tokens", {k: mbody[k] for k in ("model", "system",
                                                                                               "messages")})
            total = json.loads(counted)["input_tokens"]
            c.check(mu["cache_read_input_tokens"] >= total - 1 and mu["input_tokens"] + mu["cache_read_input_tokens"]
                    == total, f"messages repeat: {mu}, prompt {total}")

        def pools_full_when_idle(c):
            m = srv.metrics()
            c.check(m["voltserve_kv_pages_free"] == m["voltserve_kv_pages_total"], "cached pages count as free")
            c.check(m.get("voltserve_prefix_cache_pages_only", 0) > 0, "pages held only by the cache, as a gauge")
            c.check(m["voltserve_prefix_cache_snapshots_total"] > 0, "on by default")

        def no_prefix_cache_server(c):
            with Server("--no-prefix-cache") as off:
                chat(off, first_msg)
                r = chat(off, first_msg)
                c.check(cached(r["usage"]) == 0, f"--no-prefix-cache: {r['usage']}")
                m = off.metrics()
                c.check(m.get("voltserve_prefix_cache_queries_total", 0) == 0, "no lookups")
                c.check(m.get("voltserve_prefix_cache_snapshots_total", 0) == 0, "no snapshot rows")
                c.check(r["choices"][0]["message"]["content"] == results["turn1"], "the same greedy text as with it")

        Checks().run([second_turn, completion_turns, streamed_usage, n_siblings, completions_route, opt_out_and_salt,
                      responses_and_messages, pools_full_when_idle, no_prefix_cache_server])


if __name__ == "__main__":
    main()
