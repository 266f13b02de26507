"""bench/gen_8b.py — write the random-weight Llama-3.1-8B-shaped Q4_0 GGUF that bench/cuda_e2e.py
and llama-bench (bench/llama_bench_gpu.sh) both run (tests/fixtures/llama31_8b.py says how);
--body-type q4_k makes its projections and embedding Q4_K instead.

    python3 bench/gen_8b.py /tmp/llama31-8b-q4_0.gguf [--output-type q6_k] [--body-type q4_k] [--small]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.llama31_8b import OUTPUT_TYPES, write_llama31_8b  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--output-type", default="q6_k", choices=sorted(OUTPUT_TYPES), help="LM head type (llama-quantize Q4_0: q6_k)")
    ap.add_argument("--small", action="store_true", help="tiny dims, same code path (tests)")
    ap.add_argument("--body-type", default="q4_0", choices=["q4_0", "q4_k"], help="embedding and projections")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    p = write_llama31_8b(args.out, small=args.small, output_type=args.output_type, seed=args.seed,
                         body_type=args.body_type)
    print(f"wrote {p} ({p.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
