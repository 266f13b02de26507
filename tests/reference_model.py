"""A float64 numpy forward pass of llama / qwen2 / qwen3 / gemma3 GGUF models — the reference the
runtime's logits are checked against.

Written from shared/spec/gguf.md §3 alone (not from gaacrt's C++), with weights dequantized by
the `gguf` package. Exact math: no activation quantization, no BF16 cache, float64 throughout.

    ref = ReferenceModel(path)
    logits = ref.forward(tokens)          # (len(tokens), n_vocab), every position
    logits = ref.forward(tokens, kv="bf16")   # the same with K (after RoPE) and V stored as BF16

The second form is exact math *given the runtime's cache format*: gaacrt keeps K and V in BF16
(GAAC is lossless relative to BF16), and BF16's 8-bit significand alone moves SmolLM2's logits by up
to ~10% at rare positions (near-ties in attention), so a per-position bound needs that reference.
"""
from __future__ import annotations

import math

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round to the nearest BF16 value (ties to even), as the cache stores K and V."""
    a = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    a = ((a + 0x7FFF + ((a >> 16) & 1)) >> 16) << 16
    return a.astype(np.uint32).view(np.float32).astype(np.float64)


def _meta(reader: GGUFReader) -> dict:
    out = {}
    for k, f in reader.fields.items():
        if k.startswith("tokenizer."):
            continue
        try:
            out[k] = f.contents()
        except Exception:  # noqa: BLE001 - a value the reference does not need
            pass
    return out


class ReferenceModel:
    def __init__(self, path: str):
        r = GGUFReader(path)
        self.md = md = _meta(r)
        a = md["general.architecture"]
        self.arch = a
        g = lambda k, d=None: md.get(f"{a}.{k}", d)  # noqa: E731
        self.n_embd = g("embedding_length")
        self.n_layer = g("block_count")
        self.n_head = g("attention.head_count")
        self.n_head_kv = g("attention.head_count_kv", self.n_head)
        self.dk = g("attention.key_length", self.n_embd // self.n_head)
        self.dv = g("attention.value_length", self.n_embd // self.n_head)
        self.eps = float(g("attention.layer_norm_rms_epsilon"))
        self.n_rot = g("rope.dimension_count", self.dk)
        self.rope_base = float(g("rope.freq_base", 10000.0))
        factor = g("rope.scaling.factor", 0.0) or 0.0
        stype = g("rope.scaling.type", "linear")
        self.freq_scale = 1.0 / factor if (factor and stype != "none") else 1.0
        self.neox = a != "llama"
        self.gemma = a == "gemma3"
        self.swa = g("attention.sliding_window", 0) if self.gemma else 0
        pattern = g("attention.sliding_window_pattern", 6)
        self.is_swa = [bool(self.swa) and (il % pattern) < pattern - 1 for il in range(self.n_layer)]
        self.rope_base_swa = float(g("rope.freq_base_swa", 10000.0))
        self.softcap = g("final_logit_softcapping", 0.0) or 0.0

        self.t = {}
        for ti in r.tensors:
            w = dequantize(ti.data, ti.tensor_type)
            shape = [int(x) for x in ti.shape[::-1]]  # numpy order: (rows, cols)
            self.t[ti.name] = np.asarray(w, dtype=np.float32).reshape(shape)
        self.output = self.t.get("output.weight", self.t["token_embd.weight"])
        self.rope_freqs = self.t.get("rope_freqs.weight")

    def _w(self, name):
        return self.t.get(name)

    def rms(self, x, w):
        x = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return x * w

    def rope(self, x, pos, base, freq_scale):
        # x: (T, H, d). theta_i = p * freq_scale * base^(-2i/n_rot) / freq_factor_i
        half = self.n_rot // 2
        inv = base ** (-2.0 * np.arange(half) / self.n_rot)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs.astype(np.float64)
        theta = freq_scale * pos[:, None] * inv[None, :]               # (T, half)
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        y = x.copy()
        if self.neox:
            a, b = x[..., :half], x[..., half:self.n_rot]
            y[..., :half], y[..., half:self.n_rot] = a * c - b * s, a * s + b * c
        else:
            a, b = x[..., 0:self.n_rot:2], x[..., 1:self.n_rot:2]
            y[..., 0:self.n_rot:2], y[..., 1:self.n_rot:2] = a * c - b * s, a * s + b * c
        return y

    def forward(self, tokens, kv: str = "exact", record: dict | None = None) -> np.ndarray:
        """Logits (T, n_vocab). `record`, when given, receives per layer il the post-RoPE
        record[il] = (q (T, n_head, dk), k (T, n_head_kv, dk), v (T, n_head_kv, dv))."""
        tokens = np.asarray(tokens)
        T = len(tokens)
        pos = np.arange(T, dtype=np.float64)
        x = self.t["token_embd.weight"][tokens].astype(np.float64)
        if self.gemma:
            x = x * np.float64(np.float32(math.sqrt(self.n_embd)))
        G = self.n_head // self.n_head_kv
        scale = 1.0 / math.sqrt(self.dk)
        causal = np.tril(np.ones((T, T), dtype=bool))
        for il in range(self.n_layer):
            p = f"blk.{il}."
            w = lambda n: self._w(p + n)  # noqa: E731
            h = self.rms(x, w("attn_norm.weight"))
            q = h @ w("attn_q.weight").T.astype(np.float64)
            k = h @ w("attn_k.weight").T.astype(np.float64)
            v = h @ w("attn_v.weight").T.astype(np.float64)
            if w("attn_q.bias") is not None:
                q, k, v = q + w("attn_q.bias"), k + w("attn_k.bias"), v + w("attn_v.bias")
            q = q.reshape(T, self.n_head, self.dk)
            k = k.reshape(T, self.n_head_kv, self.dk)
            v = v.reshape(T, self.n_head_kv, self.dv)
            if w("attn_q_norm.weight") is not None:
                q, k = self.rms(q, w("attn_q_norm.weight")), self.rms(k, w("attn_k_norm.weight"))
            swa = self.is_swa[il]
            base, fs = (self.rope_base_swa, 1.0) if swa else (self.rope_base, self.freq_scale)
            q, k = self.rope(q, pos, base, fs), self.rope(k, pos, base, fs)
            if kv == "bf16":
                k, v = bf16_round(k), bf16_round(v)
            if record is not None:
                record[il] = (q, k, v)
            mask = causal.copy()
            if swa:
                mask &= (pos[:, None] - pos[None, :]) < self.swa
            out = np.empty((T, self.n_head, self.dv))
            for hh in range(self.n_head):
                kv = hh // G
                s = (q[:, hh, :] @ k[:, kv, :].T) * scale
                s = np.where(mask, s, -np.inf)
                s = s - s.max(axis=1, keepdims=True)
                pr = np.exp(s)
                pr /= pr.sum(axis=1, keepdims=True)
                out[:, hh, :] = pr @ v[:, kv, :]
            o = out.reshape(T, -1) @ w("attn_output.weight").T.astype(np.float64)
            if w("post_attention_norm.weight") is not None:
                o = self.rms(o, w("post_attention_norm.weight"))
            x = x + o
            h = self.rms(x, w("ffn_norm.weight"))
            gt = h @ w("ffn_gate.weight").T.astype(np.float64)
            up = h @ w("ffn_up.weight").T.astype(np.float64)
            if self.gemma:
                act = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * gt * (1 + 0.044715 * gt * gt)))
            else:
                act = gt / (1 + np.exp(-gt))
            d = (act * up) @ w("ffn_down.weight").T.astype(np.float64)
            if w("post_ffw_norm.weight") is not None:
                d = self.rms(d, w("post_ffw_norm.weight"))
            x = x + d
        h = self.rms(x, self.t["output_norm.weight"])
        logits = h @ self.output.T.astype(np.float64)
        if self.softcap:
            logits = self.softcap * np.tanh(logits / self.softcap)
        return logits
