"""The scalar cache tiles (src/codec/scalar: q8_tile.h, asym2.h, scalar_codecs.h) and E8's value
tiles, checked against the rules written out in numpy (and gguf's Q8_0), plus the byte accounting
of every fixed-size format (kv_codec_bytes.h; spec/e8.md §8-§9).
"""
import numpy as np
import pytest
from gguf import GGMLQuantizationType, quants

import gaacrt
import gaacrt._core as C

F16_MAX = np.float32(65504)


def asym2_reference(v: np.ndarray, axis: int):
    """Spec §8 in numpy: z = fp16(min), D = fp16((max - min) / 3) (saturating), q = clip(rint((v - z) / D))."""
    mn, mx = v.min(axis, keepdims=True), v.max(axis, keepdims=True)
    z = np.clip(mn, -F16_MAX, F16_MAX).astype(np.float16)
    d = np.clip((mx - mn) / np.float32(3), -F16_MAX, F16_MAX).astype(np.float16)
    zf, df = z.astype(np.float32), d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (v - zf) / df
    q = np.where(df > 0, np.clip(np.rint(t), 0, 3), 0).astype(np.uint8)
    return q, d, z, zf + df * q.astype(np.float32)


def unpack2(codes: np.ndarray, n: int) -> np.ndarray:
    """Channel c at byte c/4, bits 2(c%4)."""
    return ((codes[..., :, None] >> (2 * np.arange(4, dtype=np.uint8))) & 3).reshape(*codes.shape[:-1], n)


def value_tiles(rng, n, T):
    x = (rng.standard_normal((n, 16, T)) * rng.uniform(0.01, 10, (n, 16, 1))).astype(np.float32)
    x[0, 0, :32] = 1.25                                   # a constant group
    x[0, 1, :32] = np.tile(np.float32([0, 3, 0.5, 1.5, 2.5]), 7)[:32]   # exact ties 0.5 / 1.5 / 2.5
    x[0, 2, :32] *= 1e6                                   # beyond the fp16 range
    return x


# ---- v2: 2-bit per-token value tiles (E8 and KIVI-2 values) -------------------------------------

