"""GAAC calibration (shared/spec/gaac.md "Calibration", "Slots", "Reference figures";
src/codec/gaac/calibration.h): window and capacity choice, statistics, the model identity and the
model.gaac sidecar, and the ratios on real SmolLM2 / Gemma-3 KV (calibrated on GPL-3, evaluated on
Apache-2.0, first 1,024 tokens each) against the spec's reference figures.
"""
from __future__ import annotations

import numpy as np
import pytest

import gaacrt
from gaac_kv_capture import APACHE2, GPL3, capture_kv
from gaacrt import _core as C


# ---- calibration math ------------------------------------------------------------------------

def _hist(pairs):
    h = np.zeros(256, np.uint64)
    for e, n in pairs:
        h[e] += n
    return h


@pytest.mark.parametrize("pairs,w8,w16", [
    ([(120, 10)], 113, 105),                          # a spike: lowest window that holds it
    ([(100, 5), (110, 9), (111, 9)], 104, 96),        # 110..111 + as much of 100 as fits
    ([(10, 7), (30, 7)], 3, 0),                       # tie between two spikes: lowest base
    ([], 0, 0),                                       # empty: base 0
    ([(255, 4), (250, 1)], 248, 240),                 # window never runs past 255
    ([(0, 3)], 0, 0),
    ([(50, 1), (57, 1), (58, 1), (65, 1)], 50, 50),   # three 2-count windows: the lowest; 16 wide holds all
])
def test_gaac_calibration_picks_the_covering_windows_lowest_on_ties(pairs, w8, w16):
    h = _hist(pairs)
    # Independent brute force of the documented rule, then the expected values of the table.
    def brute(w):
        cover = [int(h[b:b + w].sum()) for b in range(0, 257 - w)]
        return int(np.argmax(cover))
    assert C.gaac_best_window(h, 8) == brute(8) == w8
    assert C.gaac_best_window(h, 16) == brute(16) == w16


def test_gaac_calibrator_bases_follow_each_channels_exponents():
    info = C.GaacModelInfo("llama", 2, 2, 16, 8, 0)
    cal = C.GaacCalibrator(info)
    rng = np.random.default_rng(5)
    T = 48
    k = np.zeros((T, 2, 16), np.uint16)
    v = np.zeros((T, 2, 8), np.uint16)
    # K layer 1 head 1 channel c: exponents 100 + c .. 100 + c + 5, plus a rare outlier at 20.
    e = 100 + np.arange(16)[None, :] + rng.integers(0, 6, (T, 16))
    e[1, :], e[2, :] = 100 + np.arange(16), 105 + np.arange(16)   # both ends present
    e[0, :] = 20
    k[:, 1, :] = (e << 7) | rng.integers(0, 128, (T, 16))
    v[:, 0, :] = (np.full((T, 8), 200) << 7)
    cal.add(1, False, k)
    cal.add(1, True, v)
    cal.add(0, False, k)
    c = cal.finish(1024)
    assert c.ctx_len == 1024
    assert np.array_equal(c.bases(0, 1, False, 1), 100 + np.arange(16) - 2)   # lowest 8-window with all 6 values
    assert np.array_equal(c.bases(1, 1, False, 1), 100 + np.arange(16) - 10)
    assert np.array_equal(c.bases(0, 1, True, 0), np.full(8, 193))
    assert np.array_equal(c.bases(0, 1, True, 1), np.zeros(8))                # all zeros: exponent 0
    assert np.array_equal(c.bases(0, 0, True, 0), np.zeros(8))                # nothing seen: 0
    h = cal.histogram(1, False, 1, 3)
    assert h.sum() == T and h[20] == 1


def _expected_bytes(hist, c, fixed, raw):
    hist = np.asarray(hist, np.float64)
    p = hist[:c + 1].sum() / hist.sum()
    return p * (fixed + c) + (1 - p) * raw


