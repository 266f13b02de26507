"""The Metal KV-cache kernels under the emulation against the CPU backend (issue 8).

tests/metal/kv_parity.cpp, built against the installed libgaacrt: the same K/V stored, finalized
and attended on both backends for the q8, KIVI-2 and E8 caches at head dims 64/128/256 — slots
byte-identical to the CPU encoders' (E8 keys: rotation, norm and lattice search on the kernel
path), attention within 1e-5. Then a whole synthetic SmolLM2-shaped model with the E8 cache past
its 128-token raw window: the same logits as the CPU's E8 run to a few 1e-3.
(GAAC: tests/test_metal_model.py, bit-identical to the BF16 cache.)
"""
import numpy as np
import pytest

import gaacrt
from metal.programs import build_against_gaacrt, run_counted


def test_metal_lossy_finalize_is_byte_identical_and_attention_matches_cpu(tmp_path):
    run_counted(build_against_gaacrt("tests/metal/kv_parity.cpp", tmp_path / "kv_parity"), 27)


def test_metal_e8_cache_logits_match_cpu_e8(tmp_path):
    pytest.importorskip("gguf")
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "smol.gguf", "llama", seed=11, weight_type="q4_1", n_layers=1, n_embd=576,
                            n_head=9, n_head_kv=3, head_dim=64, n_ff=1536)
    rng = np.random.default_rng(8)
    toks = [int(t) for t in rng.integers(3, 200, 164)]
    out = []
    for be in ("cpu", "metal-emulated"):
        m = gaacrt.Model(str(path), backend=be, n_threads=2)
        s = m.session(n_ctx=600, cache="e8")
        s.eval(toks[:162])
        rows = [s.logits().copy()]
        for t in toks[162:]:
            s.eval([t])
            rows.append(s.logits().copy())
        st = s.kv_stats()
        assert st["k"]["tiles_encoded"] > 0 and st["v"]["tiles_encoded"] > 0  # blocks past the window are E8
        out.append(np.array(rows))
    for a, b in zip(out[1], out[0]):
        assert np.linalg.norm(a - b) / np.linalg.norm(b) < 2e-2
        assert np.argmax(a) == np.argmax(b)
