"""e2e: KV exhaustion through the HTTP server. A pool of 12 KV pages (192 tokens) and 6 running sequences: eight
concurrent greedy completions of ~140 tokens each cannot all hold their pages, so the engine preempts the newest
(recompute). Every completion must equal the one the same request gets alone, /metrics must count the
preemptions (voltserve_num_preemptions_total), and the pools must be whole again afterwards."""
import json
import random
import threading
import time

from harness import Checks, Server

N_REQUESTS = 8
MAX_TOKENS = 100


def completion(srv, prompt):
    status, _, body = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                                                   "ignore_eos": True}, timeout=180)
    if status != 200:
        return None, f"status {status}: {body[:200]!r}"
    choice = json.loads(body)["choices"][0]
    return (choice["text"], choice["finish_reason"]), None


def main():
    rng = random.Random(20)
    prompts = [[rng.randrange(10, 2900) for _ in range(30 + 3 * i)] for i in range(N_REQUESTS)]
    with Server("--kv-pages", "12", "--max-running", "6") as srv:

        def alone_then_together(c):
            alone = []
            for p in prompts:
                out, err = completion(srv, p)
                c.check(err is None, f"alone: {err}")
                alone.append(out)
            before = srv.metrics().get("voltserve_num_preemptions_total", -1)
            c.check(before == 0, f"no preemption while requests ran one at a time ({before})")
            together = [None] * N_REQUESTS
            errors = []

            def client(i):
                out, err = completion(srv, prompts[i])
                together[i] = out
                if err:
                    errors.append(err)

            threads = [threading.Thread(target=client, args=(i,)) for i in range(N_REQUESTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=240)
            c.check(not errors, f"concurrent errors: {errors[:3]}")
            for i in range(N_REQUESTS):
                c.check(together[i] == alone[i], f"request {i}: concurrent output equals its output alone")
                c.check(together[i] is not None and together[i][1] == "length", f"request {i} ran to max_tokens")
            m = srv.metrics()
            print(f"  preemptions: {m.get('voltserve_num_preemptions_total')}")
            c.check(m.get("voltserve_num_preemptions_total", 0) >= 1, "preemptions counted in /metrics")

        def pools_back_to_full(c):
            deadline = time.time() + 30
            m = {}
            while time.time() < deadline:
                m = srv.metrics()
                if m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total"):
                    break
                time.sleep(0.2)
            c.check(m.get("voltserve_kv_pages_total") == 12, f"the pool is --kv-pages 12 ({m.get('voltserve_kv_pages_total')})")
            c.check(m.get("voltserve_kv_pages_free") == m.get("voltserve_kv_pages_total"), "KV pages all free")
            c.check(m.get("voltserve_state_slots_free") == m.get("voltserve_state_slots_total"), "slots all free")

        Checks().run([alone_then_together, pools_back_to_full])


if __name__ == "__main__":
    main()
