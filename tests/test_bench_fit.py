"""bench/cuda_attention.py's fixed + per-token fit: the arithmetic the attention tables' summary
lines rest on (bench/results/cuda_h200.md reads BF16's stream rate and fixed cost from it)."""
import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("cuda_attention", Path(__file__).resolve().parents[1] / "bench" / "cuda_attention.py")
cuda_attention = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cuda_attention)


def test_the_fit_recovers_a_known_line_and_ignores_short_contexts():
    ctxs = [8192, 32768, 65536, 131072]
    # 18.8 µs fixed + 62.9 µs per 64K tokens; the 8K point off the line (another copy path).
    times = [5e-6] + [(18.8 + 62.9 * c / 65536) * 1e-6 for c in ctxs[1:]]
    fixed, per = cuda_attention.fixed_and_stream(ctxs, times)
    assert fixed == pytest.approx(18.8, abs=1e-6) and per == pytest.approx(62.9, abs=1e-6)
    note = cuda_attention.fit_note("BF16", ctxs, times, 268435456)
    assert note == "BF16 18.8 us + 62.9 us per 64K (4.27 TB/s)"


def test_the_fit_needs_two_long_contexts():
    assert cuda_attention.fixed_and_stream([8192, 65536], [1e-5, 8e-5]) is None
    assert cuda_attention.fixed_and_stream([65536, 65536], [8e-5, 8.1e-5]) is None
    assert cuda_attention.fit_note("E8", [65536], [8e-5], 1.0) is None
