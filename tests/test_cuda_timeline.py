"""GAACRT_CUDA_ATTN_TIMELINE (backends/cuda/attention_timeline.h, bench/cuda_attention_timeline.py):
recording every decode attention launch's per-block stamps changes none of the bits the model
computes, and each launch's line holds five stamps for every thread block of its grid.

Runs on the GPU machine; skipped with the reason elsewhere.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gaacrt
from fixtures.cuda_target import CUDA, REASON

pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")

pytest.importorskip("gguf")

# argv: tests dir, model, cache, output .npy. 700 tokens: decode steps split across thread blocks,
# so the fused reduce runs (and stamps).
RUN = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import gaacrt
from fixtures.backend_compare import logits_run
from fixtures.cuda_target import CUDA
gpu = gaacrt.Model(sys.argv[2], backend=CUDA)
toks = [int(t) for t in np.random.default_rng(6).integers(3, gpu.n_vocab, 700)]
a, _ = logits_run(gpu, toks, 660, 40, cache=sys.argv[3])
np.save(sys.argv[4], a)
"""


@pytest.mark.parametrize("cache", ["bf16", "gaac", "e8"])
def test_cuda_attention_timeline_changes_no_bits(tmp_path, cache):
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "h128.gguf", "llama", seed=7, weight_type="q8_0", n_layers=2, n_embd=256,
                            n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    tests_dir = str(Path(__file__).resolve().parent)
    log = tmp_path / "timeline.txt"
    out = {}
    for name, extra in (("off", {}), ("on", {"GAACRT_CUDA_ATTN_TIMELINE": str(log)})):
        # Graphs off in both runs: a replayed graph launches nothing the timeline could see.
        env = {k: v for k, v in os.environ.items() if k != "GAACRT_CUDA_ATTN_TIMELINE"}
        env.update(GAACRT_CUDA_GRAPH="0", **extra)
        npy = tmp_path / f"{name}.npy"
        r = subprocess.run([sys.executable, "-c", RUN, tests_dir, str(path), cache, str(npy)], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        out[name] = np.load(npy)
    assert np.array_equal(out["on"].view(np.uint32), out["off"].view(np.uint32)), "the timeline changed the logits"

    decode, merged, expanded = 0, 0, 0
    for line in log.read_text().splitlines():
        f = line.split()
        # (A GAAC cache's prefill-sized launches run as BF16 over its tiles decoded into BF16
        # pages, attention_gaac_expand.cu, and say so.)
        assert f[0] == cache or (cache == "gaac" and f[0] == "bf16")
        expanded += f[0] != cache
        gx, gy, gz = int(f[1]), int(f[2]), int(f[3])
        st = np.array([int(x) for x in f[5:]], dtype=np.uint64).reshape(gx * gy * gz, 5)
        assert (st[:, 0] > 0).all()  # every block stamps its start
        streamed = st[:, 2] > 0  # decode launches: the blocks that held keys, stamps in time order
        if streamed.any():
            decode += 1
            ok = st[streamed]
            assert (ok[:, 2] >= ok[:, 0]).all() and (ok[:, 3][ok[:, 3] > 0] >= ok[:, 2][ok[:, 3] > 0]).all()
        merged += int((st[:, 4] > 0).sum())
    assert decode >= 2 * 40  # every decode step's launch in both layers
    assert (expanded >= 2) if cache == "gaac" else expanded == 0  # the 660-token prefill's chunks, both layers
    assert merged > 0  # some decode step split its keys and ran the fused reduce
