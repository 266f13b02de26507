"""Context._extend_for_bench, the hook the long-context benchmarks (bench/cuda_e2e.py,
bench/cuda_attention.py) build their caches with: it grows a sequence to n tokens by repeating its
complete blocks, in every layer and for every cache format, as byte copies of the tiles (raw pages
and compressed slots alike), then finalizes what the format would have compressed by then. Also
the KV export/import hooks (recorded real-model KV for the attention benchmark) and batched
attention timing. Runs on the CPU backend; the CUDA case runs on the GPU machine.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core

FORMATS = ["bf16", "gaac", "e8", "q8", "kivi2"]
N_LAYER, N_KV = 3, 2


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path_factory.mktemp("hooks") / "m.gguf", "llama31", seed=3, n_layers=N_LAYER,
                            n_embd=128, n_head=4, n_head_kv=N_KV, head_dim=32)
    return gaacrt.Model(str(path), backend="cpu")


def prompt(m, n=300):
    return [int(t) for t in np.random.default_rng(0).integers(3, m.n_vocab, n)]


def extended(m, cache, n, n_prompt=300, backend_model=None, **ctx):
    c = _core.Context((backend_model or m)._m, n_ctx=n + 64, cache=cache, **ctx)
    s = _core.Session(c)
    s.eval(prompt(m, n_prompt))
    c._extend_for_bench(s, n)
    return c, s


def test_extend_keeps_gaac_bit_identical_to_bf16_in_every_layer(model):
    # GAAC is lossless: a wrong or missing tile copy in any layer would change the next logits.
    got = {}
    for cache in ("bf16", "gaac"):
        c, s = extended(model, cache, 1600)
        assert c.kv_stats()["tokens"] == 1600
        s.eval([5])
        got[cache] = s.logits()
    assert np.isfinite(got["bf16"]).all()
    assert np.array_equal(got["gaac"], got["bf16"])


def test_extend_differs_from_the_short_cache(model):
    # The copies are read: attending over 1600 repeated tokens is not attending over the 288 kept.
    c, s = extended(model, "bf16", 1600)
    s.eval([5])
    short = _core.Session(_core.Context(model._m, n_ctx=512, cache="bf16"))
    short.eval(prompt(model)[:288])
    short.eval([5])
    assert np.abs(s.logits() - short.logits()).max() > 1e-3


@pytest.mark.parametrize("cache", FORMATS)
def test_extend_fills_every_tile_of_every_layer(model, cache):
    c, s = extended(model, cache, 1600)
    st = c.kv_stats()
    tiles = N_LAYER * N_KV * 2 * (1600 // 16)
    assert st["tokens"] == 1600 and st["raw_pages_used"] + st["slots_used"] == tiles
    if cache != "bf16":
        # Compressed as a run of that length would be: everything older than the raw window.
        window = {"gaac": 0, "q8": 0}.get(cache, 128)
        assert st["slots_used"] >= N_LAYER * N_KV * 2 * ((1600 - window) // 16) - st["tiles_raw"]
    s.eval([5])
    assert np.isfinite(s.logits()).all()


def test_extend_to_a_multiple_of_the_prompt_keeps_the_lossy_raw_window_raw(model):
    # 2400 = 8 x 300-token prompts less their partial blocks (8 x 288 = 2304): the last blocks are
    # copies of the prompt's last (raw-window) blocks, as a real run of that length would hold them.
    c, s = extended(model, "e8", 2304, n_prompt=288)
    st = c.kv_stats()
    assert st["raw_pages_used"] == N_LAYER * N_KV * 2 * (128 // 16)


def test_extend_past_the_arena_raises_and_leaves_the_sequence_usable(model):
    page = 16 * 32 * 2
    c = _core.Context(model._m, n_ctx=4096, cache="bf16", budget_bytes=N_LAYER * N_KV * 2 * page * 40)
    s = _core.Session(c)
    s.eval(prompt(model))  # 19 blocks, the last partial
    with pytest.raises(gaacrt.GaacrtError, match="arena full") as e:
        c._extend_for_bench(s, 4000)
    assert e.value.kind == "arena_full"
    assert c.kv_stats()["tokens"] == 288  # the partial block is dropped, nothing else kept
    c._extend_for_bench(s, 600)          # what fits still does
    s.eval([5])
    assert np.isfinite(s.logits()).all() and c.kv_stats()["tokens"] == 601


def test_extend_on_cuda_matches_the_cpu(model):
    reason = gaacrt.cuda_unavailable_reason()
    if reason:
        pytest.skip(f"no usable CUDA device: {reason}")
    from fixtures.backend_compare import rel
    gpu = gaacrt.Model(model.path, backend="cuda")
    got = {}
    for cache in ("bf16", "gaac", "e8"):
        ref_c, ref_s = extended(model, cache, 1600)
        c, s = extended(model, cache, 1600, backend_model=gpu)
        assert c.kv_stats()["slots_used"] == ref_c.kv_stats()["slots_used"]
        ref_s.eval([5])
        s.eval([5])
        got[cache] = s.logits()
        assert rel(s.logits(), ref_s.logits()) < 3e-2
    assert np.array_equal(got["gaac"], got["bf16"])


# ---- KV export / import (bench/record_kv.py, bench/cuda_attention.py --kv) and batched timing ----
@pytest.fixture(scope="module")
def model128(tmp_path_factory):
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path_factory.mktemp("hooks128") / "m.gguf", "llama", seed=3, weight_type="q8_0",
                            n_layers=2, n_embd=256, n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    return gaacrt.Model(str(path), backend="cpu")


def test_export_import_round_trip(model128):
    toks = [int(t) for t in np.random.default_rng(0).integers(3, model128.n_vocab, 100)]
    c = _core.Context(model128._m, n_ctx=512, cache="bf16")
    s = _core.Session(c)
    s.eval(toks)
    k, v = c._export_kv(s, 1)
    assert k.shape == (100, 2, 128) and k.dtype == np.uint16
    c2 = _core.Context(model128._m, n_ctx=512, cache="bf16")
    s2 = _core.Session(c2)
    c2._import_kv_for_bench(s2, k[:37].copy(), v[:37].copy())  # a partial block, then the rest
    c2._import_kv_for_bench(s2, k[37:].copy(), v[37:].copy())
    for il in range(2):
        k2, v2 = c2._export_kv(s2, il)
        assert np.array_equal(k2, k) and np.array_equal(v2, v)  # every layer gets the same KV


def test_import_gaac_matches_bf16_and_batch_timing(model128):
    rng = np.random.default_rng(1)
    k = (rng.standard_normal((640, 2, 128)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    v = (rng.standard_normal((640, 2, 128)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    outs = {}
    for cache in ("bf16", "gaac"):
        c = _core.Context(model128._m, n_ctx=2048, n_seq_max=2, cache=cache)
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


def test_import_rejects_wrong_shape(model128):
    c = _core.Context(model128._m, n_ctx=512, cache="bf16")
    s = _core.Session(c)
    bad = np.zeros((16, 3, 128), np.uint16)
    with pytest.raises(gaacrt.GaacrtError, match="uint16 \\[n\\]\\[2\\]\\[128\\]"):
        c._import_kv_for_bench(s, bad, bad)
