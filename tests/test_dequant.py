"""Dequantization (src/quant/dequant.h, backends/cpu/dequantize.cpp; shared/spec/gguf.md §2) is
bit-identical to the gguf package's numpy reference, gguf.quants.dequantize: on every tensor of
both real models, on random blocks of every supported type with scales of every class (signed
zero, subnormal, normal, largest, infinite, NaN), and on all 65536 F16 and BF16 patterns.
Unsupported types are a named error.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as QT
from gguf import quants

import gaacrt
from gaacrt import _core

SUPPORTED = {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "iq4_xs",
             "q4_K", "q5_K", "q6_K"}
ALL_TYPE_IDS = [i for i in range(64) if i in {int(t) for t in QT}]


def assert_bit_identical(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    """Equal bit patterns, except that NaNs only need to sit at the same positions: IEEE 754
    leaves the payload of a NaN produced by arithmetic unspecified (x86 keeps the first operand's
    payload, numpy's float16 -> float32 cast and a C++ conversion may canonicalize it), so the
    payload bits are not a property of the dequantization formula."""
    assert ours.dtype == np.float32 and ours.shape == ref.shape, what
    ref = ref.astype(np.float32, copy=False)
    if np.array_equal(ours.view(np.uint32), ref.view(np.uint32)):
        return
    nan_ours, nan_ref = np.isnan(ours), np.isnan(ref)
    bad_nan = np.flatnonzero(nan_ours != nan_ref)
    assert bad_nan.size == 0, f"{what}: NaN positions differ, first at element {bad_nan[:5]}"
    a, b = ours.view(np.uint32), ref.view(np.uint32)
    diff = np.flatnonzero((a != b) & ~nan_ref)
    assert diff.size == 0, (f"{what}: {diff.size} elements differ, first at {diff[0]}: "
                            f"ours {ours[diff[0]]!r} (0x{a[diff[0]]:08x}) vs gguf {ref[diff[0]]!r} (0x{b[diff[0]]:08x})")


def dequant_both(raw: np.ndarray, type_name: str) -> tuple[np.ndarray, np.ndarray]:
    qt = QT[type_name.upper()]
    block, size = GGML_QUANT_SIZES[qt]
    n = raw.size // size * block
    ours = _core.dequantize(np.ascontiguousarray(raw), type_name, n)
    # gguf works through rows 16 at a time; blocks are independent, so present long rows (up to
    # 4096 blocks) to keep its per-call overhead from dominating on the 170M-element embeddings.
    row_blocks = math.gcd(raw.size // size, 4096)
    with np.errstate(all="ignore"):   # Inf/NaN scales make numpy warn; the values are the point
        ref = quants.dequantize(raw.reshape(-1, row_blocks * size), qt).reshape(-1)
    return ours, ref


# ---- real models -------------------------------------------------------------------------

CHUNK_BYTES = 1 << 22   # dequantize big tensors a slice at a time to bound memory


@pytest.mark.parametrize("fixture", ["smollm2_path", "gemma3_path"])
def test_every_tensor_of_the_real_models_dequantizes_bit_identically(request, fixture):
    f = gaacrt.GGUFFile(request.getfixturevalue(fixture))
    seen = set()
    for t in f.tensors:
        raw = f.tensor_bytes(t.name)
        size = GGML_QUANT_SIZES[QT(t.type_id)][1]
        step = max(size, CHUNK_BYTES // size * size)
        for start in range(0, raw.size, step):
            ours, ref = dequant_both(raw[start:start + step], t.type)
            assert_bit_identical(ours, ref, f"{t.name} ({t.type}) bytes {start}..")
        seen.add(t.type)
    expected = {"smollm2_path": {"f32", "q4_1", "q8_0"},
                "gemma3_path": {"f32", "q4_K", "q5_0", "q6_K", "q8_0"}}[fixture]
    assert seen == expected


# ---- random blocks -----------------------------------------------------------------------

# fp16 scale patterns: ±0, smallest and largest subnormal, ordinary, largest finite, ±Inf, NaNs.
SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x3C00, 0xBC00, 0x2E66, 0xB1EE,
               0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00]
# Byte offsets of the fp16 scale fields inside one block (spec §2 tables).
SCALE_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
                "iq4_nl": [0], "iq4_xs": [0], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208]}


@pytest.mark.parametrize("type_name", sorted(SCALE_FIELDS))
def test_random_blocks_with_every_scale_class_match_gguf(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)))
    size = GGML_QUANT_SIZES[QT[type_name.upper()]][1]
    fields = SCALE_FIELDS[type_name]
    specials = np.array(SPECIAL_F16, np.uint16)
    n_blocks = 8 * len(specials) ** len(fields) if len(fields) == 1 else len(specials) ** 2 * 2
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    # Each block gets one combination of special scales (every pair, for two-scale types);
    # everything else (quants, sub-block scales, high bits) stays random.
    for k, off in enumerate(fields):
        pick = specials[(np.arange(n_blocks) // len(specials) ** k) % len(specials)]
        blocks[:, off:off + 2] = pick.view(np.uint8).reshape(-1, 2)
    ours, ref = dequant_both(blocks.reshape(-1), type_name)
    assert_bit_identical(ours, ref, type_name)
    assert np.isnan(ref).any() and np.isinf(ref).any() and (ref == 0).any()   # the classes occur


@pytest.mark.parametrize("type_name", sorted(SCALE_FIELDS))
def test_random_blocks_with_random_bytes_match_gguf(type_name):
    rng = np.random.default_rng(1000 + sum(map(ord, type_name)))
    size = GGML_QUANT_SIZES[QT[type_name.upper()]][1]
    raw = rng.integers(0, 256, size=513 * size, dtype=np.uint8)   # odd block count
    ours, ref = dequant_both(raw, type_name)
    assert_bit_identical(ours, ref, type_name)


@pytest.mark.parametrize("type_name", ["f16", "bf16"])
def test_every_16_bit_pattern_converts_like_gguf(type_name):
    raw = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.uint8)
    ours, ref = dequant_both(raw, type_name)
    assert_bit_identical(ours, ref, type_name)


def test_f32_dequantization_is_a_bit_copy():
    x = np.random.default_rng(3).integers(0, 2**32, size=1000, dtype=np.uint64).astype(np.uint32)
    ours = _core.dequantize(x.view(np.uint8), "f32", 1000)
    assert np.array_equal(ours.view(np.uint32), x)                # NaN payloads included


# ---- types and errors --------------------------------------------------------------------

def test_supported_types_are_the_w4_set():
    supported = {_core.type_info(i)["name"] for i in ALL_TYPE_IDS if _core.type_info(i)["supported"]}
    assert supported == SUPPORTED


@pytest.mark.parametrize("type_id", ALL_TYPE_IDS)
def test_type_geometry_matches_gguf(type_id):
    info = _core.type_info(type_id)
    block, size = GGML_QUANT_SIZES[QT(type_id)]
    if QT(type_id) == QT.Q8_1:
        # gguf 0.19 lists 40 bytes; ggml-common.h's block_q8_1 is fp16 d, fp16 s, 32 int8 = 36.
        assert (info["block_size"], info["type_size"]) == (32, 36)
    else:
        assert (info["block_size"], info["type_size"]) == (block, size), info["name"]


@pytest.mark.parametrize("type_id", [i for i in ALL_TYPE_IDS if QT(i).name.lower() not in
                                     {s.lower() for s in SUPPORTED}])
def test_unsupported_type_is_a_named_error(type_id):
    info = _core.type_info(type_id)
    raw = np.zeros(info["type_size"] * 2, np.uint8)
    with pytest.raises(gaacrt.GaacrtError, match=f"tensor type {info['name']} is not supported") as e:
        _core.dequantize(raw, info["name"], 2 * info["block_size"])
    assert e.value.kind == "unsupported_type"


def test_dequantize_checks_its_arguments():
    with pytest.raises(ValueError, match="n = 48 is not a multiple of the q4_0 block size 32"):
        _core.dequantize(np.zeros(36, np.uint8), "q4_0", 48)
    with pytest.raises(ValueError, match="18 bytes given, 36 needed"):
        _core.dequantize(np.zeros(18, np.uint8), "q4_0", 64)
    with pytest.raises(ValueError, match="unknown ggml type name 'q9_9'"):
        _core.dequantize(np.zeros(18, np.uint8), "q9_9", 32)
    with pytest.raises(ValueError, match="unknown ggml type id 4"):
        _core.dequantize(np.zeros(18, np.uint8), 4, 32)
