"""Context._extend_for_bench, the hook the long-context benchmarks (bench/cuda_e2e.py,
bench/cuda_attention.py) build their caches with: it grows a sequence to n tokens by repeating its
complete blocks, in every layer and for every cache format, as byte copies of the tiles (raw pages
and compressed slots alike), then finalizes what the format would have compressed by then.
Runs on the CPU backend; the CUDA case at the end runs on the GPU machine.
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
