"""Reader of the E8 test vectors and an independent numpy build of the E8P12 codebook
(spec/e8.md §1-§2), used by tests/test_e8_*.py to check the C++ codec against the spec's own
numbers rather than against itself. tests/data/e8_testvectors.txt is a verbatim copy of
shared/spec/e8_testvectors.txt (deterministic vectors written by the spec's numpy prototype).
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np

VECTORS = Path(__file__).resolve().parent / "data" / "e8_testvectors.txt"

BIT2DIM = [0, 2, 4, 6, 1, 3, 5, 7]
PADS = [{1, 2, 3}, {0, 2, 3}, {0, 1, 3}, {0, 1, 2}, {3, 6, 7}, {3, 5, 7}, {3, 4, 7}, {3, 5, 6}, {3, 4, 6}, {3, 4, 5},
        {2, 6, 7}, {2, 5, 7}, {2, 4, 7}, {2, 5, 6}, {2, 4, 6}, {2, 4, 5}, {1, 6, 7}, {1, 5, 7}, {1, 4, 7}, {1, 5, 6},
        {1, 4, 6}, {0, 4, 5}, {0, 6, 7}, {0, 5, 7}, {0, 4, 7}, {0, 5, 6}, {0, 4, 6}, {0, 1, 4}, {2, 3, 7}]


def prototypes() -> np.ndarray:
    """S: (256, 8) float64, rows 0..226 the norm<=10 ball in lexicographic order, then the pads."""
    ball = sorted(v for v in itertools.product([0.5, 1.5, 2.5], repeat=8) if sum(x * x for x in v) <= 10)
    pads = [tuple(0.5 if i in p else 1.5 for i in range(8)) for p in PADS]
    return np.array(ball + pads)


def base_points(S: np.ndarray) -> np.ndarray:
    """a': coordinate 7 negated where the coordinate sum is odd."""
    A = S.copy()
    A[S.sum(1).astype(int) % 2 == 1, 7] *= -1
    return A


def packed_words(S: np.ndarray) -> np.ndarray:
    A = base_points(S)
    w = np.zeros(256, np.uint64)
    for k in range(8):
        w |= (2 * A[:, BIT2DIM[k]] + 8).astype(np.uint64) << np.uint64(4 * k)
    return w.astype(np.uint32)


def grid() -> np.ndarray:
    """All 65,536 codewords in code order, float64 (65536, 8), built from the §2 rule directly."""
    A = base_points(prototypes())
    s = np.arange(256)
    parity = np.array([bin(x).count("1") & 1 for x in s])
    e = s ^ parity
    flips = np.stack([(e >> bit) & 1 for bit in range(8)], 1)          # (256, 8) by bit
    eps = np.ones((256, 8))
    for b in range(8):
        eps[:, BIT2DIM[b]] = np.where(flips[:, b] == 1, -1.0, 1.0)
    shift = np.where(parity == 1, -0.25, 0.25)
    g = A[:, None, :] * eps[None, :, :] + shift[None, :, None]          # (a, s, 8)
    return g.reshape(65536, 8)


def _floats(hexwords: str) -> np.ndarray:
    return np.array([int(h, 16) for h in hexwords.split()], np.uint32).view(np.float32)


def parse() -> dict:
    text = VECTORS.read_text()
    out: dict = {"blocks": [], "decode": {}, "checksums": {}}
    for name, value in re.findall(r"^(\w+) \(.*?\) sha256\[:16\] = (\w+)", text, re.M):
        out["checksums"][name] = value
    m = re.search(r"packed_abs_u32\[0\.\.7\]\s+= (.*)", text)
    out["packed_head"] = [int(x, 16) for x in m.group(1).split()]
    m = re.search(r"packed_abs_u32\[248\.\.255\] = (.*)", text)
    out["packed_tail"] = [int(x, 16) for x in m.group(1).split()]
    out["abs_rows"] = {int(i): [float(x) for x in v.split(",")]
                       for i, v in re.findall(r"^abs_table\[(\d+)\] = \[(.*?)\]", text, re.M)}
    for code, vals in re.findall(r"^decode\((0x[0-9a-f]+)\) x4 = \[(.*?)\]", text, re.M):
        out["decode"][int(code, 16)] = [int(x) for x in vals.split(",")]
    for tag in re.findall(r"^\[(\w\d+)\] x_bits", text, re.M):
        blk = {"tag": tag}
        blk["x"] = _floats(re.search(rf"^\[{tag}\] x_bits = (.*)", text, re.M).group(1))
        m = re.search(rf"^\[{tag}\] code=(0x[0-9a-f]+)", text, re.M)
        blk["code"] = int(m.group(1), 16)
        blk["g4"] = [int(x) for x in re.search(rf"^\[{tag}\] 4\*g\s+=(.*)", text, re.M).group(1).split()]
        m = re.search(rf"^\[{tag}\] err2=(\S+) margin_to_2nd=(\S+)", text, re.M)
        blk["err2"], blk["margin"] = float(m.group(1)), float(m.group(2))
        out["blocks"].append(blk)
    key = {}
    for name in ("k", "q"):
        rows = re.findall(rf"^{name}_bits\[\s*\d+:\s*\d+\] = (.*)", text, re.M)
        key[name] = np.concatenate([_floats(r) for r in rows])
    key["alpha"] = float(re.search(r"alpha = ([\d.]+)", text).group(1))
    m = re.search(r"^norm \(float32\) = (\S+)\s+bits=(\w+)", text, re.M)
    key["norm"], key["norm_bits"] = float(m.group(1)), int(m.group(2), 16)
    key["codes"] = [int(c, 16) for c in re.search(r"^codes\s+= (.*)", text, re.M).group(1).split()]
    m = re.search(r"score <q, k_hat> dense = (\S+)\s+via LUT = (\S+)\s+exact <q,k> = (\S+)", text)
    key["score_dense"], key["score_lut"], key["score_exact"] = map(float, m.groups())
    key["cos"] = float(re.search(r"^cos\(k, k_hat\) = (\S+)", text, re.M).group(1))
    m = re.search(r"^k sha256\[:16\] \(float32 LE\) = (\w+); q sha256\[:16\] = (\w+)", text, re.M)
    key["k_sha"], key["q_sha"] = m.groups()
    out["key"] = key
    return out
