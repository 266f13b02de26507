"""The GAAC tile format of issue 5 (shared/spec/gaac.md, src/codec/gaac/gaac_format.h) through its
bindings: round trips, the documented byte layout, corrupt tiles, and the C++ units (ASan) and the
CUDA probe's kernels (CPU emulation). Calibration, sidecar and real-KV ratios:
tests/test_gaac_calibration.py; FP8: tests/test_gaac_fp8.py.

Lossless means every BF16 bit pattern comes back bit for bit, whatever the calibration: the
pattern tests force each mode by construction (bases put where each exponent must land in the
3-bit window, in the 4-bit window only, or in neither) and add adversarial bases (0, 248, 255,
windows holding no data, random).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gaacrt
from gaacrt import _core as C

DIMS = [64, 128]
TOKENS = 16
ROOT = Path(__file__).resolve().parents[1]
ALL_BF16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def exps(bits):
    return (bits.astype(np.uint32) >> 7) & 0xFF


def encode(raw, b3, b4, capacity=None):
    d = raw.shape[-1]
    cap = C.gaac_format(d)["max_escape_bytes"] if capacity is None else capacity
    esc, slots = C.gaac_encode_tiles(np.ascontiguousarray(raw), np.ascontiguousarray(b3, dtype=np.uint8),
                                     np.ascontiguousarray(b4, dtype=np.uint8), cap)
    return esc, slots, cap


def modes(slots, d):
    return np.array([C.gaac_tile_modes(s, d) for s in slots])


def pattern_tiles(d):
    """All 65,536 patterns as tiles whose channel columns each hold 16 patterns of ONE exponent,
    so per-tile bases can put every exponent exactly where a test wants it. Returns (tiles uint16
    (n, 16, d), column exponent (n, d))."""
    order = np.argsort(exps(ALL_BF16), kind="stable")       # 256 patterns per exponent, grouped
    cols = ALL_BF16[order].reshape(-1, TOKENS)              # (4096, 16): one exponent per column
    rng = np.random.default_rng(d)
    cols = cols[rng.permutation(len(cols))]                 # mix exponents across tiles
    tiles = cols.reshape(-1, d, TOKENS).transpose(0, 2, 1)  # (n, 16, d)
    return np.ascontiguousarray(tiles), exps(tiles[:, 0, :])


def check_roundtrip(tiles, b3, b4, capacity=None):
    d = tiles.shape[-1]
    esc, slots, cap = encode(tiles, b3, b4, capacity)
    assert (esc >= 0).all()
    back = C.gaac_decode_tiles(slots, d, b3, b4, cap)
    assert np.array_equal(back, tiles), "decode is not bit-identical"
    fast = C.gaac_decode_tiles(slots, d, b3, b4, cap, fast=True)
    assert np.array_equal(fast, tiles), f"the fast ({C.gaac_decode_tile_fast_isa()}) decode is not bit-identical"
    m = modes(slots, d)
    assert np.array_equal(m[:, 1] + 5 * m[:, 2], esc), "escape bytes != 1 per 4-bit + 5 per raw group"
    for i in range(0, len(tiles), max(1, len(tiles) // 4)):  # rows and the validator on a sample
        for t in (0, 5, 10, 15):
            assert np.array_equal(C.gaac_decode_row(slots[i], d, b3[i], b4[i], cap, t), tiles[i, t])
        assert C.gaac_validate(slots[i], d, cap, int(esc[i])) == ("ok", 0)
    return esc, slots, m


# ---- every pattern, every mode --------------------------------------------------------------

@pytest.mark.parametrize("d", DIMS)
def test_gaac_roundtrips_every_bf16_pattern_in_3bit_mode(d):
    tiles, e = pattern_tiles(d)
    rng = np.random.default_rng(1)
    b3 = np.maximum(e.astype(np.int64) - rng.integers(0, 8, e.shape), 0).astype(np.uint8)  # e in [b3, b3+7]
    b4 = rng.integers(0, 256, e.shape).astype(np.uint8)
    _, _, m = check_roundtrip(tiles, b3, b4)
    assert m[:, 0].sum() == tiles.size // 8, "every group must be 3-bit"


@pytest.mark.parametrize("d", DIMS)
def test_gaac_roundtrips_every_bf16_pattern_in_4bit_mode(d):
    tiles, e = pattern_tiles(d)
    rng = np.random.default_rng(2)
    e = e.astype(np.int64)
    # b3 just above e (the difference wraps negative) or, for e = 255, at least 8 below.
    b3 = np.where(e < 255, np.minimum(e + 1 + rng.integers(0, 8, e.shape), 255), rng.integers(0, 248, e.shape))
    b4 = np.maximum(e - rng.integers(0, 16, e.shape), 0)    # e in [b4, b4+15]
    _, _, m = check_roundtrip(tiles, b3.astype(np.uint8), b4.astype(np.uint8))
    assert m[:, 1].sum() == tiles.size // 8, "every group must be 4-bit"


@pytest.mark.parametrize("d", DIMS)
def test_gaac_roundtrips_every_bf16_pattern_in_raw_mode(d):
    tiles, e = pattern_tiles(d)
    e = e.astype(np.int64)
    outside = np.where(e < 255, e + 1, 0).astype(np.uint8)  # above e, or 0 for e = 255 (255 - 0 > 15)
    _, _, m = check_roundtrip(tiles, outside, outside)
    assert m[:, 2].sum() == tiles.size // 8, "every group must be raw"


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("b3,b4", [(0, 0), (248, 240), (248, 0), (0, 240), (255, 255), (128, 64)])
def test_gaac_roundtrips_every_bf16_pattern_with_constant_bases(d, b3, b4):
    # Bases at the ends of the range; windows that hold none of most tiles' exponents; all
    # patterns shuffled so groups mix exponents from everywhere.
    rng = np.random.default_rng(b3 * 256 + b4)
    tiles = np.ascontiguousarray(rng.permutation(ALL_BF16).reshape(-1, TOKENS, d))
    n = len(tiles)
    _, _, m = check_roundtrip(tiles, np.full((n, d), b3, np.uint8), np.full((n, d), b4, np.uint8))
    assert m[:, 3].sum() == 0


@pytest.mark.parametrize("d", DIMS)
def test_gaac_roundtrips_every_bf16_pattern_with_random_bases(d):
    rng = np.random.default_rng(7)
    tiles = np.ascontiguousarray(rng.permutation(ALL_BF16).reshape(-1, TOKENS, d))
    b3 = rng.integers(0, 256, (len(tiles), d)).astype(np.uint8)
    b4 = rng.integers(0, 256, (len(tiles), d)).astype(np.uint8)
    check_roundtrip(tiles, b3, b4)


@pytest.mark.parametrize("d", DIMS + [8, 32, 96])
def test_gaac_random_tiles_with_mixed_modes_roundtrip_and_count_escapes(d):
    # Tiles like real KV: most exponents inside the 3-bit window, some in the 4-bit one, a few
    # anywhere; specials (±0, ±Inf, NaN payloads, subnormals) sprinkled in.
    rng = np.random.default_rng(d)
    n = 64
    b3 = rng.integers(100, 130, (n, d))
    b4 = b3 - rng.integers(0, 8, (n, d))
    r = rng.random((n, TOKENS, d))
    e = np.where(r < 0.97, b3[:, None, :] + rng.integers(0, 8, r.shape),
                 np.where(r < 0.995, b4[:, None, :] + rng.integers(0, 16, r.shape), rng.integers(0, 256, r.shape)))
    bits = ((rng.integers(0, 2, r.shape) << 15) | (e << 7) | rng.integers(0, 128, r.shape)).astype(np.uint16)
    special = rng.random(r.shape) < 0.002
    bits[special] = rng.choice(np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0xFFFF, 0x0001, 0x807F],
                                        dtype=np.uint16), special.sum())
    b3, b4 = b3.astype(np.uint8), b4.astype(np.uint8)
    esc, slots, m = check_roundtrip(bits, b3, b4)
    assert m[:, 0].sum() and m[:, 1].sum() and m[:, 2].sum(), "the test must mix all three modes"
    # Capacity exactly the escapes needed fits; one byte less does not, and writes nothing.
    i = int(np.argmax(esc))
    e_fit, s_fit, _ = encode(bits[i:i + 1], b3[i], b4[i], int(esc[i]))
    assert e_fit[0] == esc[i] and np.array_equal(C.gaac_decode_tiles(s_fit, d, b3[i], b4[i], int(esc[i]))[0], bits[i])
    e_no, s_no, _ = encode(bits[i:i + 1], b3[i], b4[i], int(esc[i]) - 1)
    assert e_no[0] == -1 and not s_no.any()


def test_gaac_slot_geometry_matches_the_spec_table():
    f128, f64 = C.gaac_format(128), C.gaac_format(64)
    assert f128["fixed_bytes"] == 2048 + 768 + 64 == 2880 and f128["raw_tile_bytes"] == 4096
    assert f64["fixed_bytes"] == 1024 + 384 + 32 == 1440 and f64["raw_tile_bytes"] == 2048
    assert f128["lanes"] == 32 and f64["lanes"] == 16
    for f in (f128, f64):   # every stream starts 16-byte aligned (one vector load per lane)
        assert all(f[k] % 16 == 0 for k in ("codes_a_offset", "codes_b_offset", "tags_offset", "fixed_bytes"))
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.gaac_format(100)
    assert ei.value.kind == "bad_tile_dim"


def test_gaac_tile_layout_is_the_documented_one():
    # Read one tile byte by byte following the header comment, independently of the C++ decoder.
    d, G, L = 128, 16, 32
    rng = np.random.default_rng(3)
    b3 = rng.integers(110, 120, d).astype(np.uint8)
    b4 = (b3 - 4).astype(np.uint8)
    e = b3[None, :] + rng.integers(0, 8, (TOKENS, d))
    e[3, 8:16] = b4[8:16] + [12, 3, 15, 8, 0, 9, 4, 11]   # one 4-bit group: token 3, channels 8..15
    e[6, 0:8] = [250, 3, 160, 7, 128, 255, 0, 200]        # one raw group: token 6, channels 0..7
    tile = ((rng.integers(0, 2, (TOKENS, d)) << 15) | (e << 7) | rng.integers(0, 128, (TOKENS, d))).astype(np.uint16)
    esc, slots, cap = encode(tile[None], b3, b4)
    s = slots[0]
    assert esc[0] == 1 + 5
    sm = ((tile >> 8) & 0x80) | (tile & 0x7F)
    for l in range(L):
        g, h = l % G, l // G
        words = [int.from_bytes(s[2048 + 16 * l + 4 * k:2048 + 16 * l + 4 * k + 4], "little") for k in range(4)]
        words += [int.from_bytes(s[2560 + 8 * l + 4 * k:2560 + 8 * l + 4 * k + 4], "little") for k in range(2)]
        tags = int.from_bytes(s[2816 + 2 * l:2818 + 2 * l], "little")
        for j in range(8):
            t = 4 * (j // 2) + 2 * h + j % 2
            off = 16 * ((j // 2) * L + l) + 8 * (j % 2)
            assert np.array_equal(s[off:off + 8], sm[t, 8 * g:8 * g + 8])
            tag = (tags >> (2 * j)) & 3
            assert tag == (1 if (t, g) == (3, 1) else 2 if (t, g) == (6, 0) else 0)
            A, B, Cw = words[3 * (j // 4):3 * (j // 4) + 3]
            for m in range(8):
                n = 8 * (j % 4) + m
                if n < 24:
                    low = ([A, B, Cw][n // 8] >> (8 * (n % 4) + 3 * ((n // 4) % 2))) & 7
                elif n < 28:
                    low = ((A >> (8 * (n - 24) + 6)) & 3) | (((B >> (8 * (n - 24) + 6)) & 1) << 2)
                else:
                    low = ((Cw >> (8 * (n - 28) + 6)) & 3) | (((B >> (8 * (n - 28) + 7)) & 1) << 2)
                base = [b3, b4, np.zeros(d, np.uint8)][tag][8 * g + m]
                assert low == ((int(e[t, 8 * g + m]) - int(base)) & 7)
    # Escapes in group order q = 8*lane + j: the raw group (t=6, g=0) is lane 16's, the 4-bit
    # group (t=3, g=1) lane 17's, so the X stream is [raw's X byte, 4-bit's X byte], then the
    # raw group's 4-byte R record.
    c_raw = [int(x) for x in e[6, 0:8]]
    c_4 = [int(e[3, 8 + m]) - int(b4[8 + m]) for m in range(8)]
    x_byte = lambda codes: sum(((c >> 3) & 1) << m for m, c in enumerate(codes))  # noqa: E731
    assert list(s[2880:2882]) == [x_byte(c_raw), x_byte(c_4)]
    assert list(s[2882:2886]) == [(c_raw[b] >> 4) | ((c_raw[b + 4] >> 4) << 4) for b in range(4)]


# ---- corruption ---------------------------------------------------------------------------------

def _real_like_slot(d=128, seed=0):
    rng = np.random.default_rng(seed)
    b3 = np.full(d, 120, np.uint8)
    b4 = np.full(d, 116, np.uint8)
    e = 120 + rng.integers(0, 8, (TOKENS, d))
    e[rng.random((TOKENS, d)) < 0.01] = 130
    e[0, 0] = 3
    tile = ((e << 7) | rng.integers(0, 128, (TOKENS, d))).astype(np.uint16)
    esc, slots, _ = encode(tile[None], b3, b4, 256)
    return slots[0].copy(), b3, b4, int(esc[0])


@pytest.mark.parametrize("d", DIMS)
def test_gaac_reserved_tag_3_is_reported_by_validator_and_decoder(d):
    slot, b3, b4, esc = _real_like_slot(d)
    tags_off = C.gaac_format(d)["tags_offset"]
    lane, j = 5, 3
    slot[tags_off + 2 * lane + (2 * j) // 8] |= 3 << ((2 * j) % 8)
    assert C.gaac_validate(slot, d, 256) == ("bad_tag", 8 * lane + j)
    for call in (lambda: C.gaac_decode_tiles(slot[None], d, b3, b4, 256),
                 lambda: C.gaac_decode_tiles(slot[None], d, b3, b4, 256, fast=True),
                 lambda: C.gaac_decode_row(slot, d, b3, b4, 256, 0)):
        with pytest.raises(gaacrt.GaacrtError) as ei:
            call()
        assert ei.value.kind == "bad_tag"


@pytest.mark.parametrize("d", DIMS)
def test_gaac_escape_overrun_is_reported_not_read(d):
    slot, b3, b4, esc = _real_like_slot(d)
    tags_off = C.gaac_format(d)["tags_offset"]
    # Every group raw: 5 bytes x 2d groups, far past a 256-byte capacity.
    slot[tags_off:tags_off + d // 2] = 0xAA
    assert C.gaac_validate(slot, d, 256) == ("escape_overrun", 10 * d)
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.gaac_decode_tiles(slot[None], d, b3, b4, 256)
    assert ei.value.kind == "escape_overrun"
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.gaac_decode_tiles(slot[None], d, b3, b4, 256, fast=True)
    assert ei.value.kind == "escape_overrun"


def test_gaac_truncated_escapes_and_mismatched_counts_are_reported():
    d = 128
    slot, b3, b4, esc = _real_like_slot(d)
    fixed = C.gaac_format(d)["fixed_bytes"]
    assert esc > 0
    assert C.gaac_validate(slot[:fixed + esc], d, 256, esc) == ("ok", 0)
    assert C.gaac_validate(slot[:fixed + esc - 1], d, 256) == ("truncated", fixed + esc)
    assert C.gaac_validate(slot[:fixed - 1], d, 256) == ("truncated", fixed)
    assert C.gaac_validate(slot, d, 256, esc + 1) == ("escape_mismatch", esc)
    with pytest.raises(gaacrt.GaacrtError) as ei:   # the decoder wants the whole slot
        C.gaac_decode_tiles(slot[None, :fixed + 10], d, b3, b4, 256)
    assert ei.value.kind == "truncated"


@pytest.mark.parametrize("d", DIMS)
def test_gaac_random_bytes_are_rejected_or_decoded_never_crash(d):
    rng = np.random.default_rng(11)
    cap = 128
    b = rng.integers(0, 256, d).astype(np.uint8)
    seen = set()
    for i in range(300):
        slot = rng.integers(0, 256, C.gaac_format(d)["fixed_bytes"] + cap).astype(np.uint8)
        t = C.gaac_format(d)["tags_offset"]
        if i % 3 == 0:    # valid tags: k raw groups (5 escape bytes each) that may or may not fit
            tags = np.zeros(d // 2, np.uint8)
            tags[rng.permutation(d // 2)[:rng.integers(0, d // 2)]] = 0x02
            slot[t:t + d // 2] = tags
        elif i % 3 == 1:  # the same with one reserved tag somewhere
            slot[t:t + d // 2] = rng.choice(np.array([0x00, 0x00, 0x01, 0x40], np.uint8), d // 2)
            slot[t + rng.integers(0, d // 2)] |= 0x0C
        status, _ = C.gaac_validate(slot, d, cap)
        seen.add(status)
        if status == "ok":
            assert C.gaac_decode_tiles(slot[None], d, b, b, cap).shape == (1, TOKENS, d)
        else:
            with pytest.raises(gaacrt.GaacrtError):
                C.gaac_decode_tiles(slot[None], d, b, b, cap)
    assert {"ok", "bad_tag", "escape_overrun"} <= seen


def test_gaac_cpp_units_pass_under_address_sanitizer(tmp_path):
    """tests/cpp/test_gaac_format.cpp built with -fsanitize=address,undefined: every pattern in
    every mode, and corrupt slots at the end of exactly-sized heap buffers (a read past
    fixed + capacity aborts the program)."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    exe = tmp_path / "gaac_asan"
    src = [ROOT / "tests/cpp/test_main.cpp", ROOT / "tests/cpp/test_gaac_format.cpp", ROOT / "src/common/error.cpp",
           ROOT / "src/codec/gaac/gaac_host.cpp"]
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                            "-fno-omit-frame-pointer", "-ffp-contract=off", f"-I{ROOT / 'src'}",
                            f"-I{ROOT / 'tests/cpp'}", *map(str, src), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe), "gaac_"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[ ok ] gaac_corrupt_slots_are_reported_and_never_read_out_of_bounds" in run.stdout
    assert "7 test cases, 0 failed" in run.stdout


