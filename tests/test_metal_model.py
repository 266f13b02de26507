"""Whole-model runs through the emulated Metal kernels (issue 8): the backend "metal-emulated" runs
gaacrt's one forward pass with every op on the .metal kernels under the MSL emulation.

- a real SmolLM2-135M decode step matches the CPU backend (same argmax, relative L2 <= 3e-2);
- on seeded synthetic models of SmolLM2's and Gemma-3's shapes: logits match the CPU, batched
  decode matches, and the GAAC cache's logits are bit-identical to the BF16 cache's (the same
  attention template, only the tile loader differs);
- a corrupt GAAC tile is reported, not read.
Few tokens and layers: speed does not matter under emulation, the suite's time does.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core

pytest.importorskip("gguf")
from fixtures.backend_compare import (  # noqa: E402
    assert_close_logits, batch_decode_logits, logits_run, shapes, write_shape_model)
from fixtures.backend_compare import rel as rel_l2  # noqa: E402

SHAPES = shapes(n_layers=2, sliding_window=24)


@pytest.fixture(scope="module", params=list(SHAPES))
def model_path(request, tmp_path_factory):
    return write_shape_model(tmp_path_factory, request.param, SHAPES[request.param])


def test_metal_smollm2_decode_step_matches_cpu(smollm2_path):
    cpu = gaacrt.Model(smollm2_path, backend="cpu", n_threads=2)
    met = gaacrt.Model(smollm2_path, backend="metal-emulated")
    assert met.backend == "metal-emulated"
    toks = cpu.tokenize("The capital of France is")
    out = []
    for m in (cpu, met):
        s = m.session(n_ctx=32)
        s.eval(toks)
        first = s.logits().copy()
        s.eval([int(np.argmax(first))])  # one decode step
        out.append((first, s.logits().copy()))
    for (g, w), what in zip(zip(out[1], out[0]), ("prefill", "decode step")):
        print(f"SmolLM2 {what}: relative L2 {rel_l2(g, w):.2e}, argmax {np.argmax(g)} vs {np.argmax(w)}")
        assert np.argmax(g) == np.argmax(w), what
        assert rel_l2(g, w) <= 3e-2, what


def test_metal_model_logits_match_cpu(model_path):
    cpu = gaacrt.Model(str(model_path), backend="cpu", n_threads=2)
    met = gaacrt.Model(str(model_path), backend="metal-emulated")
    rng = np.random.default_rng(3)
    toks = [int(t) for t in rng.integers(3, cpu.n_vocab, 44)]
    a, _ = logits_run(cpu, toks, 40, 4)
    b, _ = logits_run(met, toks, 40, 4)
    assert_close_logits(b, a)


def test_metal_gaac_logits_are_bit_identical_to_bf16(model_path):
    met = gaacrt.Model(str(model_path), backend="metal-emulated")
    rng = np.random.default_rng(4)
    toks = [int(t) for t in rng.integers(3, met.n_vocab, 70)]
    # A roomy arena: with a tight one the cache keeps full blocks raw (no slot room) and nothing is decoded.
    a, _ = logits_run(met, toks, 64, 6, cache="bf16", n_ctx=600)
    b, s = logits_run(met, toks, 64, 6, cache="gaac", n_ctx=600)
    st = s.kv_stats()
    assert st["k"]["tiles_encoded"] > 0 and st["v"]["tiles_encoded"] > 0  # slots were really read
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_metal_batched_decode_matches_cpu(model_path):
    cpu = gaacrt.Model(str(model_path), backend="cpu", n_threads=2)
    met = gaacrt.Model(str(model_path), backend="metal-emulated")
    rng = np.random.default_rng(5)
    prompts = [[int(t) for t in rng.integers(3, cpu.n_vocab, n)] for n in (20, 35, 9)]
    want, _ = batch_decode_logits(cpu, prompts, 3, n_ctx=64)
    got, _ = batch_decode_logits(met, prompts, 3, n_ctx=64)
    assert_close_logits(got, want)


def test_metal_reports_a_corrupt_gaac_tile(model_path):
    met = gaacrt.Model(str(model_path), backend="metal-emulated")
    ctx = _core.Context(met._m, n_ctx=600, cache="gaac")
    s = _core.Session(ctx)
    rng = np.random.default_rng(6)
    s.eval([int(t) for t in rng.integers(3, met.n_vocab, 48)])
    assert ctx._corrupt_first_slot_for_test(s, 1)
    with pytest.raises(gaacrt.GaacrtError, match="layer 1") as e:
        s.eval([100])
    assert e.value.kind == "corrupt_tile"
