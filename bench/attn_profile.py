"""bench/attn_profile.py — one decode attention call of bench/cuda_attention.py's shape (32 q-heads /
8 kv-heads, d = 128) inside an NVTX range "decode", for Nsight Compute:

    ncu --clock-control none --nvtx --nvtx-include "decode/" python3 bench/attn_profile.py gaac 65536
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gaacrt  # noqa: E402
from gaacrt import _core  # noqa: E402
from fixtures.tiny_models import write_tiny_model  # noqa: E402


def main() -> None:
    cache, ctx = sys.argv[1], int(sys.argv[2])
    import torch
    path = write_tiny_model(Path(tempfile.mkdtemp()) / "attn.gguf", "llama", seed=1, weight_type="q8_0", n_layers=1,
                            n_embd=1024, n_head=32, n_head_kv=8, head_dim=128, n_ff=512)
    m = gaacrt.Model(str(path), backend="cuda")
    toks = [int(t) for t in np.random.default_rng(0).integers(3, m.n_vocab, 2048)]
    c = _core.Context(m._m, n_ctx=ctx + 64, cache=cache)
    s = _core.Session(c)
    s.eval(toks)
    c._extend_for_bench(s, ctx)
    c._time_attention(s, 0, 2)
    torch.cuda.nvtx.range_push("decode")
    c._time_attention(s, 0, 1)
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
