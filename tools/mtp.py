#!/usr/bin/env python3
"""A small, independent PyTorch implementation of the Qwen3.5 / 3.6 / 3.8 MTP (multi-token prediction) head.

Written from MODEL.md section 4 and checked against the published module structure (vLLM qwen3_5_mtp.py
Qwen3_5MultiTokenPredictor, SGLang qwen3_5_mtp.py): two zero-centred pre-norms, an fc over the concatenation
[norm(embed(x_{i+1})) ; norm(h_i)] (embedding first), one gated full-attention decoder layer with its own KV cache,
a final zero-centred norm, and the main model's lm_head. transformers has no MTP, so the engine's MTP goldens come
from here (tools/make_mtp_fixtures.py); the engine's implementation (engine/model/mtp_head.cpp) is tested against
them in tests/golden/mtp_golden_test.cpp.

Conventions (MODEL.md 4.2, 4.3):
  * h_i is the main model's FINAL-NORMED hidden state at position i (the input of the lm_head);
  * the pair (h_i, x_{i+1}) runs at RoPE position i and predicts x_{i+2};
  * depth k > 1 feeds back the MTP's own post-`mtp.norm` output with the token it drafted, at position + 1;
  * the MTP layer's KV cache covers the whole context: a pass over positions overwrites what an earlier pass (a draft
    chain) left there.
Tensors are fp32; weights are the checkpoint's `mtp.*` tensors (names without the `mtp.` prefix in `state`).
"""
import torch


def rms_norm_1p(x, w, eps):
    """Zero-centred RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w), in fp32."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w.float())


class MtpConfig:
    def __init__(self, text_config):
        c = text_config
        self.hidden = c["hidden_size"]
        self.n_heads = c["num_attention_heads"]
        self.n_kv_heads = c["num_key_value_heads"]
        self.head_dim = c["head_dim"]
        self.intermediate = c["intermediate_size"]
        self.eps = c["rms_norm_eps"]
        rope = c.get("rope_parameters") or {}
        self.theta = float(rope.get("rope_theta", c.get("rope_theta", 10000.0)))
        factor = float(rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25)))
        self.rotary_dim = int(self.head_dim * factor)


# The tensors of one MTP head, with their shapes (MODEL.md 4.1), as they are stored under the "mtp." prefix.
def mtp_tensor_shapes(cfg):
    H, hd = cfg.hidden, cfg.head_dim
    return {
        "fc.weight": (H, 2 * H),
        "pre_fc_norm_embedding.weight": (H,),
        "pre_fc_norm_hidden.weight": (H,),
        "norm.weight": (H,),
        "layers.0.input_layernorm.weight": (H,),
        "layers.0.post_attention_layernorm.weight": (H,),
        "layers.0.self_attn.q_proj.weight": (cfg.n_heads * hd * 2, H),
        "layers.0.self_attn.k_proj.weight": (cfg.n_kv_heads * hd, H),
        "layers.0.self_attn.v_proj.weight": (cfg.n_kv_heads * hd, H),
        "layers.0.self_attn.o_proj.weight": (H, cfg.n_heads * hd),
        "layers.0.self_attn.q_norm.weight": (hd,),
        "layers.0.self_attn.k_norm.weight": (hd,),
        "layers.0.mlp.gate_proj.weight": (cfg.intermediate, H),
        "layers.0.mlp.up_proj.weight": (cfg.intermediate, H),
        "layers.0.mlp.down_proj.weight": (H, cfg.intermediate),
    }


def rope_neox_partial(x, positions, rotary_dim, theta):
    """NeoX (rotate_half) RoPE on the first rotary_dim dims of every head; x [T, heads, head_dim]."""
    half = rotary_dim // 2
    exps = torch.arange(0, half, dtype=torch.float64, device=positions.device) * 2.0 / rotary_dim
    inv_freq = 1.0 / (theta ** exps)  # on the positions' device, so the training head (tools/demo) runs on a GPU
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cos(ang).float()[:, None, :]
    sin = torch.sin(ang).float()[:, None, :]
    a, b, rest = x[..., :half], x[..., half:rotary_dim], x[..., rotary_dim:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


class MtpKvCache:
    """The MTP layer's KV cache: one row per absolute position, overwritten by whichever pass writes it last."""

    def __init__(self, cfg, max_positions):
        self.k = torch.zeros(max_positions, cfg.n_kv_heads, cfg.head_dim)
        self.v = torch.zeros(max_positions, cfg.n_kv_heads, cfg.head_dim)


