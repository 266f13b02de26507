"""bench/cuda_kernel_profile.py — where a GPU decode step's time goes, kernel by kernel.

    python3 bench/cuda_kernel_profile.py MODEL [--depth 0] [--cache bf16] [--tokens 8] [--graph 1]
    python3 bench/cuda_kernel_profile.py MODEL --prefill 512 [--cache gaac]   # one prompt's eval
    python3 bench/cuda_kernel_profile.py MODEL --prefill 512 --cache bf16,gaac,e8   # side by side

Decodes --tokens tokens (after a 64-token prompt grown to --depth, as bench/cuda_e2e.py does)
under torch.profiler, whose CUPTI tracing sees every kernel in the process, gaacrt's included.
Prints per kernel (template arguments shortened): launches per token, µs per launch, µs per
token and share of the kernel time; then one layer's kernels in launch order with their
durations, which names the o-proj and down-proj launches that share a kernel. Bandwidths follow
from the bytes each matrix holds (bench/gen_8b.py's shapes); the wall time per token is printed
beside the kernel time, the difference being launch gaps and host work. With several caches
(`--cache bf16,gaac,e8`) each gets its table, then one table holds every kernel's µs per token
(or per prefill) under each cache, and each later cache's difference from the first: what a
compressed cache adds or saves, kernel by kernel.

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
    ap.add_argument("--cache", default="bf16", help="cache format, or several separated by commas")
    ap.add_argument("--act-bits", type=int, default=16, help="activation precision of the integer matmuls (16 or 8)")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--graph", type=int, default=1, help="1: replay the step as a CUDA graph (the default path)")
    ap.add_argument("--layer-kernels", type=int, default=14, help="kernels of one layer to list in order")
    ap.add_argument("--prefill", type=int, default=0,
                    help="profile one eval of this many tokens on an empty sequence (after the same on another "
                         "sequence, which calibrates the cache format) instead of decode steps")
    args = ap.parse_args()
    os.environ["GAACRT_CUDA_GRAPH"] = str(args.graph)
    import gaacrt

    m = gaacrt.Model(args.model, backend="cuda", act_bits=args.act_bits)
    caches = args.cache.split(",")
    aggs, unit = {}, "per prefill" if args.prefill else "per token"
    for cache in caches:
        aggs[cache] = (profile_prefill if args.prefill else profile_decode)(m, args, cache)
    if len(caches) > 1:
        print()
        print("\n".join(side_by_side(aggs, 1 if args.prefill else args.tokens, unit)))


def traced(run):
    """run() under torch.profiler's CUDA tracing, the GPU idle before and after: (profile, wall s)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    return prof, wall


def profile_prefill(m, args, cache):
    """One --prefill-token eval on an empty sequence (after the same prompt on another, which
    calibrates the format); prints its table and returns its kernels' durations."""
    from gaacrt import _core
    rng = np.random.default_rng(0)
    c = _core.Context(m._m, n_ctx=args.prefill + 64, n_seq_max=2, cache=cache, budget_bytes=0)
    prompt = [int(t) for t in rng.integers(3, min(m.n_vocab, 32000), args.prefill)]
    _core.Session(c).eval(prompt)
    s = _core.Session(c)
    prof, wall = traced(lambda: s.eval(prompt))
    return report(prof, 1, f"model {args.model}, cache {cache}: one {args.prefill}-token prefill, "
                           f"wall {wall * 1e3:.1f} ms ({args.prefill / wall:.0f} tok/s)", "per prefill", 0)


def profile_decode(m, args, cache):
    """--tokens decode steps at --depth; prints their table and returns the kernels' durations."""
    from gaacrt import _core
    rng = np.random.default_rng(0)
    top = min(m.n_vocab, 32000)
    c = _core.Context(m._m, n_ctx=max(args.depth, 64) + args.tokens + 64, n_seq_max=1, cache=cache, budget_bytes=0)
    s = _core.Session(c)
    s.eval([int(t) for t in rng.integers(3, top, 64)])
    if args.depth > 64:
        c._extend_for_bench(s, args.depth)
    for _ in range(4):  # warm-up (the graph is recorded here)
        s.eval([int(rng.integers(3, top))])
    toks = [int(t) for t in rng.integers(3, top, args.tokens)]
    prof, wall = traced(lambda: [s.eval([t]) for t in toks])
    n = args.tokens
    return report(prof, n, f"model {args.model}, cache {cache}, depth {args.depth}, graph {args.graph}: "
                           f"{n} tokens, wall {wall / n * 1e3:.3f} ms/token ({n / wall:.1f} tok/s)", "per token",
                  args.layer_kernels)


def side_by_side(aggs: dict, n: int, unit: str) -> list:
    """One table of several profiles: each kernel's µs per unit (n steps profiled) under every cache
    in aggs (cache -> {kernel: [µs of each launch]}, in column order), the later caches'
    differences from the first, and the totals; kernels by their largest time first."""
    caches = list(aggs)
    base = caches[0]
    per = {c: {k: sum(v) / n for k, v in a.items()} for c, a in aggs.items()}
    names = sorted({k for a in per.values() for k in a}, key=lambda k: -max(p.get(k, 0.0) for p in per.values()))
    head = ["kernel"] + [f"{c} µs" for c in caches] + [f"{c} - {base}" for c in caches[1:]]
    lines = [f"side by side, µs {unit}:", "", "| " + " | ".join(head) + " |",
             "|---|" + "---:|" * (len(head) - 1)]
    for k in names + [None]:
        vals = [sum(per[c].values()) if k is None else per[c].get(k, 0.0) for c in caches]
        cells = [f"{v:.1f}" for v in vals] + [f"{v - vals[0]:+.1f}" for v in vals[1:]]
        lines.append(f"| {'total' if k is None else '`' + k + '`'} | " + " | ".join(cells) + " |")
    return lines


def report(prof, n: int, head: str, unit: str, layer_kernels: int) -> dict:
    """The kernel table of a profile of n steps (and one layer of the last step, in order); returns
    each kernel's launch durations."""
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
    return agg


if __name__ == "__main__":
    main()
