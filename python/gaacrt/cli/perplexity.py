"""gaac-perplexity — perplexity of a model over a text with a KV cache format, beside BF16.

    gaac-perplexity model.gguf FILE [--cache e8] [--ctx 512] [--ubatch 16] [--windows N]
Prints the running estimate per window (as llama-perplexity does), then the final perplexity and,
for a format other than bf16, the mean KL divergence and top-1 agreement against a BF16 cache.
"""
from __future__ import annotations

import argparse
import sys

from .. import models
from .._core import GaacrtError, GGUFError
from ..model import Model
from ..perplexity import perplexity
from . import add_lossy_cache_args


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gaac-perplexity", description=__doc__.splitlines()[0])
    ap.add_argument("model", help="GGUF file")
    ap.add_argument("file", help="text file")
    ap.add_argument("--cache", default="bf16", help="bf16 (default), gaac, e8, q8, kivi2, fp8_e4m3+gaac, ...")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--ubatch", type=int, default=16, help="tokens per forward (small: serving-state cache)")
    ap.add_argument("--windows", type=int, default=None, help="at most this many windows")
    ap.add_argument("--no-bf16", action="store_true", help="skip the BF16 comparison run")
    ap.add_argument("--calibration", default=None, help="GAAC sidecar")
    add_lossy_cache_args(ap)
    ap.add_argument("-t", "--threads", type=int, default=None)
    args = ap.parse_args(argv)
    try:
        model = Model(args.model, n_threads=args.threads)
        text = open(args.file, encoding="utf-8", errors="replace").read()
        r = perplexity(model, text, cache=args.cache, ctx=args.ctx, ubatch=args.ubatch, max_windows=args.windows,
                       compare_bf16=not args.no_bf16, calibration=args.calibration,
                       e8_center=args.e8_center, raw_sink=args.raw_sink, raw_window=args.raw_window,
                       progress=lambda w, n, p: print(f"[{w}/{n}] {p:.4f}", file=sys.stderr, flush=True))
    except (GGUFError, GaacrtError, models.ModelFetchError, OSError, ValueError) as e:
        print(f"gaac-perplexity: {e}", file=sys.stderr)
        return 1
    print(f"{model.description}  cache {r.cache}  ctx {r.ctx}  windows {r.windows}  tokens scored {r.tokens_scored}")
    print(f"perplexity: {r.perplexity:.4f}")
    if r.kl_vs_bf16 is not None:
        print(f"vs bf16: mean KL {r.kl_vs_bf16:.6f}  top-1 agreement {100 * r.top1_vs_bf16:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
