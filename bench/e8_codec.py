"""E8 k2v2 codec throughput on the CPU, one thread: key encode (keys/s) and scoring of one decode
step's queries against an 8K-token set of compressed keys, path (B) decode-in-dot vs path (A) the
paper's per-query tables (spec/e8.md §7).

    python bench/e8_codec.py [--tokens 8192] [--group 4] [--reps 7]

Keys are Gaussian (the codec's cost does not depend on the values), head dims 64 / 128 / 256
(SmolLM2, Llama-8B, Gemma-3). Everything timed runs in C++ through gaacrt._core with the GIL
released, one call over the whole key set:
  * encode: E8LayerCodec.encode_keys = rotation (d x d) + lattice encode + slot packing, and the
    two parts alone (e8_rotate, e8_encode_rotated);
  * (B) E8LayerCodec.score: each key decoded once (the packed table expanded on the CPU), dotted with 1 or
    `--group` query heads (GQA: Llama-8B has 4 query heads per kv-head);
  * (A) build_tables (65,536 entries per 8-dim block per query head, d/8 * 256 KiB) + score_table
    (d/8 gathers per key); a GQA group needs one table set per query head;
  * q8 and KIVI-2 key tiles scored by their host routines (d = 128) and a numpy/BLAS f32 K q on
    the dense keys, for scale (not a cache path: the BF16 attention is the attention op's).
Fastest of --reps runs after a warm-up (see best_time). Prints a markdown table and writes bench/results/e8_codec.md.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != ROOT / "bench"]

import argparse  # noqa: E402
import datetime  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # a one-thread comparison
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

from gaacrt import _core as C  # noqa: E402


def best_time(fn, reps):
    """Fastest of `reps` runs after a warm-up: the machine this was written on is shared (2 cores,
    other builds running), and the minimum is the run least disturbed by them."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bench_dim(d, n_tok, group, reps, rng):
    c = C.E8LayerCodec(d, 0)
    k = rng.standard_normal((n_tok // 16, 16, d)).astype(np.float32)
    kf = k.reshape(-1, d)
    q = rng.standard_normal((group, d)).astype(np.float32)
    r = {"d": d}
    r["enc"] = best_time(lambda: c.encode_keys(k), reps)
    r["rot"] = best_time(lambda: C.e8_rotate(c.rotation, kf), reps)
    kr = C.e8_rotate(c.rotation, kf)
    r["lat"] = best_time(lambda: C.e8_encode_rotated(kr, c.alpha), reps)
    slots = c.encode_keys(k)
    q_rot = C.e8_rotate(c.rotation, q)
    r["qrot"] = best_time(lambda: C.e8_rotate(c.rotation, q_rot[:1]), reps)
    r["b1"] = best_time(lambda: c.score(slots, q_rot[:1]), reps)
    r["bg"] = best_time(lambda: c.score(slots, q_rot), reps)
    r["build"] = best_time(lambda: c.build_tables(q_rot[0]), reps)
    tables = c.build_tables(q_rot[0])
    r["gather"] = best_time(lambda: c.score_table(slots, tables), reps)
    # The two paths must agree before their times mean anything.
    sb, sa = c.score(slots, q_rot[:1])[0], c.score_table(slots, tables)
    assert np.allclose(sa, sb, rtol=1e-4, atol=1e-4 * np.abs(sb).max()), "paths (A) and (B) disagree"
    r["blas"] = best_time(lambda: kf @ q[0], reps)
    r["table_mib"] = d // 8 * 65536 * 4 / 2**20
    return r


def bench_scalar(n_tok, reps, rng):
    x = rng.standard_normal((n_tok // 16, 16, 128)).astype(np.float32)
    q = rng.standard_normal((1, 128)).astype(np.float32)
    q8, kv2 = C.q8_encode_tiles(x), C.kivi2_k_encode_tiles(x)
    return {"q8": best_time(lambda: C.q8_score_tiles(q8, 128, q), reps),
            "kivi2": best_time(lambda: C.kivi2_k_score_tiles(kv2, 128, q), reps)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--group", type=int, default=4, help="query heads per kv-head (GQA)")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "e8_codec.md"))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n = a.tokens
    rows = [bench_dim(d, n, a.group, a.reps, rng) for d in (64, 128, 256)]
    sc = bench_scalar(n, a.reps, rng)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    ms = lambda s: f"{s * 1e3:.2f}"  # noqa: E731
    ns_key = lambda s: f"{s / n * 1e9:.0f}"  # noqa: E731

    out = [f"# E8 k2v2 codec throughput, CPU, one thread\n",
           f"{cpu_name()}; {datetime.date.today()}; {os.cpu_count()} cores, load average {load:.2f} when run; "
           f"fastest of {a.reps} runs. {n} Gaussian keys (= {n // 16} blocks of 16 tokens) per head dim; GQA group of "
           f"{a.group} query heads.\n",
           "## Key encode (rotation + lattice + slot packing)\n",
           "| d | keys/s | ns/key | rotation ns/key | lattice ns/key (d/8 blocks) | ns per 8-dim block |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['d']} | {n / r['enc']:,.0f} | {ns_key(r['enc'])} | {ns_key(r['rot'])} | {ns_key(r['lat'])} | "
                   f"{r['lat'] / (n * r['d'] // 8) * 1e9:.0f} |")
    out += ["", f"## Scoring one decode step over {n} compressed keys (ms per kv-head)\n",
            "(B) decode-in-dot: each key decoded once (packed table expanded to base points + sign masks, SSE2 "
            "lanes), dotted with every query head of "
            "the group. (A) per-query tables: build (d/8 x 65,536 fp32 per query head) + gather; a group "
            f"needs {a.group} builds and {a.group} gathers.\n",
            f"| d | q rotation (us) | (B) 1 head | (B) {a.group} heads | (A) build / head | (A) gather / head | "
            f"(A) 1 head | (A) {a.group} heads | (A) table MiB / head | (B) ns/key/head | numpy f32 K q (dense, 1 thread) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a1 = r["build"] + r["gather"]
        out.append(f"| {r['d']} | {r['qrot'] * 1e6:.1f} | {ms(r['b1'])} | {ms(r['bg'])} | {ms(r['build'])} | "
                   f"{ms(r['gather'])} | {ms(a1)} | {ms(a.group * a1)} | {r['table_mib']:.0f} | "
                   f"{r['bg'] / a.group / n * 1e9:.1f} | {ms(r['blas'])} |")
    ratios = ", ".join(f"d = {r['d']}: {a.group * (r['build'] + r['gather']) / r['bg']:.1f}x" for r in rows)
    gather_vs_b = ", ".join(f"d = {r['d']}: {r['gather'] / r['b1']:.2f}" for r in rows)
    out += ["", f"(A) / (B) time for a group of {a.group} query heads: {ratios}. Even without its build, "
            f"(A)'s gather per key costs this much of (B)'s decode+dot for one head: {gather_vs_b}.",
            "", f"Scalar key tiles, d = 128, 1 query head over {n} keys: q8 {ms(sc['q8'])} ms, "
            f"KIVI-2 {ms(sc['kivi2'])} ms (host routines of scalar_codecs.cpp).", ""]
    text = "\n".join(out)
    print(text)
    pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