def test_gaac_capacity_minimizes_expected_resident_bytes():
    fixed, raw = 2880, 4096
    rng = np.random.default_rng(9)
    # A real-looking escape distribution: most tiles 20-60 bytes, a long tail of drifted tiles.
    esc = np.concatenate([rng.poisson(35, 9000), rng.integers(100, 1200, 400)])
    hist = np.bincount(esc).astype(np.uint64)
    best = C.gaac_choose_capacity(hist, fixed, raw, 16)
    grid = np.arange(0, len(hist) + 16, 16)
    cost = [_expected_bytes(hist, int(c), fixed, raw) for c in grid]
    assert best == grid[int(np.argmin(cost))]
    assert C.gaac_expected_tile_bytes(hist, best, fixed, raw) == pytest.approx(min(cost))
    # Alignment 1 finds the exact optimum, no worse than the aligned one.
    exact = C.gaac_choose_capacity(hist, fixed, raw, 1)
    assert _expected_bytes(hist, exact, fixed, raw) == pytest.approx(min(_expected_bytes(hist, c, fixed, raw)
                                                                         for c in range(len(hist) + 1)))
    # Known answers: every tile needs 20 bytes -> C = 20 (align 1) or 32 (align 16); an empty
    # distribution -> 0; escapes so large that raw is cheaper -> 0.
    assert C.gaac_choose_capacity([0] * 20 + [5], fixed, raw, 1) == 20
    assert C.gaac_choose_capacity([0] * 20 + [5], fixed, raw, 16) == 32
    assert C.gaac_choose_capacity([], fixed, raw, 16) == 0
    assert C.gaac_choose_capacity([1] + [0] * 1249 + [100], fixed, raw, 16) == 0


def test_gaac_stats_ratios_follow_their_definitions():
    d = 64
    rng = np.random.default_rng(4)
    info = C.GaacModelInfo("llama", 1, 1, d, d, 0)
    cal = C.GaacCalibrator(info)
    e = 120 + rng.integers(0, 8, (160, 1, d))
    e[rng.random(e.shape) < 0.02] = 140
    kv = ((e << 7) | rng.integers(0, 128, e.shape)).astype(np.uint16)
    cal.add(0, False, kv)
    calib = cal.finish(160)
    st = C.GaacStats()
    C.gaac_measure(calib, 0, False, kv, st)
    assert st.tiles == 10 and st.tile_dim == d
    g = np.array(st.groups)
    assert g.sum() == 10 * 16 * d // 8 and st.escape_bytes == g[1] + 5 * g[2]
    assert st.codec_ratio() == pytest.approx(10 * 2048 / (10 * 1440 + st.escape_bytes))
    hist = st.escape_hist
    for cap in (0, 16, 64, 4096):
        over = int(hist[cap + 1:].sum())
        resident = (10 - over) * (1440 + cap) + over * 2048 + 10 * 4
        assert st.tiles_over(cap) == over
        assert st.resident_ratio(cap) == pytest.approx(10 * 2048 / resident)


# ---- sidecar --------------------------------------------------------------------------------

def _small_calibration(identity=0x1234):
    info = C.GaacModelInfo("llama", 3, 2, 64, 64, identity)
    cal = C.GaacCalibrator(info)
    rng = np.random.default_rng(2)
    for il in range(3):
        for is_v in (False, True):
            e = rng.integers(90, 140, (32, 2, 64))
            cal.add(il, is_v, ((e << 7) | rng.integers(0, 128, e.shape)).astype(np.uint16))
    c = cal.finish(4096)
    c.set_capacities(32, 48, 48)
    return info, c


def test_gaac_sidecar_save_load_round_trip(tmp_path):
    info, c = _small_calibration()
    p = tmp_path / "model.gaac"
    c.save(str(p))
    d = C.GaacCalibration.load_for(str(p), info)
    assert (d.model.arch, d.model.n_layer, d.model.n_head_kv, d.model.head_dim_k, d.model.identity) == \
        ("llama", 3, 2, 64, 0x1234)
    assert (d.ctx_len, d.n_tokens, d.capacity(False), d.capacity(True), d.capacity_shared) == (4096, 32, 32, 48, 48)
    assert d.element == "bf16" and (d.width(0), d.width(1)) == (3, 4)
    for il in range(3):
        for is_v in (False, True):
            for h in range(2):
                for mode in (0, 1):
                    assert np.array_equal(d.bases(mode, il, is_v, h), c.bases(mode, il, is_v, h))
    assert np.array_equal(d.packed_bases(1), c.packed_bases(1))
    assert C.gaac_sidecar_path("/m/SmolLM2.Q4_1.gguf") == "/m/SmolLM2.Q4_1.gaac"