def test_gaac_cuda_probe_kernels_are_right_when_emulated_on_the_cpu(tmp_path):
    """bench/gaac_layout_probe.cu's kernels, run by bench/gaac_layout_probe_host.cpp with each warp as
    32 lockstep threads (under ASan/UBSan): every value the GAAC loader rebuilds, the sums and the
    q·k scores must be right before the probe spends GPU time."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    exe = tmp_path / "probe_host"
    build = subprocess.run([cxx, "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=address,undefined",
                            "-fno-sanitize-recover=all", "-Wno-unknown-pragmas",
                            str(ROOT / "bench/gaac_layout_probe_host.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "probe host emulation: 6 passed, 0 failed" in run.stdout


def test_gaac_cuda_lane_decode_is_bit_exact_on_the_cpu(tmp_path):
    """backends/cuda/kernels/gaac_lane.cuh (the attention kernel's per-lane decode: X bytes by PRMT,
    bases by mask, raw groups repaired in a rare loop), compiled for the host by
    bench/gaac_lane_host.cpp under ASan/UBSan: every value of 1440 mixed-mode tiles (tile dims
    8..128, all-3-bit to every-exponent-random) must come back bit for bit."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    exe = tmp_path / "lane_host"
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                            "-Wno-unknown-pragmas", f"-I{ROOT / 'src'}", f"-I{ROOT / 'backends'}",
                            str(ROOT / "bench/gaac_lane_host.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "gaac lane decode: 1440 tiles, 0 wrong" in run.stdout
