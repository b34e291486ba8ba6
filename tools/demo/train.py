#!/usr/bin/env python3
"""Trains the voltserve demo model: a Qwen3.5 hybrid (Gated DeltaNet + gated attention, 3:1, tied embeddings) of
transformers' Qwen3_5ForCausalLM plus one MTP layer (MODEL.md 4) trained jointly on the next-next-token loss, on
the generated chat data of tools/demo/data.py. Writes a weights-only checkpoint in the real naming (model.*, mtp.*),
split into safetensors files under 16 MiB, and resumes from such a folder. Tested by tests/demo/train_smoke_test.py.

  python3 tools/demo/train.py --out DIR [--preset demo|micro] [--time-budget 480] [--steps N] [--resume DIR]

The data is generated while training, by worker processes (deterministic by --seed and by how many rows earlier
runs consumed, so a resumed run sees new data). Loss is on assistant completion tokens only. The learning rate
warms up, then follows a cosine to --min-lr over the run (over --steps, or over the time budget when training by
time). The MTP head (tools/mtp.py's conventions: [norm(embed(x_{i+1})) ; norm(h_i)] with h_i the final-normed
hidden state, at position i, predicting x_{i+2}) adds --mtp-weight times its loss.
"""
import time

T0 = time.time()  # the time budget counts from here: imports and worker start-up are part of the command's wall clock

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import chat_format  # noqa: E402
import data  # noqa: E402
from mtp import mtp_tensor_shapes, rms_norm_1p, rope_neox_partial, MtpConfig  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
SHARD_LIMIT = 15 * 1024 * 1024  # bytes of tensor data per file; the device returns files of at most 16 MiB
ROWS_PER_CHUNK = 64

# Model shapes. Head dims follow what voltserve's kernels support (GDN k/v head dims multiples of 8 up to 128,
# attention head_dim a multiple of 32 up to 256). "demo" is ~19M parameters with the MTP layer.
PRESETS = {
    "demo": dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=6,
                 num_key_value_heads=2, head_dim=64, linear_key_head_dim=64, linear_value_head_dim=64,
                 linear_num_key_heads=4, linear_num_value_heads=8),
    "micro": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=32, linear_key_head_dim=16, linear_value_head_dim=16,
                  linear_num_key_heads=2, linear_num_value_heads=4),
}


def text_config(preset, vocab_size, eos_ids, pad_id):
    shape = dict(PRESETS[preset])
    n = shape["num_hidden_layers"]
    return dict(
        vocab_size=vocab_size, linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=32768,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)],
        full_attention_interval=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos_ids, pad_token_id=pad_id,
        hidden_act="silu", attention_bias=False, attention_dropout=0.0, initializer_range=0.02, **shape)


# ------------------------------------------------------------------------------------------------- MTP head

class ZeroCentredNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n))
        self.eps = eps

    def forward(self, x):
        return rms_norm_1p(x, self.weight, self.eps)


