"""Real KV for the GAAC tests and benchmarks: post-RoPE keys and values of every layer of a GGUF
model over real text, as BF16 bits (round to nearest even from float32).

The forward is tests/reference_model.py's (written from shared/spec/gguf.md §3), run in float32
(the precision the runtime's activations have) and stopped after the last layer's attention
inputs; it only records what the KV cache would store. Texts are tokenized with llama.cpp
(`llama_cpp.Llama(path, vocab_only=True).tokenize`, BOS added as the model does).

    kv = capture_kv(path, "/usr/share/common-licenses/GPL-3", n_tokens=1024)
    kv.k[il], kv.v[il]            # uint16 (n_tokens, n_head_kv, head_dim)

Results are memoised per (model, text, n_tokens) for the test session, and, because the forward
takes ~10 s per text on two cores, also on disk under <gaacrt cache>/gaac-kv (keyed by the
model's size and mtime and the text's hash; delete the folder to recompute).
"""
from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from unittest import mock

import gguf
import numpy as np
from gguf.quants import dequantize

import gaacrt
import reference_model
from reference_model import ReferenceModel

GPL3 = "/usr/share/common-licenses/GPL-3"
APACHE2 = "/usr/share/common-licenses/Apache-2.0"
# Beside the models (gaacrt.models.cache_dir(): $GAACRT_CACHE or ~/.cache/gaacrt); $GAACRT_GAAC_KV_CACHE
# overrides (an empty folder measures a cold run).
CACHE_DIR = Path(os.environ.get("GAACRT_GAAC_KV_CACHE", gaacrt.models.cache_dir() / "gaac-kv"))


