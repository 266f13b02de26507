"""bench/cuda_decode.py — end-to-end decode speed on the GPU for a seeded synthetic model of
SmolLM2-135M's shape (30 layers, 576 wide, 9/3 heads of 64, FFN 1536; the tiny fixture vocabulary,
so the LM head is far smaller than the real 49K-row one), or a real GGUF (--model: the real
SmolLM2-135M-Instruct Q4_1 with its 49,152-row Q8_0 LM head, which bench/gpu_real_smollm2.sh brings
to the GPU machine in two parts).

    python3 bench/cuda_decode.py [--weight-type q4_0] [--n-gen 128] [--depths 0,16,1024] [--cache bf16]
    python3 bench/cuda_decode.py --model SmolLM2-135M-Instruct.Q4_1.gguf --depths 16

Prints tokens/s of token-by-token decode (one forward per token, Session.eval of one token) after
a prompt of each depth, eager (GAACRT_CUDA_GRAPH=0) and replayed as a CUDA graph, in one run.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gaacrt  # noqa: E402
from fixtures.tiny_models import write_tiny_model  # noqa: E402


def decode_rate(m, depth: int, n_gen: int, cache: str, graph: bool) -> tuple[float, dict]:
    os.environ["GAACRT_CUDA_GRAPH"] = "1" if graph else "0"
    rng = np.random.default_rng(0)
    s = m.session(n_ctx=depth + n_gen + 32, cache=cache)
    if depth:
        s.eval([int(t) for t in rng.integers(3, m.n_vocab, depth)])
    toks = [int(t) for t in rng.integers(3, m.n_vocab, n_gen + 8)]
    for t in toks[:8]:  # warm-up: the first steps run eagerly and record the graph
        s.eval([t])
    t0 = time.perf_counter()
    for t in toks[8:]:
        s.eval([t])
    dt = time.perf_counter() - t0
    return n_gen / dt, s._s.context._graph_stats()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weight-type", default="q4_0")
    ap.add_argument("--n-gen", type=int, default=256)
    ap.add_argument("--depths", default="0,16,1024")
    ap.add_argument("--cache", default="bf16")
    ap.add_argument("--model", help="a real GGUF instead of the synthetic SmolLM2-shaped one")
    ap.add_argument("--act-bits", type=int, default=16, help="activation precision of the integer matmuls (16 or 8)")
    args = ap.parse_args()
    if args.model:
        path, label = Path(args.model), Path(args.model).name
    else:
        path = write_tiny_model(Path(tempfile.mkdtemp()) / "smol.gguf", "llama", seed=2, weight_type=args.weight_type,
                                n_layers=30, n_embd=576, n_head=9, n_head_kv=3, head_dim=64, n_ff=1536)
        label = f"SmolLM2-135M shape, {args.weight_type}"
    m = gaacrt.Model(str(path), backend="cuda", act_bits=args.act_bits)
    for depth in [int(d) for d in args.depths.split(",")]:
        for graph in (False, True):
            rate, st = decode_rate(m, depth, args.n_gen, args.cache, graph)
            print(f"{label} (vocab {m.n_vocab}, {args.cache} cache, {args.act_bits}-bit x), depth {depth}, "
                  f"{'graph' if graph else 'eager'}: {rate:.1f} tok/s ({1e3 / rate:.3f} ms/token) "
                  f"[replays {st['replays']}, captures {st['captures']}]", flush=True)


if __name__ == "__main__":
    main()
