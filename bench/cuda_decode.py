"""bench/cuda_decode.py — end-to-end decode speed on the GPU for a seeded synthetic model of
SmolLM2-135M's shape (30 layers, 576 wide, 9/3 heads of 64, FFN 1536; the tiny fixture vocabulary,
so the LM head is far smaller than the real 49K-row one), BF16 cache.

    python3 bench/cuda_decode.py [--weight-type q4_0] [--n-gen 128] [--depth 0]

Prints tokens/s of token-by-token decode after a prompt of `--depth` tokens (one forward per
token, no CUDA graph yet).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gaacrt  # noqa: E402
from fixtures.tiny_models import write_tiny_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weight-type", default="q4_0")
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--depth", type=int, default=16)
    args = ap.parse_args()
    path = write_tiny_model(Path(tempfile.mkdtemp()) / "smol.gguf", "llama", seed=2, weight_type=args.weight_type,
                            n_layers=30, n_embd=576, n_head=9, n_head_kv=3, head_dim=64, n_ff=1536)
    m = gaacrt.Model(str(path), backend="cuda")
    rng = np.random.default_rng(0)
    s = m.session(n_ctx=args.depth + args.n_gen + 16)
    s.eval([int(t) for t in rng.integers(3, m.n_vocab, args.depth)])
    toks = [int(t) for t in rng.integers(3, m.n_vocab, args.n_gen)]
    s.eval([toks[0]])
    t0 = time.perf_counter()
    for t in toks[1:]:
        s.eval([t])
    dt = time.perf_counter() - t0
    print(f"SmolLM2-135M shape ({args.weight_type}, vocab {m.n_vocab}), depth {args.depth}: "
          f"{(len(toks) - 1) / dt:.1f} tok/s ({dt / (len(toks) - 1) * 1e3:.2f} ms/token)")


if __name__ == "__main__":
    main()
