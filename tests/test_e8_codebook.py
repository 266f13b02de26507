"""The E8P12 codebook of src/codec/e8/e8_codebook.h against spec/e8.md §1-§3 and its test vectors:
table checksums, the listed words, rows and decoded codes, and an independent numpy construction.
"""
import hashlib

import numpy as np
import pytest

import gaacrt._core as C
import e8_vectors as ev

TV = ev.parse()


def sha16(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def abs_table_from_words(words: np.ndarray) -> np.ndarray:
    """|a| x2 from the packed words: nibble k is 2 a'[BIT2DIM[k]] + 8."""
    out = np.zeros((256, 8), np.int8)
    for k in range(8):
        out[:, ev.BIT2DIM[k]] = np.abs(((words >> np.uint32(4 * k)) & np.uint32(15)).astype(np.int8) - 8)
    return out


def test_e8_packed_table_checksums_reproduce_the_test_vectors():
    words = C.e8_packed_table()
    assert words.dtype == np.uint32 and words.shape == (256,)
    assert sha16(words.astype("<u4")) == TV["checksums"]["packed_abs_u32"]
    assert sha16(abs_table_from_words(words)) == TV["checksums"]["abs_table"]
    assert list(words[:8]) == TV["packed_head"]
    assert list(words[248:]) == TV["packed_tail"]


def test_e8_full_grid_checksum_and_listed_decodes_are_exact():
    codes = np.arange(65536, dtype=np.uint16)
    g = C.e8_decode_codes(codes)
    assert g.shape == (65536, 8) and g.dtype == np.float32
    x4 = g * 4
    assert np.array_equal(x4, np.round(x4)), "every coordinate is a multiple of 1/4"
    assert sha16(x4.astype(np.int8)) == TV["checksums"]["full_grid"]
    for code, want in TV["decode"].items():
        assert list(x4[code].astype(int)) == want, hex(code)


def test_e8_codebook_equals_the_spec_construction():
    S = ev.prototypes()
    assert S.shape == (256, 8)
    counts = np.bincount((S[:227] ** 2).sum(1).astype(int))
    assert [counts[n] for n in (2, 4, 6, 8, 10)] == [1, 8, 28, 64, 126]
    for row, want in TV["abs_rows"].items():
        assert list(S[row]) == want
    assert np.array_equal(C.e8_packed_table(), ev.packed_words(S))
    assert np.array_equal(C.e8_decode_codes(np.arange(65536, dtype=np.uint16)).astype(np.float64), ev.grid())


def test_e8_codewords_are_distinct_and_lie_in_e8_shifted_by_a_quarter():
    g = C.e8_decode_codes(np.arange(65536, dtype=np.uint16)).astype(np.float64)
    assert len(np.unique(g, axis=0)) == 65536
    n_branch = []
    for shift in (0.25, -0.25):
        sel = (g[:, 0] - shift) % 1 == 0.5                  # u = g - shift lies in Z + 1/2
        u = g[sel] - shift
        assert np.all(u % 1 == 0.5)
        assert np.all(u.sum(1) % 2 == 0), "U is inside D8^ (even coordinate sum)"
        n_branch.append(int(sel.sum()))
    assert n_branch == [32768, 32768]
    assert np.abs(g).max() == 2.75