class _Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, hd = c.hidden, c.head_dim
        self.q_proj = nn.Linear(H, c.n_heads * hd * 2, bias=False)
        self.k_proj = nn.Linear(H, c.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(H, c.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(c.n_heads * hd, H, bias=False)
        self.q_norm = ZeroCentredNorm(hd, c.eps)
        self.k_norm = ZeroCentredNorm(hd, c.eps)


class _Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.intermediate, bias=False)
        self.down_proj = nn.Linear(c.intermediate, c.hidden, bias=False)


class _Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = ZeroCentredNorm(c.hidden, c.eps)
        self.post_attention_layernorm = ZeroCentredNorm(c.hidden, c.eps)
        self.self_attn = _Attn(c)
        self.mlp = _Mlp(c)


class MtpHead(nn.Module):
    """The trainable MTP head: the computation of tools/mtp.py's Qwen35Mtp.forward, batched and causal over a whole
    row (the training view of its KV cache covering the context). Parameter names are the checkpoint's mtp.* names;
    tests/demo/train_smoke_test.py checks this module against tools/mtp.py on the exported weights."""

    def __init__(self, cfg_dict):
        super().__init__()
        self.c = c = MtpConfig(cfg_dict)
        self.fc = nn.Linear(2 * c.hidden, c.hidden, bias=False)
        self.pre_fc_norm_embedding = ZeroCentredNorm(c.hidden, c.eps)
        self.pre_fc_norm_hidden = ZeroCentredNorm(c.hidden, c.eps)
        self.norm = ZeroCentredNorm(c.hidden, c.eps)
        self.layers = nn.ModuleList([_Layer(c)])
        shapes = {k: tuple(v.shape) for k, v in self.state_dict().items()}
        assert shapes == {k: tuple(v) for k, v in mtp_tensor_shapes(c).items()}, "MTP parameters drift from MODEL.md"
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, embeds, hidden, positions):
        """embeds [B, T, H] = embed(x_{i+1}), hidden [B, T, H] = h_i, positions [T] = i; returns h' [B, T, H]."""
        c, L = self.c, self.layers[0]
        u = self.fc(torch.cat([self.pre_fc_norm_embedding(embeds), self.pre_fc_norm_hidden(hidden)], dim=-1))
        a = L.input_layernorm(u)
        B, T, _ = a.shape
        at = L.self_attn
        qg = at.q_proj(a).view(B, T, c.n_heads, 2 * c.head_dim)
        q, gate = qg[..., :c.head_dim], qg[..., c.head_dim:]
        k = at.k_proj(a).view(B, T, c.n_kv_heads, c.head_dim)
        v = at.v_proj(a).view(B, T, c.n_kv_heads, c.head_dim)
        q = rope_neox_partial(at.q_norm(q), positions, c.rotary_dim, c.theta)
        k = rope_neox_partial(at.k_norm(k), positions, c.rotary_dim, c.theta)
        group = c.n_heads // c.n_kv_heads
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
        dt = v.dtype if not torch.is_autocast_enabled() else torch.get_autocast_dtype(v.device.type)
        o = F.scaled_dot_product_attention(q.transpose(1, 2).to(dt), k.transpose(1, 2).to(dt),
                                           v.transpose(1, 2).to(dt), is_causal=True).transpose(1, 2)
        o = (o * torch.sigmoid(gate)).reshape(B, T, c.n_heads * c.head_dim)
        u = u + at.o_proj(o)
        m = L.post_attention_layernorm(u)
        u = u + L.mlp.down_proj(F.silu(L.mlp.gate_proj(m)) * L.mlp.up_proj(m))
        return self.norm(u)


# ------------------------------------------------------------------------------------------------- data

_WORKER = {}  # per process: the tokenizer and pools, built once


def _make_chunk(job):
    """ROWS_PER_CHUNK packed rows for chunk `index` (its own seed, so chunks are reproducible in any order)."""
    seed, index, seq_len, mix = job
    if not _WORKER:
        _WORKER.update(tok=data.load_tokenizer(), pools=data.pl.Pools())
    tok = _WORKER["tok"]
    stream = data.ExampleStream(tok, seed * 1_000_003 + index, pools=_WORKER["pools"], mix=mix)
    packer = data.Packer(stream, seq_len, tok.token_to_id(chat_format.EOT))
    rows = [packer.row() for _ in range(ROWS_PER_CHUNK)]
    return torch.tensor([r for r, _ in rows], dtype=torch.int32), torch.tensor([m for _, m in rows], dtype=torch.uint8)