class Qwen35Mtp:
    def __init__(self, cfg, state):
        self.cfg = cfg
        self.w = {k: v.float() for k, v in state.items()}
        missing = set(mtp_tensor_shapes(cfg)) - set(self.w)
        assert not missing, f"missing MTP tensors: {sorted(missing)}"

    def _attention(self, x, positions, cache):
        cfg, w = self.cfg, self.w
        T, hd, nh, nkv = x.shape[0], cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        qg = (x @ w["layers.0.self_attn.q_proj.weight"].T).view(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:]  # per head [query | gate]
        k = (x @ w["layers.0.self_attn.k_proj.weight"].T).view(T, nkv, hd)
        v = (x @ w["layers.0.self_attn.v_proj.weight"].T).view(T, nkv, hd)
        q = rms_norm_1p(q, w["layers.0.self_attn.q_norm.weight"], cfg.eps)
        k = rms_norm_1p(k, w["layers.0.self_attn.k_norm.weight"], cfg.eps)
        q = rope_neox_partial(q, positions, cfg.rotary_dim, cfg.theta)
        k = rope_neox_partial(k, positions, cfg.rotary_dim, cfg.theta)
        cache.k[positions] = k
        cache.v[positions] = v
        group = nh // nkv
        out = torch.empty(T, nh, hd)
        for t in range(T):
            p = int(positions[t])
            keys, vals = cache.k[: p + 1], cache.v[: p + 1]  # causal over the cache, this row's own key included
            for h in range(nh):
                g = h // group
                scores = (keys[:, g, :] @ q[t, h]) / (hd ** 0.5)
                out[t, h] = torch.softmax(scores.double(), dim=0).float() @ vals[:, g, :]
        out = out * torch.sigmoid(gate)
        return out.reshape(T, nh * hd) @ w["layers.0.self_attn.o_proj.weight"].T

    def forward(self, embed_weight, lm_head_weight, token_ids, hidden, positions, cache):
        """One MTP pass over rows (h_i, x_{i+1}) at `positions`; returns (post-norm hidden h', draft logits)."""
        cfg, w = self.cfg, self.w
        token_ids = torch.as_tensor(token_ids, dtype=torch.long)
        positions = torch.as_tensor(positions, dtype=torch.long)
        e = rms_norm_1p(embed_weight.float()[token_ids], w["pre_fc_norm_embedding.weight"], cfg.eps)
        hh = rms_norm_1p(hidden.float(), w["pre_fc_norm_hidden.weight"], cfg.eps)
        u = torch.cat([e, hh], dim=-1) @ w["fc.weight"].T  # embedding first, hidden second
        a = rms_norm_1p(u, w["layers.0.input_layernorm.weight"], cfg.eps)
        u = u + self._attention(a, positions, cache)
        m = rms_norm_1p(u, w["layers.0.post_attention_layernorm.weight"], cfg.eps)
        gate = m @ w["layers.0.mlp.gate_proj.weight"].T
        up = m @ w["layers.0.mlp.up_proj.weight"].T
        u = u + (torch.nn.functional.silu(gate) * up) @ w["layers.0.mlp.down_proj.weight"].T
        h_out = rms_norm_1p(u, w["norm.weight"], cfg.eps)
        return h_out, h_out @ lm_head_weight.float().T

    def draft_chain(self, embed_weight, lm_head_weight, h_last, next_token, position, k, cache, n_vocab=None):
        """Greedy drafts d_1..d_k after a committed context: the first step is (h_last, next_token) at `position`,
        each later step feeds back (h', d) at position + 1. Returns (drafts, per-step logits)."""
        drafts, logits = [], []
        h = h_last.reshape(1, -1)
        tok = next_token
        for s in range(k):
            h, lg = self.forward(embed_weight, lm_head_weight, [tok], h, [position + s], cache)
            row = lg[0] if n_vocab is None else lg[0, :n_vocab]
            tok = int(torch.argmax(row))
            drafts.append(tok)
            logits.append(lg[0])
        return drafts, logits