@pytest.mark.parametrize("T", [64, 128])
def test_v2_tile_codes_and_params_equal_the_spec_rule(T):
    x = value_tiles(np.random.default_rng(T), 20, T)
    slots = C.v2_encode_tiles(x)
    assert slots.shape == (20, 6 * T)
    q, d, z, _ = asym2_reference(x.reshape(20, 16, T // 32, 32), axis=3)
    assert np.array_equal(unpack2(slots[:, :4 * T].reshape(20, 16, T // 4), T), q.reshape(20, 16, T))
    params = slots[:, 4 * T:].view("<u2").reshape(20, 16, T // 32, 2)
    assert np.array_equal(params[..., 0], d[..., 0].view(np.uint16))
    assert np.array_equal(params[..., 1], z[..., 0].view(np.uint16))
    assert list(unpack2(slots[0, T // 4:T // 4 + 8], 32)[:5]) == [0, 3, 0, 2, 2]   # ties to even


@pytest.mark.parametrize("T", [64, 128])
def test_v2_reconstruction_is_within_half_a_step_of_the_fp16_grid(T):
    x = value_tiles(np.random.default_rng(T + 1), 20, T)
    x_hat = C.v2_decode_tiles(C.v2_encode_tiles(x), T)
    g, gh = x.reshape(-1, 32), x_hat.reshape(-1, 32)
    _, d, z, ref = asym2_reference(g, axis=1)
    assert np.array_equal(gh, ref)
    df, zf = d.astype(np.float32), z.astype(np.float32)
    # Inside [z, z + 3D] the error is at most D/2; fp16 rounding of z and D can leave min / max
    # slightly outside the grid, adding at most that overhang.
    bound = np.maximum.reduce([df / 2, zf - g.min(1, keepdims=True), g.max(1, keepdims=True) - (zf + 3 * df)])
    assert np.all(np.abs(g - gh) <= bound * (1 + 1e-6) + 1e-30)
    assert np.all(np.isfinite(x_hat))
    assert np.all(x_hat[0, 0, :32] == 1.25)                  # constant group: exact


def test_v2_accumulate_equals_the_weighted_sum_of_decoded_values():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 16, 128)).astype(np.float32)
    slots = C.v2_encode_tiles(x)
    p = rng.uniform(0, 1, (4, 80)).astype(np.float32)
    want = p.astype(np.float64) @ C.v2_decode_tiles(slots, 128).reshape(80, 128)
    assert np.allclose(C.v2_accumulate_tiles(slots, 128, p), want, rtol=1e-5, atol=1e-5)


def test_e8_values_are_v2_tiles_per_128_channel_half():
    v = np.random.default_rng(4).standard_normal((3, 16, 256)).astype(np.float32)
    slots = C.e8_encode_values(v)
    assert slots.shape == (3, 2, 768)
    for h in range(2):
        assert np.array_equal(slots[:, h], C.v2_encode_tiles(np.ascontiguousarray(v[:, :, 128 * h:128 * (h + 1)])))
    assert np.array_equal(C.e8_decode_values(slots, 256)[:, :, 128:], C.v2_decode_tiles(slots[:, 1].copy(), 128))
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.e8_encode_values(np.zeros((1, 16, 80), np.float32))
    assert ei.value.kind == "bad_head_dim"


# ---- KIVI-2 keys: per channel over the 16-token block ---------------------------------------------

@pytest.mark.parametrize("T", [64, 128])
def test_kivi2_keys_quantize_each_channel_over_the_block(T):
    rng = np.random.default_rng(T + 2)
    x = (rng.standard_normal((10, 16, T)) * rng.uniform(0.1, 20, (10, 1, T))).astype(np.float32)
    slots = C.kivi2_k_encode_tiles(x)
    assert slots.shape == (10, 8 * T)
    q, d, z, ref = asym2_reference(x, axis=1)               # (10, 16, T) codes, (10, 1, T) params
    words = slots[:, :4 * T].view("<u4")
    codes = (words[:, None, :] >> (2 * np.arange(16, dtype=np.uint32))[None, :, None]) & 3
    assert np.array_equal(codes, q)
    params = slots[:, 4 * T:].view("<u2").reshape(10, T, 2)
    assert np.array_equal(params[..., 0], d[:, 0].view(np.uint16))
    assert np.array_equal(params[..., 1], z[:, 0].view(np.uint16))
    x_hat = C.kivi2_k_decode_tiles(slots, T)
    assert np.array_equal(x_hat, ref)
    qh = rng.standard_normal((3, T)).astype(np.float32)
    dense = qh.astype(np.float64) @ x_hat.reshape(-1, T).T.astype(np.float64)
    s = C.kivi2_k_score_tiles(slots, T, qh)
    assert s.shape == (3, 160)
    assert np.allclose(s, dense, rtol=1e-5, atol=1e-4 * np.abs(dense).max())


# ---- q8 -------------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("T", [64, 128])
def test_q8_tiles_are_bit_identical_to_gguf_q8_0(T):
    x = value_tiles(np.random.default_rng(T + 3), 12, T)
    x[1, 0, :32] = 0                                          # an all-zero block: d = 0
    slots = C.q8_encode_tiles(x)
    assert slots.shape == (12, 17 * T)
    ref = quants.quantize(x.reshape(-1, T), GGMLQuantizationType.Q8_0)
    assert np.array_equal(slots.reshape(-1), ref.reshape(-1))
    x_hat = C.q8_decode_tiles(slots, T)
    assert np.array_equal(x_hat.reshape(-1, T), quants.dequantize(ref, GGMLQuantizationType.Q8_0).reshape(-1, T))
    # |x - d16 q| <= d/2 + 127 |d - d16|, and fp16 rounds d to 2^-11 relative. Blocks whose d
    # exceeds fp16 (|x| > 65504 * 127, the 1e6-scaled group here) overflow as in ggml: excluded.
    g, gh = x.reshape(-1, 32), x_hat.reshape(-1, 32)
    d = np.abs(g).max(1, keepdims=True) / 127
    fin = d[:, 0] <= 65504
    assert (~fin).sum() <= 1
    assert np.all(np.abs(g - gh)[fin] <= d[fin] * (0.5 + 127 * 2.0 ** -11))


def test_q8_score_and_accumulate_equal_dense_decode():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 16, 128)).astype(np.float32)
    slots = C.q8_encode_tiles(x)
    dec = C.q8_decode_tiles(slots, 128).reshape(96, 128).astype(np.float64)
    q = rng.standard_normal((4, 128)).astype(np.float32)
    assert np.allclose(C.q8_score_tiles(slots, 128, q), q @ dec.T, rtol=1e-5, atol=1e-4)
    p = rng.uniform(0, 1, (4, 96)).astype(np.float32)
    assert np.allclose(C.q8_accumulate_tiles(slots, 128, p), p @ dec, rtol=1e-5, atol=1e-4)


def test_scalar_tiles_reject_unsupported_tile_dims():
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.q8_encode_tiles(np.zeros((1, 16, 48), np.float32))
    assert ei.value.kind == "bad_tile_dim" and "48" in str(ei.value)
    with pytest.raises(gaacrt.GaacrtError):
        C.v2_encode_tiles(np.zeros((1, 16, 40), np.float32))
    with pytest.raises(ValueError, match="slots"):
        C.q8_decode_tiles(np.zeros((1, 100), np.uint8), 64)


# ---- accounting -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,d,k,v", [
    ("e8", 128, 36, 48),      # spec §9: 32 + 4 key, 32 + 16 value = 84
    ("e8", 64, 20, 24),
    ("e8", 256, 72, 96),      # the fp32 norm is stored in each 128-channel half (e8_layout.h)
    ("q8", 128, 136, 136),    # 34 B per 32 values
    ("kivi2", 128, 64, 48),   # keys: 2 bits + fp16 scale/zero per channel per 16 tokens
    ("bf16", 128, 256, 256),
])
def test_kv_codec_bytes_per_token_head(fmt, d, k, v):
    b = C.kv_codec_bytes_per_token_head(fmt, d, d)
    assert (b["k"], b["v"], b["total"]) == (k, v, k + v)
    T = min(d, 128)
    assert (d // T) * (C.kv_codec_slot_bytes(fmt, T, False) + C.kv_codec_slot_bytes(fmt, T, True)) == 16 * (k + v)


def test_e8_llama8b_bytes_per_token_match_the_spec():
    b = C.kv_codec_bytes_per_token_head("e8", 128, 128)["total"]
    assert 32 * 8 * b == 21504                                  # 6.10x smaller than fp16's 131,072
    assert C.kv_codec_slot_bytes("e8", 128, False) == C.e8_k_slot_bytes(128) == 576
    assert C.kv_codec_slot_bytes("e8", 128, True) == C.e8_v_slot_bytes(128) == 768
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.kv_codec_slot_bytes("gaac", 128, False)
    assert ei.value.kind == "unsupported_format"
    with pytest.raises(gaacrt.GaacrtError) as ei:
        C.kv_codec_slot_bytes("q8", 48, False)
    assert ei.value.kind == "bad_tile_dim"