class Batches:
    """Batches of (ids, mask) from chunks made by a process pool, in chunk order, with a bounded prefetch (Pool.imap
    would queue an endless job list and let the workers run arbitrarily far ahead)."""

    def __init__(self, seed, first_chunk, seq_len, batch, workers, mix=None):
        self.batch, self.seed, self.seq_len, self.mix = batch, seed, seq_len, mix
        self.next_chunk = first_chunk
        self.pool = mp.get_context("spawn").Pool(workers) if workers > 0 else None
        self.pending = collections.deque()
        self.depth = 2 * workers
        self.ids = self.mask = None
        self.chunks_used = 0

    def _chunk(self):
        if not self.pool:
            self.next_chunk += 1
            return _make_chunk((self.seed, self.next_chunk - 1, self.seq_len, self.mix))
        while len(self.pending) < self.depth:
            self.pending.append(self.pool.apply_async(_make_chunk, ((self.seed, self.next_chunk, self.seq_len, self.mix),)))
            self.next_chunk += 1
        return self.pending.popleft().get()

    def next(self):
        while self.ids is None or self.ids.shape[0] < self.batch:
            ids, mask = self._chunk()
            self.chunks_used += 1
            self.ids = ids if self.ids is None else torch.cat([self.ids, ids])
            self.mask = mask if self.mask is None else torch.cat([self.mask, mask])
        out = self.ids[: self.batch].long(), self.mask[: self.batch].float()
        self.ids, self.mask = self.ids[self.batch:], self.mask[self.batch:]
        return out

    def close(self):
        if self.pool:
            self.pool.terminate()


# ------------------------------------------------------------------------------------------------- checkpoint

def saved_tensors(model, mtp, dtype):
    """name -> tensor as stored: the model's names (lm_head dropped, it is tied), mtp.*, bf16/fp16 except A_log
    and the GDN gated norm (F32, as in the official checkpoint)."""
    out = {}
    state = dict(model.state_dict())
    state.pop("lm_head.weight", None)
    state.update({"mtp." + k: v for k, v in mtp.state_dict().items()})
    for name, t in state.items():
        keep32 = name.endswith("A_log") or name.endswith("linear_attn.norm.weight")
        out[name] = t.detach().to("cpu", torch.float32 if keep32 else dtype).contiguous()
    return out


def save_checkpoint(out_dir, model, mtp, cfg_dict, state, dtype, tokenizer_dir=None):
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.startswith("model") and (f.endswith(".safetensors") or f.endswith(".index.json")):
            os.remove(os.path.join(out_dir, f))
    tensors = saved_tensors(model, mtp, dtype)
    shards, cur, size = [], {}, 0
    for name in sorted(tensors):
        n = tensors[name].numel() * tensors[name].element_size()
        if cur and size + n > SHARD_LIMIT:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = tensors[name]
        size += n
    shards.append(cur)
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out_dir, fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    cfg = dict(cfg_dict)
    cfg.update(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text",
               dtype="bfloat16" if dtype == torch.bfloat16 else "float16",
               mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
           "pad_token_id": cfg["pad_token_id"], "do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    with open(os.path.join(out_dir, "train_state.json"), "w") as f:
        json.dump(state, f, indent=2)
    if tokenizer_dir:
        import shutil
        for name in TOKENIZER_FILES:
            shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))
    return [len(s) for s in shards]


def load_checkpoint(path):
    """(text config dict, main state dict, mtp state dict, train state) from a folder save_checkpoint wrote."""
    from safetensors.torch import load_file
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    tensors = {}
    for fname in files:
        tensors.update(load_file(os.path.join(path, fname)))
    main = {k: v.float() for k, v in tensors.items() if not k.startswith("mtp.")}
    mtp = {k[len("mtp."):]: v.float() for k, v in tensors.items() if k.startswith("mtp.")}
    state = {}
    if os.path.exists(os.path.join(path, "train_state.json")):
        with open(os.path.join(path, "train_state.json")) as f:
            state = json.load(f)
    for k in ("architectures", "model_type", "dtype", "mtp_num_hidden_layers", "mtp_use_dedicated_embeddings",
              "transformers_version", "torch_dtype"):
        cfg.pop(k, None)
    return cfg, main, mtp, state


def build_model(cfg_dict, device):
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    cfg = Qwen3_5TextConfig(**cfg_dict)
    cfg._attn_implementation = "sdpa"
    model = Qwen3_5ForCausalLM(cfg).float()
    return model.to(device)


