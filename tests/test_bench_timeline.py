"""bench/cuda_attention_timeline.py's reading of GAACRT_CUDA_ATTN_TIMELINE lines
(backends/cuda/attention_timeline.h): the arithmetic behind its phase table."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

spec = importlib.util.spec_from_file_location(
    "cuda_attention_timeline", Path(__file__).resolve().parents[1] / "bench" / "cuda_attention_timeline.py")
timeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(timeline)


def test_a_launch_line_parses_and_summarizes(tmp_path):
    # Grid (2, 2, 1): block 3 is an empty split (its start only, earliest of all: it is left out);
    # block 0 arrives last and merges.
    blocks = [
        [1_000, 7_000, 60_000, 62_000, 66_500],
        [1_200, 8_000, 55_000, 57_000, 0],
        [1_100, 9_000, 50_000, 51_000, 0],
        [900, 0, 0, 0, 0],
    ]
    f = tmp_path / "t.txt"
    f.write_text("bf16 2 2 1 2 " + " ".join(str(x) for b in blocks for x in b) + "\n")
    [(fmt, grid, n_split, st)] = timeline.parse(f)
    assert (fmt, grid, n_split) == ("bf16", (2, 2, 1), 2) and st.shape == (4, 5)
    rows, span, stream, n_live = timeline.summarize(st)
    assert n_live == 3
    assert rows[0] == pytest.approx((0.0, 0.1, 0.2, 3))
    assert rows[2] == pytest.approx((49.0, 54.0, 59.0, 3))
    assert rows[4] == pytest.approx((65.5, 65.5, 65.5, 1))
    assert span == pytest.approx(65.5)
    assert sorted(stream) == pytest.approx([41.0, 47.0, 53.0])
    assert st[3, 0] == 900 and np.isnan(st[3, 1:]).all()
