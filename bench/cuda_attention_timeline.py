"""bench/cuda_attention_timeline.py — where one decode attention launch spends its time, from the
kernels' own clocks: each thread block stamps %globaltimer when it starts, when warp 0's first K/V
block has landed (E8: when its queries are rotated), when all its warps have streamed their
blocks, when its partial is written and counted, and (the last block of a kv-head) when the fused
reduce is written (GAACRT_CUDA_ATTN_TIMELINE, backends/cuda/attention_timeline.h).

    python3 bench/cuda_attention_timeline.py [--ctx 65536] [--caches bf16,gaac,e8] [--batch 1] [--reps 5]

The layer and its cache are bench/cuda_attention.py's (32 q-heads / 8 kv-heads, d = 128, the
random model's own KV grown to the context). Each launch runs and is waited for alone (no
back-to-back overlap; Context._time_attention_batch, whose warm-up launches are recorded too); the
table shows the launch of median span, in µs from the first block's start: min / median / max of
each stamp over the thread blocks that held keys (an empty split stamps its start and leaves),
then the spread of the blocks' streaming times.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

STAMPS = ("start", "first block landed", "streamed", "arrived", "merged")


def parse(path: Path):
    """The launches recorded in path: (format, grid, n_split, stamps[n_blocks][5] as float µs, 0 -> nan)."""
    out = []
    for line in path.read_text().splitlines():
        f = line.split()
        fmt, gx, gy, gz, n_split = f[0], int(f[1]), int(f[2]), int(f[3]), int(f[4])
        st = np.array([int(x) for x in f[5:]], dtype=np.float64).reshape(gx * gy * gz, len(STAMPS))
        st[st == 0] = np.nan
        out.append((fmt, (gx, gy, gz), n_split, st))
    return out


def summarize(st):
    """Per stamp (min, median, max, blocks) in µs from the earliest start, over the blocks that
    streamed keys and reached it; the launch's span (earliest start to the last stamp); each
    block's streaming time; the number of blocks that streamed."""
    live = ~np.isnan(st[:, 2])
    st = st[live]
    t0 = np.nanmin(st[:, 0])
    rows = []
    for k in range(st.shape[1]):
        col = st[:, k][~np.isnan(st[:, k])]
        rows.append(None if col.size == 0 else ((col.min() - t0) / 1e3, (np.median(col) - t0) / 1e3,
                                                 (col.max() - t0) / 1e3, col.size))
    span = (np.nanmax(st) - t0) / 1e3
    stream = (st[:, 2] - st[:, 1]) / 1e3
    stream = stream[~np.isnan(stream)]
    return rows, span, stream, int(live.sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", type=int, default=65536)
    ap.add_argument("--caches", default="bf16,gaac,e8")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=2048)
    args = ap.parse_args()
    log = Path(tempfile.mkdtemp()) / "timeline.txt"
    os.environ["GAACRT_CUDA_ATTN_TIMELINE"] = str(log)  # read once, when the first launch is made
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import gaacrt
    from cuda_attention import D, N_HEAD, N_KV, filled, kv_source
    from fixtures.tiny_models import write_tiny_model

    path = write_tiny_model(Path(tempfile.mkdtemp()) / "attn.gguf", "llama", seed=1, weight_type="q8_0", n_layers=1,
                            n_embd=1024, n_head=N_HEAD, n_head_kv=N_KV, head_dim=D, n_ff=512)
    m = gaacrt.Model(str(path), backend="cuda")
    toks = [int(t) for t in np.random.default_rng(0).integers(3, m.n_vocab, args.prefill)]
    print(f"device: {gaacrt.cuda_devices()[0]['name']}; {N_HEAD} q-heads / {N_KV} kv-heads, d = {D}, "
          f"context {args.ctx}, batch {args.batch}")
    for cache in args.caches.split(","):
        c, ss = filled(m, kv_source("synthetic", toks), args.ctx, cache, args.batch)
        log.write_text("")
        for _ in range(args.reps):
            c._time_attention_batch(ss, 0, 1)
        launches = [x for x in parse(log) if x[0] == cache]
        del c, ss
        if not launches:
            print(f"\n{cache}: no launch recorded")
            continue
        spans = [summarize(x[3])[1] for x in launches]
        fmt, grid, n_split, st = launches[int(np.argsort(spans)[len(spans) // 2])]
        rows, span, stream, n_live = summarize(st)
        print(f"\n{cache}: grid {grid}, n_split {n_split}, {n_live} blocks streamed keys; span {span:.1f} µs "
              f"(the median of {len(spans)} launches)")
        print("| stamp | blocks | min µs | median µs | max µs |")
        print("|---|---:|---:|---:|---:|")
        for name, r in zip(STAMPS, rows):
            if r is not None:
                print(f"| {name} | {r[3]} | {r[0]:.1f} | {r[1]:.1f} | {r[2]:.1f} |")
        if stream.size:
            print(f"streaming (first block landed -> streamed), per block: min {stream.min():.1f}, median "
                  f"{np.median(stream):.1f}, max {stream.max():.1f} µs")


if __name__ == "__main__":
    main()
