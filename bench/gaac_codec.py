"""GAAC codec throughput on the CPU, one thread: GB/s of BF16 encoded and decoded.

    python bench/gaac_codec.py [--reps 7] [--tiles 4096]

Inputs, each a batch of 16-token tiles with their own bases:
  * real SmolLM2-135M KV (D = 64) and Gemma-3-270M KV (D = 128), post-RoPE keys and values over
    the first 1,024 tokens of Apache-2.0, bases calibrated on GPL-3 (tests/gaac_kv_capture.py;
    the first run computes the KV with the numpy reference forward, ~30 s, then it is cached);
  * synthetic tiles with the spec's H200 mix: ~90% 3-bit, ~10% 4-bit, ~0.3% raw groups (D = 128).
All tiles of each batch (8-24 MB of BF16, past L2) are timed in C++ by gaacrt._core.gaac_time_codec:
one pass each of gaac_encode_tile and gaac_decode_tile (the portable reference routines of
src/codec/gaac/gaac_format.h compiled for the host) and gaac_decode_tile_fast (gaac_host.cpp, the
SIMD byte interleave) over buffers allocated once; median of --reps passes after a warm-up pass.
Decode includes the tag validation each tile gets before its escapes are read. A numpy memcpy of
the same BF16 bytes is timed beside them. GB/s = BF16 bytes / seconds. Prints a markdown table and writes it to bench/results/gaac_codec.md, with the
codec ratios of the same data.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Not bench/ itself on the path: a bench script named like a stdlib module (e.g. tokenize.py) would
# shadow it for numpy's imports.
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

import argparse  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import gaacrt  # noqa: E402
from gaacrt import _core as C  # noqa: E402


def paired_medians(fns, reps):
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def real_tiles(model_name):
    """All tiles of the model's evaluation KV, with bases from a GPL-3 calibration."""
    from gaac_kv_capture import APACHE2, GPL3, capture_kv
    path = gaacrt.models.get(model_name)
    cal_kv, ev_kv = capture_kv(path, GPL3, 1024), capture_kv(path, APACHE2, 1024)
    info = C.GaacModelInfo.from_gguf(path)
    cal = C.GaacCalibrator(info)
    for il in range(info.n_layer):
        cal.add(il, False, cal_kv.k[il])
        cal.add(il, True, cal_kv.v[il])
    calib = cal.finish(1024)
    tiles, b3s, b4s = [], [], []
    for il in range(info.n_layer):
        for is_v, kv in ((False, ev_kv.k[il]), (True, ev_kv.v[il])):
            T, H, hd = kv.shape
            td = min(hd, 128)
            blocks = kv[:T // 16 * 16].reshape(T // 16, 16, H, hd // td, td).transpose(0, 2, 3, 1, 4)
            for h in range(H):
                for half in range(hd // td):
                    tiles.append(blocks[:, h, half])
                    n = blocks.shape[0]
                    b3s.append(np.tile(calib.bases(0, il, is_v, h)[half * td:(half + 1) * td], (n, 1)))
                    b4s.append(np.tile(calib.bases(1, il, is_v, h)[half * td:(half + 1) * td], (n, 1)))
    return np.concatenate(tiles), np.concatenate(b3s), np.concatenate(b4s)


def real_ratios(model_name):
    """Mode shares, codec and resident ratios of the evaluation KV (Apache-2.0) with a GPL-3
    calibration, for BF16 GAAC and the two FP8 variants (ratios of FP8 are against FP8 bytes)."""
    from gaac_kv_capture import APACHE2, GPL3, capture_kv
    path = gaacrt.models.get(model_name)
    cal_kv, ev_kv = capture_kv(path, GPL3, 1024), capture_kv(path, APACHE2, 1024)
    info = C.GaacModelInfo.from_gguf(path)
    rows = []
    for element in ("bf16", "fp8_e4m3", "fp8_e5m2"):
        if element == "bf16":
            cal = C.GaacCalibrator(info)
            steps, measure = (cal.add,), C.gaac_measure
        else:
            cal = C.GaacFp8Calibrator(info, element)
            steps, measure = (cal.add_amax, cal.add), C.gaac_fp8_measure
        for step in steps:
            for il in range(info.n_layer):
                step(il, False, cal_kv.k[il])
                step(il, True, cal_kv.v[il])
        calib = cal.finish(1024)
        on_cal, ev = [C.GaacStats(), C.GaacStats()], [C.GaacStats(), C.GaacStats()]
        for il in range(info.n_layer):
            for is_v, (a, b) in enumerate(((cal_kv.k[il], ev_kv.k[il]), (cal_kv.v[il], ev_kv.v[il]))):
                measure(calib, il, bool(is_v), a, on_cal[is_v])
                measure(calib, il, bool(is_v), b, ev[is_v])
        calib.set_capacities_from(on_cal[0], on_cal[1])
        for is_v, st in enumerate(ev):
            cap = calib.capacity(bool(is_v))
            rows.append((model_name, element, "KV"[is_v], st.exponent_entropy(), *(100 * st.group_share(m) for m in range(3)),
                         st.codec_ratio(), cap, st.resident_ratio(cap), st.tiles_over(cap), st.tiles))
    return rows


def synthetic_tiles(n, d=128, seed=0):
    rng = np.random.default_rng(seed)
    b3 = rng.integers(110, 125, (n, d))
    b4 = b3 - 4
    # Per group: 10% 4-bit (one element 8..11 above b3), 0.3% raw (one element far away).
    e = b3[:, None, :] + rng.integers(0, 8, (n, 16, d))
    g = rng.random((n, 16, d // 8))
    e4 = np.repeat(g < 0.10, 8, axis=2) & (rng.integers(0, 8, (n, 16, d)) == 0)
    er = np.repeat(g > 0.997, 8, axis=2) & (rng.integers(0, 8, (n, 16, d)) == 0)
    e = np.where(e4, b3[:, None, :] + 8 + rng.integers(0, 4, e.shape), e)
    e = np.where(er, 30, e)
    bits = ((rng.integers(0, 2, e.shape) << 15) | (e << 7) | rng.integers(0, 128, e.shape)).astype(np.uint16)
    return bits, b3.astype(np.uint8), b4.astype(np.uint8)


def repeat_to(arrs, n):
    reps = -(-n // len(arrs[0]))
    return [np.ascontiguousarray(np.concatenate([a] * reps)[:n]) for a in arrs]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tiles", type=int, default=0, help="repeat or cut each input to this many tiles (0: as is)")
    ap.add_argument("--no-real", action="store_true", help="synthetic tiles only (no model forward)")
    args = ap.parse_args()

    inputs = []
    if not args.no_real:
        inputs.append(("SmolLM2-135M real KV", *real_tiles("smollm2-135m")))
        inputs.append(("Gemma-3-270M real KV", *real_tiles("gemma3-270m")))
    inputs.append(("synthetic 90/10/0.3 %", *synthetic_tiles(4096)))

    rows = []
    for name, tiles, b3, b4 in inputs:
        if args.tiles:
            tiles, b3, b4 = repeat_to([tiles, b3, b4], args.tiles)
        d = tiles.shape[-1]
        fmt = C.gaac_format(d)
        cap = fmt["max_escape_bytes"]
        esc, slots = C.gaac_encode_tiles(tiles, b3, b4, cap)
        assert (esc >= 0).all()
        assert np.array_equal(C.gaac_decode_tiles(slots, d, b3, b4, cap), tiles), "decode mismatch"
        assert np.array_equal(C.gaac_decode_tiles(slots, d, b3, b4, cap, fast=True), tiles), "fast decode mismatch"
        modes = np.array([C.gaac_tile_modes(s, d)[:3] for s in slots[:len(slots)]]).sum(axis=0)
        ratio = tiles.nbytes / (len(tiles) * fmt["fixed_bytes"] + esc.sum())
        dst = np.empty_like(tiles)
        t = C.gaac_time_codec(tiles, b3, b4, cap, args.reps)
        t_enc, t_dec, t_fast = t["encode_s"], t["decode_s"], t["decode_fast_s"]
        (t_cpy,) = paired_medians([lambda: np.copyto(dst, tiles)], args.reps)
        gb = tiles.nbytes / 1e9
        share = modes / modes.sum()
        rows.append((name, d, len(tiles), gb * 1e3, 100 * share[0], 100 * share[1], 100 * share[2], ratio,
                     gb / t_enc, gb / t_dec, gb / t_fast, gb / t_cpy))

    isa = C.gaac_decode_tile_fast_isa()
    head = ("| input | D | tiles | MB BF16 | 3-bit % | 4-bit % | raw % | codec ratio | encode GB/s | "
            f"decode GB/s (reference) | decode GB/s (fast, {isa}) | memcpy GB/s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]:.4f} | "
                   f"{r[8]:.2f} | {r[9]:.2f} | {r[10]:.2f} | {r[11]:.2f} |\n" for r in rows)
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = (f"# GAAC codec throughput, CPU, one thread\n\n{cpu}, {os.cpu_count()} cores, load average "
            f"{load:.1f} at the end of the run (a shared machine: compare columns of one run, e.g. with "
            f"memcpy); {time.strftime('%Y-%m-%d')}; "
            f"median of {args.reps}. Encode and the reference decode: the portable routines of gaac_format.h; "
            f"fast decode: gaac_decode_tile_fast (gaac_host.cpp). Both decoders validate each tile's tags first "
            f"and produce the same bits.\n\n"
            + head + body)
    if not args.no_real:
        ratio_rows = real_ratios("smollm2-135m") + real_ratios("gemma3-270m")
        text += ("\n## Ratios on real KV (calibrated on GPL-3, evaluated on Apache-2.0, 1,024 tokens)\n\n"
                 "Modes: BF16 3-bit/4-bit/raw; FP8 2-bit/3-bit/raw. FP8 ratios are against FP8 bytes (x2 for "
                 "BF16). C = escape capacity minimizing expected resident bytes on the calibration text; "
                 "resident = BF16 (FP8) bytes / (slots + raw tiles + 4-byte table entries).\n\n"
                 "| model | element | K/V | exp. entropy | narrow % | wide % | raw % | codec ratio | C | "
                 "resident ratio | raw tiles |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        text += "".join(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | "
                        f"{r[7]:.4f} | {r[8]} | {r[9]:.4f} | {r[10]}/{r[11]} |\n" for r in ratio_rows)
    print(text)
    out = ROOT / "bench" / "results" / "gaac_codec.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