def gdn_path():
    """Which Gated DeltaNet implementation transformers runs here (the torch fallback is much slower than fla)."""
    try:
        import transformers.models.qwen3_5.modeling_qwen3_5 as m
        fast = getattr(m, "is_fast_path_available", None)
        if fast is not None:
            return "fla/causal-conv1d fast path" if fast else "torch fallback"
        try:
            import fla  # noqa: F401
            return "fla available (hub-kernel decorator)"
        except ImportError:
            return "torch fallback (no fla)"
    except Exception as e:  # report, never fail on this
        return f"unknown ({e})"


# ------------------------------------------------------------------------------------------------- training

def lr_at(progress, step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(max(progress, 0.0), 1.0)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * p))


def losses(model, mtp, ids, mask):
    """(main loss, MTP loss) on the completion tokens of the rows."""
    h = model.model(input_ids=ids, use_cache=False).last_hidden_state  # final-normed hidden states
    logits = model.lm_head(h[:, :-1]).float()
    w = mask[:, 1:]
    main = (F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten(), reduction="none") * w.flatten()).sum()
    main = main / w.sum().clamp(min=1)
    T = ids.shape[1]
    pos = torch.arange(T - 2, device=ids.device)
    hp = mtp(model.model.embed_tokens(ids[:, 1:-1]), h[:, :-2], pos)
    mlog = model.lm_head(hp.to(h.dtype)).float()
    w2 = mask[:, 2:]
    ml = (F.cross_entropy(mlog.flatten(0, 1), ids[:, 2:].flatten(), reduction="none") * w2.flatten()).sum()
    return main, ml / w2.sum().clamp(min=1)