@dataclass
class CapturedKV:
    k: list          # per layer uint16 (T, n_head_kv, head_dim_k)
    v: list          # per layer uint16 (T, n_head_kv, head_dim_v)
    tokens: np.ndarray


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, round to nearest even; NaN kept quiet (as ggml's fp32_to_bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 64).astype(np.uint16)
    return r


def tokenize(model_path: str, text_path: str, n_tokens: int) -> np.ndarray:
    import llama_cpp
    llm = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    ids = llm.tokenize(Path(text_path).read_bytes())
    if len(ids) < n_tokens:
        raise ValueError(f"{text_path}: {len(ids)} tokens, {n_tokens} wanted")
    return np.asarray(ids[:n_tokens], dtype=np.int64)


_models: dict = {}
_memo: dict = {}
_EMBEDDINGS = ("token_embd.weight", "output.weight")


class _Field:
    def __init__(self, value):
        self._value = value

    def contents(self):
        return self._value


class _Tensor:
    """One tensor as gguf.GGUFReader lists it (name, tensor_type, ne-order shape, raw data).
    The embedding tables are cut to one row: the capture looks up the rows it needs itself, and
    dequantizing Gemma's 262,144-row table would take longer than the whole forward."""

    def __init__(self, f, ti):
        self.name = ti.name
        self.tensor_type = gguf.GGMLQuantizationType(ti.type_id)
        self.shape = list(ti.shape)
        self.data = f.tensor_bytes(ti.name)
        if ti.name in _EMBEDDINGS:
            self.data = self.data[:ti.nbytes // int(np.prod(ti.shape[1:]))]
            self.shape = [ti.shape[0], 1]


class _FastReader:
    """The part of gguf.GGUFReader that ReferenceModel reads, over gaacrt's C++ reader (the
    Python reader spends ~15 s parsing Gemma's tokenizer arrays)."""

    def __init__(self, path):
        f = gaacrt.GGUFFile(path)
        self.fields = {k: _Field(v) for k, v in f.metadata.items() if not k.startswith("tokenizer.")}
        self.tensors = [_Tensor(f, ti) for ti in f.tensors]


def _reference(path: str) -> ReferenceModel:
    if path not in _models:
        _models.clear()  # one model's weights at a time
        with mock.patch.object(reference_model, "GGUFReader", _FastReader):
            ref = ReferenceModel(path)
        f = gaacrt.GGUFFile(path)
        ti = f.tensor_info("token_embd.weight")
        table = f.tensor_bytes("token_embd.weight").reshape(ti.shape[1], -1)
        qtype = gguf.GGMLQuantizationType(ti.type_id)
        ref.embed = lambda tokens: np.asarray(dequantize(table[tokens], qtype), np.float32)
        _models[path] = ref
    return _models[path]


def _forward_kv(ref: ReferenceModel, tokens: np.ndarray) -> CapturedKV:
    f32 = np.float32
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    x = ref.embed(tokens)
    if ref.gemma:
        x = x * f32(math.sqrt(ref.n_embd))
    G = ref.n_head // ref.n_head_kv
    scale = f32(1.0 / math.sqrt(ref.dk))
    causal = np.tril(np.ones((T, T), dtype=bool))
    ks, vs = [], []
    for il in range(ref.n_layer):
        w = lambda n: ref._w(f"blk.{il}." + n)  # noqa: E731
        h = ref.rms(x, w("attn_norm.weight")).astype(f32)
        q, k, v = (h @ w(f"attn_{n}.weight").T for n in "qkv")
        if w("attn_q.bias") is not None:
            q, k, v = q + w("attn_q.bias"), k + w("attn_k.bias"), v + w("attn_v.bias")
        q = q.reshape(T, ref.n_head, ref.dk)
        k = k.reshape(T, ref.n_head_kv, ref.dk)
        v = v.reshape(T, ref.n_head_kv, ref.dv)
        if w("attn_q_norm.weight") is not None:
            q, k = ref.rms(q, w("attn_q_norm.weight")), ref.rms(k, w("attn_k_norm.weight"))
        swa = ref.is_swa[il]
        base, fs = (ref.rope_base_swa, 1.0) if swa else (ref.rope_base, ref.freq_scale)
        q = ref.rope(q, pos, base, fs).astype(f32)
        k = ref.rope(k, pos, base, fs).astype(f32)
        ks.append(f32_to_bf16_bits(k))
        vs.append(f32_to_bf16_bits(v.astype(f32)))
        if il == ref.n_layer - 1:
            break  # the rest of the last layer does not reach the cache
        mask = causal.copy()
        if swa:
            mask &= (pos[:, None] - pos[None, :]) < ref.swa
        out = np.empty((T, ref.n_head, ref.dv), dtype=f32)
        for hh in range(ref.n_head):
            s = (q[:, hh, :] @ k[:, hh // G, :].T) * scale
            s = np.where(mask, s, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            out[:, hh, :] = p @ v[:, hh // G, :]
        o = out.reshape(T, -1) @ w("attn_output.weight").T
        if w("post_attention_norm.weight") is not None:
            o = ref.rms(o, w("post_attention_norm.weight"))
        x = (x + o).astype(f32)
        h = ref.rms(x, w("ffn_norm.weight")).astype(f32)
        gt, up = h @ w("ffn_gate.weight").T, h @ w("ffn_up.weight").T
        if ref.gemma:
            act = f32(0.5) * gt * (1 + np.tanh(f32(math.sqrt(2 / math.pi)) * gt * (1 + f32(0.044715) * gt * gt)))
        else:
            act = gt / (1 + np.exp(-gt))
        d = (act * up) @ w("ffn_down.weight").T
        if w("post_ffw_norm.weight") is not None:
            d = ref.rms(d, w("post_ffw_norm.weight"))
        x = (x + d).astype(f32)
    return CapturedKV(ks, vs, tokens)


def capture_kv(model_path: str, text_path: str, n_tokens: int = 1024) -> CapturedKV:
    st = os.stat(model_path)
    text_hash = hashlib.sha256(Path(text_path).read_bytes()).hexdigest()[:16]
    key = f"{Path(model_path).stem}-{st.st_size}-{int(st.st_mtime)}-{text_hash}-{n_tokens}-v1"
    if key in _memo:
        return _memo[key]
    cache = CACHE_DIR / f"{key}.npz"
    if cache.exists():
        z = np.load(cache)
        n_layer = int(z["n_layer"])
        kv = CapturedKV([z[f"k{i}"] for i in range(n_layer)], [z[f"v{i}"] for i in range(n_layer)], z["tokens"])
    else:
        kv = _forward_kv(_reference(model_path), tokenize(model_path, text_path, n_tokens))
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp.npz")
        np.savez(tmp, n_layer=len(kv.k), tokens=kv.tokens, **{f"k{i}": a for i, a in enumerate(kv.k)},
                 **{f"v{i}": a for i, a in enumerate(kv.v)})
        tmp.replace(cache)
    _memo[key] = kv
    return kv