def test_gaac_packed_bases_are_16_bytes_per_group_column():
    info, c = _small_calibration()
    p = c.packed_bases(2).reshape(2, 2, 64 // 8, 16)     # [K|V][head][group col][b3 x8, b4 x8]
    for is_v in (0, 1):
        for h in range(2):
            assert np.array_equal(p[is_v, h, :, :8].ravel(), c.bases(0, 2, bool(is_v), h))
            assert np.array_equal(p[is_v, h, :, 8:].ravel(), c.bases(1, 2, bool(is_v), h))


@pytest.mark.parametrize("damage,kind", [
    (lambda b: b"XAACCAL\x1a" + b[8:], "bad_magic"),
    (lambda b: b[:8] + (2).to_bytes(4, "little") + b[12:], "unsupported_version"),
    (lambda b: b[:10], "truncated"),
    (lambda b: b[:60], "truncated"),
    (lambda b: b[:-1], "truncated"),
    (lambda b: b[:200], "truncated"),
    (lambda b: b + b"\0", "bad_size"),
    (lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:], "checksum_mismatch"),
    (lambda b: b[:24] + (0).to_bytes(4, "little") + b[28:], "bad_dims"),
])
def test_gaac_sidecar_malformed_files_are_clear_errors(tmp_path, damage, kind):
    _, c = _small_calibration()
    p = tmp_path / "model.gaac"
    c.save(str(p))
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.GaacCalibration.load(str(p))
    assert ei.value.kind == kind
    assert str(p) in str(ei.value)


def test_gaac_sidecar_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.GaacCalibration.load(str(tmp_path / "none.gaac"))
    assert ei.value.kind == "io"


def test_gaac_sidecar_for_another_model_is_refused(tmp_path, smollm2_path, gemma3_path):
    smol, gem = C.GaacModelInfo.from_gguf(smollm2_path), C.GaacModelInfo.from_gguf(gemma3_path)
    assert (smol.arch, smol.n_layer, smol.n_head_kv, smol.head_dim_k, smol.head_dim_v) == ("llama", 30, 3, 64, 64)
    assert (gem.arch, gem.n_head_kv, gem.head_dim_k) == ("gemma3", 1, 256)
    assert C.GaacModelInfo.from_gguf(smollm2_path).identity == smol.identity
    c = C.GaacCalibrator(smol).finish(1024)
    p = tmp_path / "smol.gaac"
    c.save(str(p))
    C.GaacCalibration.load_for(str(p), smol)
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.GaacCalibration.load_for(str(p), gem)
    assert ei.value.kind == "identity_mismatch"
    assert "gemma3" in str(ei.value) and "llama" in str(ei.value)
    # Same dims, different tensor table (another quantization): refused too.
    other = C.GaacModelInfo("llama", 30, 3, 64, 64, smol.identity ^ 1)
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.GaacCalibration.load_for(str(p), other)
    assert ei.value.kind == "identity_mismatch"


def test_gaac_identity_changes_with_the_tensor_table(tiny_model):
    a = C.GaacModelInfo.from_gguf(str(tiny_model("llama", name="a.gguf", weight_type="q8_0")))
    b = C.GaacModelInfo.from_gguf(str(tiny_model("llama", name="b.gguf", weight_type="q4_0")))
    a2 = C.GaacModelInfo.from_gguf(str(tiny_model("llama", name="a2.gguf", weight_type="q8_0", seed=3)))
    assert (a.n_layer, a.n_head_kv) == (b.n_layer, b.n_head_kv)
    assert a.identity != b.identity          # another quantization of the "same" model
    assert a.identity == a2.identity         # same table, other weights: not told apart (documented)


# ---- real KV ----------------------------------------------------------------------------------
# Calibrated on GPL-3, evaluated on Apache-2.0, first 1,024 tokens each (spec "Reference figures").

