"""GAAC on the CPU: codec throughput and attention over a 16K-token cache, GAAC vs BF16.

    python bench/gaac_cpu.py [--ctx 16384] [--threads 2] [--reps 9]

1. Codec: BF16 tiles of SmolLM2's real KV layout (D = 64) and Gemma/Llama's (D = 128) with the
   value statistics of real keys (per-channel Gaussian scales spread over 2^-4..2^3), bases from
   their exponent histograms; GB/s of BF16 through the portable encoder, the portable decoder and
   the SIMD host decoder (one thread), beside a memcpy of the same bytes.
2. Attention: SmolLM2 over GPL-3 (1,024 real tokens, GAAC calibrated offline on them) repeated
   block by block to --ctx tokens
   (the cache holds real KV statistics; no quadratic prefill), one decode query, the attention op
   of one layer timed alone; median over --reps, the two formats alternating.
Prints a markdown table and writes it to bench/results/gaac_cpu.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import gaacrt
from gaacrt import _core

RESULTS = Path(__file__).resolve().parent / "results" / "gaac_cpu.md"


def synthetic_tiles(d: int, n_tiles: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scales = 2.0 ** rng.uniform(-4, 3, size=d)
    x = (rng.standard_normal((n_tiles, 16, d)) * scales).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation to bf16 is enough here
    exps = (bits >> 7) & 0xFF
    b3, b4 = np.zeros(d, np.uint8), np.zeros(d, np.uint8)
    for c in range(d):
        h = np.bincount(exps[:, :, c].ravel(), minlength=256).astype(np.uint64)
        b3[c] = _core.gaac_best_window(h, 8)
        b4[c] = _core.gaac_best_window(h, 16)
    return bits, b3, b4


def codec_rows(reps: int) -> list[str]:
    rng = np.random.default_rng(0)
    rows = []
    for d in (64, 128):
        raw, b3, b4 = synthetic_tiles(d, (16 << 20) // (32 * d), rng)
        esc, _ = _core.gaac_encode_tiles(raw, b3, b4, 2 * d)
        cap = int(np.quantile(esc[esc >= 0], 0.999) // 16 * 16 + 16)
        t = _core.gaac_time_codec(raw, b3, b4, cap, reps)
        nbytes = raw.nbytes
        buf = np.empty_like(raw)
        mc = []
        for _ in range(reps):
            t0 = time.perf_counter()
            np.copyto(buf, raw)
            mc.append(time.perf_counter() - t0)
        gbs = lambda s: nbytes / s / 1e9  # noqa: E731
        rows.append(f"| D = {d} | {nbytes >> 20} MiB | {gbs(t['encode_s']):.2f} | {gbs(t['decode_s']):.2f} | "
                    f"{gbs(t['decode_fast_s']):.2f} | {gbs(statistics.median(mc)):.2f} |")
    return rows


def attention_rows(ctx: int, threads: int, reps: int) -> list[str]:
    m = gaacrt.Model(gaacrt.models.get("smollm2-135m"), backend="cpu", n_threads=threads)
    toks = m.tokenize(open("/usr/share/common-licenses/GPL-3").read())[:1024]
    # An offline calibration at the length of the real KV (an online one fitted on the first
    # prefill chunk leaves later keys, drifted by RoPE, in raw tiles).
    import tempfile
    side = os.path.join(tempfile.mkdtemp(prefix="gaac-bench-"), "smollm2.gaac")
    _core.gaac_calibrate(m._m, [toks], 1024, side)
    sessions = {}
    for cache in ("bf16", "gaac"):
        c = _core.Context(m._m, n_ctx=ctx + 64, cache=cache, calibration=side if cache == "gaac" else "")
        s = _core.Session(c)
        s.eval(toks)
        c._extend_for_bench(s, ctx)
        sessions[cache] = (c, s)
    times = {"bf16": [], "gaac": []}
    for _ in range(reps):
        for cache, (c, s) in sessions.items():
            times[cache].append(statistics.median(c._time_attention(s, layer, 3) for layer in (3, 14, 25)))
    bf = statistics.median(times["bf16"])
    ga = statistics.median(times["gaac"])
    st = sessions["gaac"][0].kv_stats()
    kv_bytes = st["bf16_bytes"] / m.config["n_layer"]
    return [f"| bf16 | {bf * 1e3:.2f} | {kv_bytes / bf / 1e9:.2f} | 1.00 | 1.00 |",
            f"| gaac | {ga * 1e3:.2f} | {kv_bytes / st['resident_ratio'] / ga / 1e9:.2f} | {bf / ga:.2f} | "
            f"{st['resident_ratio']:.3f} |",
            "",
            f"GAAC mode shares: K 3-bit {100 * st['k']['share_3bit']:.2f}% 4-bit {100 * st['k']['share_4bit']:.2f}% "
            f"raw {100 * st['k']['share_raw_groups']:.3f}% (raw tiles {100 * st['k']['raw_tile_share']:.2f}%); "
            f"V 3-bit {100 * st['v']['share_3bit']:.2f}% 4-bit {100 * st['v']['share_4bit']:.2f}% "
            f"raw {100 * st['v']['share_raw_groups']:.3f}% (raw tiles {100 * st['v']['raw_tile_share']:.2f}%); "
            f"codec ratio K {st['k']['codec_ratio']:.3f} V {st['v']['codec_ratio']:.3f} (offline calibration on the "
            f"same 1,024 tokens)"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    lines = [f"GAAC on {platform.machine()} ({_core.gaac_decode_tile_fast_isa()} host decoder), load average {load:.2f}",
             "", "Codec, one thread (GB/s of BF16):", "",
             "| tiles | data | encode | decode (portable) | decode (SIMD host) | memcpy |", "|---|---:|---:|---:|---:|---:|"]
    lines += codec_rows(args.reps)
    lines += ["", f"Attention op, SmolLM2 (9 q-heads / 3 kv-heads, d = 64), {args.ctx}-token cache, one decode query, "
              f"{args.threads} threads, median per layer:", "",
              "| cache | ms / layer | GB/s of bytes held | speed vs bf16 | resident ratio |", "|---|---:|---:|---:|---:|"]
    lines += attention_rows(args.ctx, args.threads, args.reps)
    table = "\n".join(lines)
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
