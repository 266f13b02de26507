"""bench/gen_8b.py's model (tests/fixtures/llama31_8b.py): the random-weight Llama-3.1-8B shape the
CUDA benchmarks run, here at its small size (same code path) with each body type, loaded and run
on the CPU backend: every projection has the type asked for and the logits are finite and spread.
"""
import numpy as np
import pytest

import gaacrt

gguf = pytest.importorskip("gguf")


@pytest.mark.parametrize("body_type,qt", [("q4_0", "Q4_0"), ("q4_k", "Q4_K")])
def test_gen_8b_small_model_of_each_body_type_loads_and_runs(tmp_path, body_type, qt):
    from fixtures.llama31_8b import write_llama31_8b
    path = write_llama31_8b(tmp_path / f"{body_type}.gguf", small=True, body_type=body_type)
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.0.ffn_down.weight"] == qt and types["token_embd.weight"] == qt
    assert types["output.weight"] == "Q6_K"
    s = gaacrt.Model(str(path), backend="cpu", n_threads=2).session(n_ctx=64)
    s.eval([1, 2, 3, 4, 5])
    logits = s.logits()
    assert np.isfinite(logits).all() and np.std(logits) > 0.1


def test_gen_8b_refuses_an_unknown_body_type(tmp_path):
    from fixtures.llama31_8b import write_llama31_8b
    with pytest.raises(ValueError, match="body_type 'q5_k'"):
        write_llama31_8b(tmp_path / "x.gguf", small=True, body_type="q5_k")
