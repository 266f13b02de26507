"""The benchmark hooks of Context (bench/cuda_attention.py, bench/record_kv.py): KV export and
import round-trip bit for bit, an imported GAAC cache attends exactly like a BF16 one, the
repeat-extension keeps the content, and batched timing runs."""
from __future__ import annotations

import numpy as np
import pytest

import gaacrt
from gaacrt import _core
from fixtures.tiny_models import write_tiny_model


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_tiny_model(tmp_path_factory.mktemp("hooks") / "m.gguf", "llama", seed=3, weight_type="q8_0",
                            n_layers=2, n_embd=256, n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    return gaacrt.Model(str(path), backend="cpu")


def test_export_import_round_trip(model):
    toks = [int(t) for t in np.random.default_rng(0).integers(3, model.n_vocab, 100)]
    c = _core.Context(model._m, n_ctx=512, cache="bf16")
    s = _core.Session(c)
    s.eval(toks)
    k, v = c._export_kv(s, 1)
    assert k.shape == (100, 2, 128) and k.dtype == np.uint16
    c2 = _core.Context(model._m, n_ctx=512, cache="bf16")
    s2 = _core.Session(c2)
    c2._import_kv_for_bench(s2, k[:37].copy(), v[:37].copy())  # a partial block, then the rest
    c2._import_kv_for_bench(s2, k[37:].copy(), v[37:].copy())
    for il in range(2):
        k2, v2 = c2._export_kv(s2, il)
        assert np.array_equal(k2, k) and np.array_equal(v2, v)  # every layer gets the same KV


def test_import_gaac_matches_bf16_and_batch_timing(model):
    rng = np.random.default_rng(1)
    k = (rng.standard_normal((640, 2, 128)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    v = (rng.standard_normal((640, 2, 128)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    outs = {}
    for cache in ("bf16", "gaac"):
        c = _core.Context(model._m, n_ctx=2048, n_seq_max=2, cache=cache)
        ss = [_core.Session(c) for _ in range(2)]
        for s in ss:
            c._import_kv_for_bench(s, k, v)
            c._extend_for_bench(s, 1280)
        if cache == "gaac":
            assert c.kv_stats()["k"]["tiles_encoded"] > 0
        assert c._time_attention_batch(ss, 0, 2) > 0
        assert c._time_attention_batch(ss, 1, 2, True) > 0
        s = ss[0]
        s.eval([5])  # one decode step over the imported, repeated cache
        outs[cache] = np.array(s.logits())
    assert np.array_equal(outs["bf16"], outs["gaac"])  # lossless: the same logits


def test_import_rejects_wrong_shape(model):
    c = _core.Context(model._m, n_ctx=512, cache="bf16")
    s = _core.Session(c)
    bad = np.zeros((16, 3, 128), np.uint16)
    with pytest.raises(gaacrt.GaacrtError, match="uint16 \\[n\\]\\[2\\]\\[128\\]"):
        c._import_kv_for_bench(s, bad, bad)
