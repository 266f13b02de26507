"""Which mode set for GAAC on FP8 KV? The codec ratio of every candidate {w0-bit, w1-bit, raw} set on
real KV (shared/spec/gaac.md "FP8 variants": the implementation picks the set by measurement).

    python bench/gaac_fp8_modes.py

For SmolLM2-135M and Gemma-3-270M: post-RoPE K and V over the first 1,024 tokens of GPL-3
(calibration) and Apache-2.0 (evaluation), tests/gaac_kv_capture.py. Values are quantized to
E4M3 / E5M2 with gaacrt's converter and the per-(layer, K|V, kv-head) scale of the codec
(2 x the calibration's largest magnitude / FP8 max); per channel, the calibration picks the
lowest 2^w0- and 2^w1-wide exponent windows covering the most values; each group of 8 channels of
the evaluation KV takes the narrowest mode holding all 8. Bytes per group, as the tile format counts
them: 8 kept sign+mantissa fields, 8 low w0-bit codes, a 2-bit tag, plus w1 - w0 escape bytes for a
mode-1 group and E - w0 for a raw one. Ratio = FP8 bytes / those bytes. (The chosen set, {2, 3, raw},
is what src/codec/gaac/gaac_fp8_format.h implements; its measured ratios are in
bench/results/gaac_codec.md.) Writes bench/results/gaac_fp8_modes.md.
"""
import itertools
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

import gaacrt  # noqa: E402
from gaac_kv_capture import APACHE2, GPL3, capture_kv  # noqa: E402
from gaacrt import _core as C  # noqa: E402

FORMATS = {"e4m3": (4, 3), "e5m2": (5, 2)}   # exponent bits, mantissa bits


def fp8_exponents(kind, bf16, amax_source):
    E, M = FORMATS[kind]
    x = (bf16.astype(np.uint32) << 16).view(np.float32)
    ref = (amax_source.astype(np.uint32) << 16).view(np.float32)
    amax = np.abs(ref).max(axis=(0, 2))                          # per kv-head
    scale = np.where(amax > 0, 2.0 * amax / C.gaac_fp8_format(kind, 64)["max"], 1.0).astype(np.float32)
    q = C.gaac_fp8_from_f32(kind, np.ascontiguousarray(x / scale[None, :, None])).reshape(x.shape)
    return (q >> M) & ((1 << E) - 1)


def windows(exps, E, w):
    """Lowest 2^w-wide window start per (head, channel) covering the most calibration values."""
    W = 1 << w
    T, H, hd = exps.shape
    hist = np.stack([(exps == v).sum(0) for v in range(1 << E)], -1)          # (H, hd, 2^E)
    cs = np.concatenate([np.zeros((H, hd, 1)), np.cumsum(hist, -1)], -1)
    return np.argmax(cs[:, :, W:] - cs[:, :, :-W], -1)                        # argmax: lowest on ties


def main():
    lines = ["# FP8 + GAAC: codec ratio of each candidate mode set\n",
             "Ratio = FP8 bytes / bytes used (see bench/gaac_fp8_modes.py); calibrated on GPL-3, evaluated on "
             "Apache-2.0, 1,024 tokens, K and V together. Mode shares in %.\n",
             "| model | format | mode set | ratio | narrow % | wide % | raw % |", "|---|---|---|---|---|---|---|"]
    for model in ("smollm2-135m", "gemma3-270m"):
        path = gaacrt.models.get(model)
        cal, ev = capture_kv(path, GPL3, 1024), capture_kv(path, APACHE2, 1024)
        for kind, (E, M) in FORMATS.items():
            pairs = []
            for il in range(len(cal.k)):
                for a, b in ((cal.k[il], ev.k[il]), (cal.v[il], ev.v[il])):
                    pairs.append((fp8_exponents(kind, a, a), fp8_exponents(kind, b, a)))
            results = []
            for w0, w1 in itertools.combinations(range(1, E), 2):
                used = total = 0
                modes = np.zeros(3)
                for ec, ee in pairs:
                    T, H, hd = ee.shape
                    g = ee.reshape(T, H, hd // 8, 8).astype(np.int64)
                    b0 = windows(ec, E, w0).reshape(1, H, hd // 8, 8)
                    b1 = windows(ec, E, w1).reshape(1, H, hd // 8, 8)
                    in0 = ((g >= b0) & (g - b0 < (1 << w0))).all(-1)
                    in1 = ((g >= b1) & (g - b1 < (1 << w1))).all(-1)
                    m = np.array([in0.sum(), (~in0 & in1).sum(), (~in0 & ~in1).sum()])
                    modes += m
                    total += m.sum() * 8
                    used += m.sum() * ((8 * (1 + M) + 8 * w0 + 2) / 8) + m[1] * (w1 - w0) + m[2] * (E - w0)
                share = 100 * modes / modes.sum()
                results.append((total / used, w0, w1, share))
            for ratio, w0, w1, share in sorted(results, reverse=True):
                lines.append(f"| {model} | {kind} | {{{w0}, {w1}, raw}} | {ratio:.4f} | {share[0]:.1f} | {share[1]:.1f} | "
                             f"{share[2]:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "bench" / "results" / "gaac_fp8_modes.md").write_text(text)


if __name__ == "__main__":
    main()
