"""Attention-KL probe of E8 key-centering variants, the search behind e8_center="block".

    python bench/e8_center_probe.py MODEL N_TOK VARIANT[,VARIANT...]
    e.g. python bench/e8_center_probe.py gemma3-270m 512 e8,kivi2,blk,blk+tok+rs0.75@0.8

Post-RoPE q and k of every layer from the float64 reference forward (tests/reference_model.py,
cached in /tmp), each kv-head's keys reconstructed by a variant (numpy, using the exact E8
encoder of _core), scored as the serving state does: the query at p sees key j compressed iff
j's block is older than the 128-token window; mean attention KL over queries p >= 144 against
exact keys. Statistics are fitted on the same tokens (optimistic; the cache fits them on its first
prefill). Variants, joined by "+" (suffix @x multiplies alpha by x):
  e8, kivi2          the formats as the runtime codes them
  blk                subtract each 16-token block's fp16 per-channel mean before coding
  tok                ... only from the tokens it brings closer to zero (others coded whole)
  center             global per-channel mean and sqrt(std) scale (e8_center=True)
  rsP / gsP          channel scale = within-block residual std^P / global std^P
  qaP / qgP          query-aware scale (residual / global key variance over E[q^2])^P (needs
                     queries: not implementable from the cache's calibration)
  sink               the first 16 keys exact (raw_sink=16)
"""
import math
import pathlib
import pickle
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests")); sys.path.insert(0, str(ROOT / "bench"))
import gaacrt
from gaacrt import _core
from gaacrt.perplexity import _log_softmax
from e8_quality import reconstruct_keys, TEXT

name = sys.argv[1]; n_tok = int(sys.argv[2]) if len(sys.argv) > 2 else 512
cache = pathlib.Path(f"/tmp/e8_center_probe_{name}_{n_tok}.pkl")
if cache.exists():
    rec, meta = pickle.load(open(cache, "rb"))
else:
    from reference_model import ReferenceModel
    path = gaacrt.models.get(name)
    ref = ReferenceModel(path)
    toks = gaacrt.Tokenizer(path).tokenize(open(TEXT).read(), add_special=True)[:n_tok]
    rec = {}
    ref.forward(toks, record=rec)
    rec = {il: (q.astype(np.float32), k.astype(np.float32)) for il, (q, k, v) in rec.items()}
    meta = dict(n_layer=ref.n_layer, n_head=ref.n_head, n_head_kv=ref.n_head_kv, dk=ref.dk)
    pickle.dump((rec, meta), open(cache, "wb"))

def f16(x): return x.astype(np.float16).astype(np.float32)

def e8_rot(kr, alpha):
    codes, norms = _core.e8_encode_rotated(np.ascontiguousarray(kr, np.float32), alpha)
    return _core.e8_decode_rotated(codes, norms, alpha)

def blockmean(x):  # (n, d) -> per 16-token block mean broadcast (fp16)
    n, d = x.shape
    m = x.reshape(n // 16, 16, d).mean(1, keepdims=True)
    return np.broadcast_to(f16(m), (n // 16, 16, d)).reshape(n, d)

def variant(v, k, qh, il, alpha_mul=1.0):
    """k (n, d) float32, qh (n, G, d) -> reconstruction (n, d)."""
    n, d = k.shape
    if v.endswith("+sink"):
        out = variant(v[:-5], k, qh, il, alpha_mul)
        out[:16] = k[:16]
        return out
    if v == "kivi2" or v == "e8":
        return reconstruct_keys(v, k, il)
    R = np.asarray(_core.E8LayerCodec(d, il).rotation, np.float64)
    alpha = _core.e8_alpha(d) * alpha_mul
    opts = v.split("+")
    s = np.ones(d)
    mu = np.zeros(d)
    blk = "blk" in opts
    resid = k - (k.reshape(n // 16, 16, d).mean(1, keepdims=True).repeat(16, 1).reshape(n, d))
    for o in opts:
        if o == "center":
            mu = k.mean(0); s = np.sqrt(k.std(0) + 1e-6)
        elif o.startswith("rs"):  # scale from within-block residual std ^ p
            p = float(o[2:]); s = (resid.std(0) + 1e-6) ** p
        elif o.startswith("gs"):  # scale from global std ^ p
            p = float(o[2:]); s = (k.std(0) + 1e-6) ** p
        elif o.startswith("qa"):  # query-aware: (var_resid / E q^2)^p
            p = float(o[2:]); eq = (qh.astype(np.float64) ** 2).mean((0, 1)) + 1e-9
            s = ((resid.var(0) + 1e-9) / eq) ** p
        elif o.startswith("qg"):  # query-aware global var
            p = float(o[2:]); eq = (qh.astype(np.float64) ** 2).mean((0, 1)) + 1e-9
            s = ((k.var(0) + 1e-9) / eq) ** p
    x = ((k - mu) / s) @ R.T
    m = blockmean(x) if blk else 0.0
    if "tok" in opts:  # per-token choice: subtract the block mean only where it shrinks the vector
        for it in range(2):
            use = (np.linalg.norm(x - m, axis=1) < np.linalg.norm(x, axis=1))[:, None]
            xb = x.reshape(n // 16, 16, d); ub = use.reshape(n // 16, 16, 1)
            mb = (xb * ub).sum(1, keepdims=True) / np.maximum(ub.sum(1, keepdims=True), 1)
            m = np.broadcast_to(f16(mb), (n // 16, 16, d)).reshape(n, d)
        use = (np.linalg.norm(x - m, axis=1) < np.linalg.norm(x, axis=1))[:, None]
        m = np.where(use, m, 0.0)
    xr = e8_rot(x - m, alpha) + m
    return (xr @ R) * s + mu

def kl_of(k, kr, qh, causal, scale):
    # Serving state: key j is compressed for the query at p iff its block is older than the window.
    n = k.shape[0]
    p = np.arange(n)[:, None]; j = np.arange(n)[None, :]
    comp = (j // 16) < ((p + 1 - 128) // 16)
    rows = slice(144, n)
    out = []
    for g in range(qh.shape[1]):
        s0 = np.where(causal, qh[:, g] @ k.T * scale, -np.inf)
        s1 = np.where(causal, np.where(comp, qh[:, g] @ kr.T, qh[:, g] @ k.T) * scale, -np.inf)
        p0, p1 = _log_softmax(s0[rows]), _log_softmax(s1[rows])
        out.append(float(np.nansum(np.exp(p0) * (p0 - p1), axis=1).mean()))
    return np.mean(out)

variants = sys.argv[3].split(",")
L, H, Hkv, dk = meta["n_layer"], meta["n_head"], meta["n_head_kv"], meta["dk"]
G = H // Hkv
T = n_tok // 16 * 16
causal = np.tril(np.ones((T, T), bool))
scale = 1 / math.sqrt(dk)
for v in variants:
    am = 1.0
    if "@" in v: v, am = v.split("@"); am = float(am)
    kls = []
    for il in range(L):
        q, k = rec[il]
        for h in range(Hkv):
            kh = k[:T, h].astype(np.float64); qh = q[:T, h * G:(h + 1) * G].astype(np.float64)
            kr = variant(v, kh.astype(np.float32), qh, il, am).astype(np.float64)
            kls.append(kl_of(kh, kr, qh, causal, scale))
    kls = np.array(kls).reshape(L, Hkv).mean(1)
    print(f"[serving] {name} {v}@{am}: mean KL {kls.mean():.5f}  worst {kls.max():.5f} (layer {kls.argmax()})", flush=True)
