"""gaac-inspect — describe a GGUF file: architecture, hyperparameters, tensor types, KV cost.

    gaac-inspect [model.gguf] [--tensors] [--metadata]
With no path it describes the default model (fetched on first use).
"""
from __future__ import annotations

import argparse
import collections
import sys

from .. import models
from .._core import GGUFError, GGUFFile
from ..cache_formats import FORMATS, bytes_per_token_head


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def hyperparameters(f: GGUFFile) -> dict:
    """The hyperparameters that size a model and its cache, with llama.cpp's defaults."""
    md = f.metadata
    arch = md.get("general.architecture", "?")

    def get(key, default=None):
        v = md.get(f"{arch}.{key}", default)
        return v[0] if isinstance(v, list) and v else v

    n_embd = get("embedding_length")
    n_head = get("attention.head_count")
    n_head_kv = get("attention.head_count_kv", n_head)
    head_dim = n_embd // n_head if n_embd and n_head else None
    hp = {
        "architecture": arch,
        "name": md.get("general.name", ""),
        "context_length": get("context_length"),
        "embedding_length": n_embd,
        "block_count": get("block_count"),
        "feed_forward_length": get("feed_forward_length"),
        "head_count": n_head,
        "head_count_kv": n_head_kv,
        "key_length": get("attention.key_length", head_dim),
        "value_length": get("attention.value_length", head_dim),
        "rope_dimension_count": get("rope.dimension_count", get("attention.key_length", head_dim)),
        "rope_freq_base": get("rope.freq_base", 10000.0),
        "rms_eps": get("attention.layer_norm_rms_epsilon"),
        "sliding_window": get("attention.sliding_window"),
        "vocab_size": len(md.get("tokenizer.ggml.tokens", [])) or get("vocab_size"),
        "tokenizer": md.get("tokenizer.ggml.model"),
        "pre_tokenizer": md.get("tokenizer.ggml.pre"),
    }
    return {k: v for k, v in hp.items() if v is not None}


def describe(path: str, show_tensors: bool = False, show_metadata: bool = False) -> str:
    f = GGUFFile(path)
    hp = hyperparameters(f)
    out = [f"{path}", f"  GGUF v{f.version}, {len(f.tensors)} tensors, {len(f.metadata)} metadata keys, "
                      f"{_fmt_bytes(f.file_size)}" + (f", {f.n_splits} parts" if f.n_splits > 1 else "")]
    out.append("hyperparameters:")
    for k, v in hp.items():
        out.append(f"  {k:22s} {v}")

    hist = collections.Counter(t.type for t in f.tensors)
    sizes = collections.Counter()
    n_params = 0
    for t in f.tensors:
        sizes[t.type] += t.nbytes
        n_params += t.n_elements
    out.append(f"tensor types ({n_params / 1e6:.1f} M parameters, "
               f"{8 * sum(sizes.values()) / max(n_params, 1):.2f} bits/weight):")
    for ty, n in sorted(hist.items(), key=lambda kv: -sizes[kv[0]]):
        out.append(f"  {ty:8s} {n:5d} tensors  {_fmt_bytes(sizes[ty]):>12s}")

    if all(k in hp for k in ("block_count", "head_count_kv", "key_length", "value_length")):
        L, kvh, dk, dv = hp["block_count"], hp["head_count_kv"], hp["key_length"], hp["value_length"]
        ctx = hp.get("context_length", 0)
        out.append(f"KV cache per token ({L} layers x {kvh} kv-heads, d_k={dk}, d_v={dv}; "
                   f"all layers, windows not subtracted):")
        base = None
        for fmt in FORMATS:
            b = L * kvh * bytes_per_token_head(fmt, dk, dv)
            base = base or b
            extra = f"  {_fmt_bytes(b * ctx):>11s} at {ctx} tokens" if ctx else ""
            out.append(f"  {fmt:14s} {b:10.1f} B/token  {base / b:5.2f}x{extra}")
        if "sliding_window" in hp:
            out.append(f"  (sliding-window layers keep only the last {hp['sliding_window']} tokens)")

    if show_metadata:
        out.append("metadata:")
        for k, v in f.metadata.items():
            s = repr(v)
            if isinstance(v, list) and len(v) > 8:
                s = f"[{', '.join(repr(x) for x in v[:8])}, ...] ({len(v)} items)"
            out.append(f"  {k} = {s[:200]}")
    if show_tensors:
        out.append("tensors:")
        for t in f.tensors:
            out.append(f"  {t.name:40s} {t.type:8s} {str(t.shape):24s} offset {t.offset}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gaac-inspect", description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="GGUF file (default: the default model)")
    ap.add_argument("--tensors", action="store_true", help="list every tensor")
    ap.add_argument("--metadata", action="store_true", help="list every metadata key")
    args = ap.parse_args(argv)
    try:
        path = args.model or models.default()
        print(describe(path, args.tensors, args.metadata))
    except (GGUFError, models.ModelFetchError, OSError, RuntimeError) as e:
        print(f"gaac-inspect: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