def _real_figures(path):
    cal_kv, ev_kv = capture_kv(path, GPL3, 1024), capture_kv(path, APACHE2, 1024)
    info = C.GaacModelInfo.from_gguf(path)
    cal = C.GaacCalibrator(info)
    for il in range(info.n_layer):
        cal.add(il, False, cal_kv.k[il])
        cal.add(il, True, cal_kv.v[il])
    calib = cal.finish(1024)
    on_cal = [C.GaacStats(), C.GaacStats()]
    for il in range(info.n_layer):
        for is_v, kv in ((0, cal_kv.k), (1, cal_kv.v)):
            C.gaac_measure(calib, il, bool(is_v), kv[il], on_cal[is_v])
    calib.set_capacities_from(on_cal[0], on_cal[1])
    ev = [C.GaacStats(), C.GaacStats()]
    for il in range(info.n_layer):
        for is_v, kv in ((0, ev_kv.k), (1, ev_kv.v)):
            C.gaac_measure(calib, il, bool(is_v), kv[il], ev[is_v])
    for is_v, s in enumerate(ev):
        cap = calib.capacity(bool(is_v))
        print(f"\n{info.arch} {'KV'[is_v]}: entropy {s.exponent_entropy():.2f} bits, groups "
              f"{100 * s.group_share(0):.2f}/{100 * s.group_share(1):.2f}/{100 * s.group_share(2):.2f} %, "
              f"codec {s.codec_ratio():.4f}, C {cap}, resident {s.resident_ratio(cap):.4f}, "
              f"raw tiles {s.tiles_over(cap)}/{s.tiles}")
    return info, calib, ev


@pytest.fixture(scope="module")
def smollm2_real(smollm2_path):
    return _real_figures(smollm2_path)


@pytest.fixture(scope="module")
def gemma3_real(gemma3_path):
    return _real_figures(gemma3_path)


def test_gaac_smollm2_real_kv_reaches_the_reference_ratios(smollm2_real):
    info, calib, (k, v) = smollm2_real
    assert k.tile_dim == v.tile_dim == 64
    assert k.tiles == v.tiles == 30 * 3 * 1024 // 16
    # Spec reference (numpy of the spec, same model and texts): K 91.7/8.1/0.18 % 1.411,
    # V 88.1/11.6/0.24 % 1.406. Our capture differs from it in float rounding only.
    assert k.codec_ratio() >= 1.40 and v.codec_ratio() >= 1.40
    assert k.group_share(0) == pytest.approx(0.917, abs=0.01) and k.group_share(2) < 0.004
    assert v.group_share(0) == pytest.approx(0.881, abs=0.01) and v.group_share(2) < 0.005
    assert k.exponent_entropy() == pytest.approx(2.76, abs=0.05)
    assert v.exponent_entropy() == pytest.approx(2.92, abs=0.05)
    for s, is_v in ((k, False), (v, True)):
        cap = calib.capacity(is_v)
        assert cap % 16 == 0 and 0 < cap <= 256
        assert 1.35 < s.resident_ratio(cap) < s.codec_ratio() < 16 / 11.25


def test_gaac_gemma3_real_kv_two_tiles_per_head_reach_1_40(gemma3_real):
    info, calib, (k, v) = gemma3_real
    assert info.head_dim_k == 256 and k.tile_dim == 128
    assert k.tiles == info.n_layer * info.n_head_kv * 2 * (1024 // 16)
    assert k.codec_ratio() >= 1.40 and v.codec_ratio() >= 1.40
    assert k.group_share(0) > 0.85 and v.group_share(0) > 0.85
    for s, is_v in ((k, False), (v, True)):
        cap = calib.capacity(is_v)
        assert 1.33 < s.resident_ratio(cap) < s.codec_ratio()


def test_gaac_real_calibration_survives_the_sidecar(smollm2_real, smollm2_path, tmp_path):
    info, calib, (k, _) = smollm2_real
    p = tmp_path / "smol.gaac"
    calib.save(str(p))
    again = C.GaacCalibration.load_for(str(p), C.GaacModelInfo.from_gguf(smollm2_path))
    st = C.GaacStats()
    ev = capture_kv(smollm2_path, APACHE2, 1024)
    for il in range(info.n_layer):
        C.gaac_measure(again, il, False, ev.k[il], st)
    assert st.groups == k.groups and st.escape_bytes == k.escape_bytes
    assert again.capacity(False) == calib.capacity(False)
