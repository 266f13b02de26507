"""bench/wide_prefill_precision.py — how far the prefill attention's paths are from the CPU backend
(relative L2 over the outputs), for the variants GAACRT_CUDA_PREFILL_WIDE selects: unset (the
default: row groups of 64, attention_wide.cuh, in steps of two blocks with two bf16 parts of the
queries and weights at head size 128, else one-block steps with three parts), 1 (one-block steps,
three parts) and 0 (row groups of 16, run_rows_shared); then the E8 cache's prefill in row groups
of 64 (1, attention_e8_wide.cuh) and of 16 (0, run_rows_e8), its blocks older than 128 tokens
compressed. Random K, V and queries, as tests/test_cuda_ops.py's attention tests and
tests/test_cuda_lossy.py's.

    python3 bench/wide_prefill_precision.py [--backend cuda|cuda-emulated]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from gaacrt import _core  # noqa: E402
from fixtures.backend_compare import rel  # noqa: E402

SHAPES = [(300, 70, 4, 2, 16), (700, 300, 8, 8, 128), (900, 200, 32, 8, 128), (400, 120, 9, 3, 64),
          (4000, 512, 32, 8, 128)]  # (context, queries, q-heads, kv-heads, head dim)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    args = ap.parse_args()
    gpu, cpu = _core.open_backend(args.backend), _core.open_backend("cpu", n_threads=os.cpu_count() or 2)
    variants = ["default", "1", "0"]
    print("| context, queries, heads, kv-heads, dim | " + " | ".join(f"WIDE={v} vs CPU" for v in variants) + " |")
    print("|---|" + "---:|" * len(variants))
    for shape in SHAPES:
        if args.backend != "cuda" and shape[0] > 1000:
            continue  # the emulation takes minutes for the long one
        n_ctx, n_q, n_head, n_kv, d = shape
        rng = np.random.default_rng(1)
        k = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
        v = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
        q = rng.standard_normal((n_q, n_head, d)).astype(np.float32)
        ref = _core.op_attention(cpu, k, v, q, 1 / np.sqrt(d))
        cells = []
        for var in variants:
            os.environ.pop("GAACRT_CUDA_PREFILL_WIDE", None)
            if var != "default":
                os.environ["GAACRT_CUDA_PREFILL_WIDE"] = var
            cells.append(f"{rel(_core.op_attention(gpu, k, v, q, 1 / np.sqrt(d)), ref):.2e}")
        os.environ.pop("GAACRT_CUDA_PREFILL_WIDE", None)
        print(f"| {', '.join(map(str, shape))} | " + " | ".join(cells) + " |", flush=True)
    print()
    print("| E8 cache: context, queries, heads, kv-heads, dim | WIDE=1 vs CPU | WIDE=0 vs CPU |")
    print("|---|---:|---:|")
    for shape in SHAPES:
        if (args.backend != "cuda" and shape[0] > 1000) or shape[4] not in (32, 64, 128):
            continue  # the E8 tensor-core kernel's head sizes
        n_ctx, n_q, n_head, n_kv, d = shape
        rng = np.random.default_rng(2)
        k = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
        v = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
        q = rng.standard_normal((n_q, n_head, d)).astype(np.float32)
        ref = _core.op_lossy_attention(cpu, k, v, q, 1 / np.sqrt(d), "e8", window=128)[0]
        cells = []
        for var in ["1", "0"]:
            os.environ["GAACRT_CUDA_PREFILL_WIDE"] = var
            out = _core.op_lossy_attention(gpu, k, v, q, 1 / np.sqrt(d), "e8", window=128)[0]
            cells.append(f"{rel(out, ref):.2e}")
        os.environ.pop("GAACRT_CUDA_PREFILL_WIDE")
        print(f"| {', '.join(map(str, shape))} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
