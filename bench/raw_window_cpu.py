"""Short-context decode on the CPU by raw window: GAAC with its newest tokens kept raw or not.

    python bench/raw_window_cpu.py [--model PATH] [--windows 0 128] [--reps 3] [--threads 2]

A session is calibrated on a 300-token prompt, reset, given a 16-token prompt, then decodes 128
single tokens (context 16 -> 144: tg128 at depth 0, the regime of a short chat), timed. GAAC runs
once per --windows entry (raw_window: the newest tokens kept raw BF16; 0 is GAAC's default),
beside BF16 and E8 (its own 128-token window); the formats alternate run by run and each figure
is the median of --reps. Prints a markdown table, tok/s and the ratio to BF16 in the same run.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import gaacrt


def decode_rate(m, cache: str, window: int | None, prompt: list[int]) -> float:
    kw = {} if window is None else {"raw_window": window}
    s = m.session(n_ctx=1024, cache=cache, **kw)
    s.eval(prompt)  # GAAC calibrates online on this prompt
    s.reset()
    s.eval(prompt[:16])
    t0 = time.perf_counter()
    for t in prompt[16:144]:
        s.eval([t])
    return 128 / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: SmolLM2-135M, gaacrt.models)")
    ap.add_argument("--windows", type=int, nargs="+", default=[0, 128])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    m = gaacrt.Model(args.model or gaacrt.models.get("smollm2-135m"), backend="cpu", n_threads=args.threads)
    prompt = [int(t) for t in np.random.default_rng(0).integers(3, min(m.n_vocab, 40000), 300)]
    runs = [("bf16", None)] + [("gaac", w) for w in args.windows] + [("e8", None)]
    rates: dict = {r: [] for r in runs}
    for _ in range(args.reps):
        for r in runs:
            rates[r].append(decode_rate(m, r[0], r[1], prompt))
    base = statistics.median(rates[("bf16", None)])
    print(f"{m.description}, CPU, {args.threads} threads: tg128 from a 16-token prompt, median of {args.reps}\n")
    print("| cache | raw window | tok/s | vs BF16 |")
    print("|---|---:|---:|---:|")
    for (cache, w), xs in rates.items():
        med = statistics.median(xs)
        shown = "-" if cache == "bf16" else ("128 (its own)" if w is None else str(w))
        print(f"| {cache} | {shown} | {med:.1f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
