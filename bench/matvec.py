"""Decode matvec bandwidth: GB/s of weight bytes streamed per matvec, per format and thread count.

    python bench/matvec.py [--mib 96] [--reps 7] [--threads 1 2] [--types q4_0 q4_K ...]

For each supported weight type, a matrix of 4096 columns and enough rows for ~--mib MiB of
weights (well past this machine's L2 and L3, so every matvec streams from DRAM) is multiplied by
one token with gaacrt._core.matvec (best ISA). Beside it, in the same run, a memcpy of the same
number of bytes (numpy copyto, split over the same number of Python threads; numpy releases the
GIL while copying). Both are timed the same way, alternating call by call: one warm-up call
each, then the median of --reps calls. GB/s = weight bytes / seconds (for memcpy: bytes copied / seconds — a copy also writes
them, so a read-only matvec can exceed it). Prints a markdown table and writes it to
bench/results/matvec.md.
"""
import argparse
import os
import concurrent.futures as cf
import pathlib
import platform
import statistics
import time

import numpy as np

from gaacrt import _core

TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "q4_K", "q5_K", "q6_K", "iq4_xs", "f16", "bf16", "f32"]
N_COLS = 4096


def make_weights(name, n_rows, rng):
    info = _core.type_info(name)
    bs, ts = info["block_size"], info["type_size"]
    if bs == 1:  # float weights: real values (random bytes would hold NaNs and subnormals)
        w = (rng.standard_normal((n_rows, N_COLS), dtype=np.float32) * 0.02)
        if name == "f16":
            w = w.astype(np.float16)
        elif name == "bf16":
            w = (w.view(np.uint32) >> 16).astype(np.uint16)
        return np.ascontiguousarray(w.view(np.uint8).reshape(n_rows, -1))
    raw = rng.integers(0, 256, size=(n_rows * N_COLS // bs, ts), dtype=np.uint8)
    scale = np.full(len(raw), 1e-3, np.float16).view(np.uint8).reshape(-1, 2)
    d_at = 208 if name == "q6_K" else 0
    raw[:, d_at:d_at + 2] = scale
    if name in ("q4_1", "q5_1", "q4_K", "q5_K"):
        raw[:, 2:4] = scale
    return raw.reshape(n_rows, -1)


def paired_medians(fns, reps):
    """Median seconds of each function; the calls alternate, so that a change in background
    load (this is a shared 2-core machine) hits both sides of the ratio alike."""
    for fn in fns:
        fn()  # warm-up: page faults, thread wake-up, caches of the activations
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def memcpy_fn(src, dst, n_threads, pool):
    s, d = src.reshape(-1), dst.reshape(-1)
    cuts = np.linspace(0, s.size, n_threads + 1).astype(np.int64)
    parts = [(d[a:b], s[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    if n_threads == 1:
        return lambda: np.copyto(d, s)
    return lambda: list(pool.map(lambda p: np.copyto(*p), parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=96.0, help="weight bytes per matrix, MiB")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--types", nargs="+", default=TYPES)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "matvec.md"))
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    isa = _core.cpu_isas()[-1]
    load_before = os.getloadavg()[0]
    pool = cf.ThreadPoolExecutor(max(args.threads))
    rows = []
    for name in args.types:
        info = _core.type_info(name)
        row_bytes = N_COLS // info["block_size"] * info["type_size"]
        n_rows = int(args.mib * 2**20) // row_bytes
        raw = make_weights(name, n_rows, rng)
        x = rng.standard_normal(N_COLS, dtype=np.float32)
        dst = np.empty_like(raw)
        for nt in args.threads:
            t_mv, t_cp = paired_medians([lambda: _core.matvec(raw, name, x, n_threads=nt),
                                         memcpy_fn(raw, dst, nt, pool)], args.reps)
            gbs, gbs_cp = raw.nbytes / t_mv / 1e9, raw.nbytes / t_cp / 1e9
            rows.append((name, nt, gbs, gbs_cp, gbs / gbs_cp, t_mv * 1e3))
            print(f"{name:7s} threads={nt}  {gbs:6.2f} GB/s  memcpy {gbs_cp:6.2f} GB/s  ratio {gbs / gbs_cp:4.2f}",
                  flush=True)
        del raw, dst

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        f"# matvec bandwidth ({cpu}, isa {isa}, {N_COLS} columns, ~{args.mib:g} MiB of weights per matrix, "
        f"median of {args.reps})",
        "",
        "Command: `python bench/matvec.py" + (f" --mib {args.mib:g}" if args.mib != 96 else "")
        + (f" --reps {args.reps}" if args.reps != 9 else "") + "`",
        "",
        f"1-minute load average before / after the run: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} logical CPUs (other jobs running alongside skew the 2-thread rows most).",
        "",
        "| format | threads | GB/s | memcpy GB/s | ratio to memcpy | ms per matvec |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {t} | {g:.2f} | {c:.2f} | {r:.2f} | {ms:.2f} |" for n, t, g, c, r, ms in rows]
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