def main():
    t_start = T0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="checkpoint folder to write")
    ap.add_argument("--resume", help="continue from this checkpoint folder (weights and train_state.json)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds from start to the end of saving (0: none)")
    ap.add_argument("--save-reserve", type=float, default=25, help="seconds kept for the final save")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: as many as the time budget allows)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100, help="warm-up steps (also after --resume)")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mix", default="", help="FAMILY=WEIGHT,... overriding tasks.FAMILIES' shares for this run "
                    "(e.g. more copying practice when resuming); recorded in train_state.json")
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=4, help="data worker processes (0: generate inline)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--save-dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--save-every", type=float, default=0, help="also save every this many seconds (0: only at end)")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--no-tokenizer-files", action="store_true",
                    help="do not copy the tokenizer and template into --out (they are committed in tools/demo)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (untested on the GPU)")
    args = ap.parse_args()
    if not args.steps and not args.time_budget:
        ap.error("give --steps or --time-budget")
    try:
        mix = data.tasks.parse_mix(args.mix) or None
    except ValueError as e:
        ap.error(str(e))
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    torch.manual_seed(args.seed)
    random.seed(args.seed)

    tok = data.load_tokenizer()
    eos = [tok.token_to_id(chat_format.IM_END), tok.token_to_id(chat_format.EOT)]
    vocab = -(-tok.get_vocab_size(with_added_tokens=True) // 64) * 64
    state = {"step": 0, "tokens": 0, "chunks": 0, "runs": []}
    if args.resume:
        cfg_dict, main_sd, mtp_sd, state = load_checkpoint(args.resume)
        state = {"step": 0, "tokens": 0, "chunks": 0, "runs": [], **state}
        model = build_model(cfg_dict, "cpu")
        missing, unexpected = model.load_state_dict(main_sd, strict=False)
        missing = [k for k in missing if k != "lm_head.weight"]
        assert not missing and not unexpected, (missing, unexpected)
        mtp = MtpHead(cfg_dict)
        mtp.load_state_dict(mtp_sd)
        model.to(dev)
    else:
        cfg_dict = text_config(args.preset, vocab, eos, tok.token_to_id(chat_format.EOT))
        model = build_model(cfg_dict, dev)
        mtp = MtpHead(cfg_dict)
    mtp.to(dev)
    if model.config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    n_main = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    print(f"model: {n_main / 1e6:.2f}M parameters + MTP {n_mtp / 1e6:.2f}M; vocab {cfg_dict['vocab_size']}, "
          f"hidden {cfg_dict['hidden_size']}, layers {cfg_dict['num_hidden_layers']}; device {dev}; "
          f"GDN: {gdn_path()}; torch {torch.__version__}", flush=True)

    params = list(model.parameters()) + list(mtp.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95),
                            eps=1e-8, fused=dev.type == "cuda")
    fwd = torch.compile(losses) if args.compile else losses
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    batches = Batches(args.seed, state["chunks"], args.seq_len, args.batch, args.workers, mix)
    save_dtype = torch.bfloat16 if args.save_dtype == "bf16" else torch.float16
    tok_dir = None if args.no_tokenizer_files else data.TOKENIZER_DIR

    def run_state(steps_done, tokens_done):
        s = dict(state)
        s["runs"] = state["runs"] + [{"steps": steps_done, "tokens": tokens_done, "seconds": round(time.time() - t_start),
                                      "lr": args.lr, "batch": args.batch, "seq_len": args.seq_len,
                                      **({"mix": mix} if mix else {})}]
        s.update(step=state["step"] + steps_done, tokens=state["tokens"] + tokens_done,
                 chunks=state["chunks"] + batches.chunks_used, seed=args.seed, preset=args.preset)
        return s

    model.train()
    mtp.train()
    t_train = None
    step, tokens, loss_tokens = 0, 0, 0
    ema = None
    last_save = time.time()
    step_time = 0.0
    try:
        while True:
            now = time.time()
            if args.steps and step >= args.steps:
                break
            if args.time_budget and now - t_start + 1.5 * step_time + args.save_reserve > args.time_budget:
                break
            ids, mask = batches.next()
            loss_tokens += int(mask.sum())  # counted on the host: no device sync per step
            ids, mask = ids.to(dev, non_blocking=True), mask.to(dev, non_blocking=True)
            if t_train is None:
                t_train = time.time()
            if args.steps:
                progress = step / max(args.steps, 1)
            else:
                span = args.time_budget - args.save_reserve - (t_train - t_start)
                progress = (time.time() - t_train) / max(span, 1.0)
            lr = lr_at(progress, step, args)
            for g in opt.param_groups:
                g["lr"] = lr
            t0 = time.time()
            with amp:
                lm, lmtp = fwd(model, mtp, ids, mask)
                loss = lm + args.mtp_weight * lmtp
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            tokens += ids.numel()
            if step % args.log_every == 0 or step == 1 or (args.steps and step == args.steps):
                lm_v, lmtp_v = lm.detach().item(), lmtp.detach().item()
                ema = lm_v if ema is None else 0.8 * ema + 0.2 * lm_v
                el = time.time() - t_train
                print(f"step {state['step'] + step:6d}  loss {lm_v:.4f} (ema {ema:.4f})  mtp {lmtp_v:.4f}  "
                      f"lr {lr:.2e}  gnorm {float(gnorm):.2f}  {tokens / max(el, 1e-9):,.0f} tok/s  "
                      f"elapsed {time.time() - t_start:.0f}s", flush=True)
            step_time = 0.9 * step_time + 0.1 * (time.time() - t0) if step > 1 else time.time() - t0
            if args.save_every and time.time() - last_save > args.save_every:
                save_checkpoint(args.out, model, mtp, cfg_dict, run_state(step, tokens), save_dtype, tok_dir)
                last_save = time.time()
    except Exception:  # keep what was trained (an OOM or a data error late in a run must not lose the run)
        traceback.print_exc()
        failed = True
    else:
        failed = False
    finally:
        batches.close()
    el = time.time() - (t_train or time.time())
    shards = save_checkpoint(args.out, model, mtp, cfg_dict, run_state(step, tokens), save_dtype, tok_dir)
    print(f"done: {step} steps, {tokens:,} tokens ({loss_tokens:,} with loss) in {el:.1f}s of training = "
          f"{tokens / max(el, 1e-9):,.0f} tok/s; saved {args.out} ({len(shards)} weight files) at "
          f"{time.time() - t_start:.0f}s", flush=True)
    if failed:
        sys.exit("training stopped on an error (the weights so far are saved)")


if __name__ == "__main__":
    main()
