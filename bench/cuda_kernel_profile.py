"""bench/cuda_kernel_profile.py — where a GPU decode step's time goes, kernel by kernel.

    python3 bench/cuda_kernel_profile.py MODEL [--depth 0] [--cache bf16] [--tokens 8] [--graph 1]
    python3 bench/cuda_kernel_profile.py MODEL --prefill 512 [--cache gaac]   # one prompt's eval

Decodes --tokens tokens (after a 64-token prompt grown to --depth, as bench/cuda_e2e.py does)
under torch.profiler, whose CUPTI tracing sees every kernel in the process, gaacrt's included.
Prints per kernel (template arguments shortened): launches per token, µs per launch, µs per
token and share of the kernel time; then one layer's kernels in launch order with their
durations, which names the o-proj and down-proj launches that share a kernel. Bandwidths follow
from the bytes each matrix holds (bench/gen_8b.py's shapes); the wall time per token is printed
beside the kernel time, the difference being launch gaps and host work.

Run it with GAACRT_CUDA_PDL=0 for per-kernel times: with programmatic dependent launch a kernel
starts before the previous one ends and waits inside, so its measured time includes that wait
(the kernel times then add up to more than the wall time).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import defaultdict

import numpy as np


def short(name: str) -> str:
    """A kernel's demangled name without namespaces, `void` and its parameter list (an anonymous
    namespace anywhere in it is dropped first, else the parameter list's removal took its name)."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"gaacrt::(cuda::)?", "", name)
    name = name.replace("void ", "")
    name = re.sub(r"\(.*\)$", "", name)
    return name[:110]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--cache", default="bf16")
    ap.add_argument("--act-bits", type=int, default=16, help="activation precision of the integer matmuls (16 or 8)")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--graph", type=int, default=1, help="1: replay the step as a CUDA graph (the default path)")
    ap.add_argument("--layer-kernels", type=int, default=14, help="kernels of one layer to list in order")
    ap.add_argument("--prefill", type=int, default=0,
                    help="profile one eval of this many tokens on an empty sequence (after the same on another "
                         "sequence, which calibrates the cache format) instead of decode steps")
    args = ap.parse_args()
    os.environ["GAACRT_CUDA_GRAPH"] = str(args.graph)
    import torch
    from torch.profiler import ProfilerActivity, profile

    import gaacrt
    from gaacrt import _core

    m = gaacrt.Model(args.model, backend="cuda", act_bits=args.act_bits)
    rng = np.random.default_rng(0)
    n_vocab = m.n_vocab
    if args.prefill:
        c = _core.Context(m._m, n_ctx=args.prefill + 64, n_seq_max=2, cache=args.cache, budget_bytes=0)
        prompt = [int(t) for t in rng.integers(3, min(n_vocab, 32000), args.prefill)]
        _core.Session(c).eval(prompt)
        s = _core.Session(c)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            s.eval(prompt)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
        report(prof, 1, f"model {args.model}, cache {args.cache}: one {args.prefill}-token prefill, "
                        f"wall {wall * 1e3:.1f} ms ({args.prefill / wall:.0f} tok/s)", "per prefill", 0)
        return
    c = _core.Context(m._m, n_ctx=max(args.depth, 64) + args.tokens + 64, n_seq_max=1, cache=args.cache, budget_bytes=0)
    s = _core.Session(c)
    s.eval([int(t) for t in rng.integers(3, min(n_vocab, 32000), 64)])
    if args.depth > 64:
        c._extend_for_bench(s, args.depth)
    for _ in range(4):  # warm-up (the graph is recorded here)
        s.eval([int(rng.integers(3, min(n_vocab, 32000)))])
    torch.cuda.synchronize()
    toks = [int(t) for t in rng.integers(3, min(n_vocab, 32000), args.tokens)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for t in toks:
            s.eval([t])
        wall = time.perf_counter() - t0
    n = args.tokens
    report(prof, n, f"model {args.model}, cache {args.cache}, depth {args.depth}, graph {args.graph}: "
                    f"{n} tokens, wall {wall / n * 1e3:.3f} ms/token ({n / wall:.1f} tok/s)", "per token",
           args.layer_kernels)


def report(prof, n: int, head: str, unit: str, layer_kernels: int) -> None:
    """The kernel table of a profile of n steps (and one layer of the last step, in order)."""
    import torch
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels.sort(key=lambda e: e.time_range.start)
    agg: dict[str, list[float]] = defaultdict(list)
    for e in kernels:
        agg[short(e.name)].append(e.time_range.elapsed_us())
    total = sum(sum(v) for v in agg.values())
    print(f"{head}, kernel time {total / n / 1e3:.3f} ms {unit}, {len(kernels) / n:.0f} kernels {unit}")
    print()
    print(f"| kernel | {unit} | µs per launch | µs {unit} | share |")
    print("|---|---:|---:|---:|---:|")
    for k, v in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
        print(f"| `{k}` | {len(v) / n:.0f} | {np.mean(v):.2f} | {sum(v) / n:.1f} | {100 * sum(v) / total:.1f}% |")
    if layer_kernels:  # one layer in order: the last token's kernels
        last = kernels[-len(kernels) // n:]
        print()
        print("one layer of the last token, in launch order (µs), after its first kernel (the embedding):")
        for e in last[1:1 + layer_kernels]:
            print(f"  {e.time_range.elapsed_us():8.2f}  {short(e.name)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
