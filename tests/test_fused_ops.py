"""Each backend's fused decode ops (backend.h: norm_matmuls, norm_gate_up, matmul_add) against the
reference composition of that same backend's primitive ops (backend.cpp), bit for bit — the
promise the model's forward relies on (a fused step and an unfused one give the same logits).

Runs on the CPU backend everywhere and on the CUDA backend where a GPU is usable (skipped with the
reason elsewhere). Shapes cover both CUDA decode paths: x of at most 2,048 values takes the
one-launch matvec (x quantized in every block), larger x is quantized once and the matvec adds
into y itself; 9 and 130 tokens take the prefill matmul (on CUDA each fused op one launch of it,
the composition a launch per matmul). The norms: rows of at most 1,024 values are
normed and quantized inside the matvec's launch (every thread block; matvec_q8.cu NormX), longer
ones (1,280, 3,072) in a launch of their own.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core

gguf = pytest.importorskip("gguf")
from fixtures.tiny_quant import random_rows  # noqa: E402
from fixtures.cuda_target import CUDA, REASON

T = gguf.GGMLQuantizationType
TYPES = [T.Q4_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q4_K, T.Q6_K, T.IQ4_XS]


@pytest.fixture(scope="module", params=["cpu", CUDA])
def backend(request):
    if request.param == CUDA and REASON:
        pytest.skip(f"no usable CUDA device: {REASON}")
    return _core.open_backend(request.param, n_threads=2) if request.param == "cpu" else _core.open_backend(CUDA)


def same_bits(a, b):
    assert a.shape == b.shape
    diff = np.flatnonzero(a.view(np.uint32).ravel() != b.view(np.uint32).ravel())
    assert diff.size == 0, f"{diff.size} of {a.size} values differ, first at {diff[0]}: {a.ravel()[diff[0]]} vs {b.ravel()[diff[0]]}"


def case(t, n_tok, dim, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n_tok, dim)) * 2).astype(np.float32)
    norm_w = rng.uniform(0.5, 1.5, dim).astype(np.float32)
    return rng, x, norm_w


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok,dim", [(1, 512), (3, 512), (1, 768), (8, 1024), (1, 1280), (1, 3072), (1, 4096), (9, 512)])
def test_norm_matmuls_fused_is_the_composition_bit_for_bit(backend, t, n_tok, dim):
    rng, x, norm_w = case(t, n_tok, dim, int(t) * 100 + n_tok + dim)
    ws = [(random_rows(t, r, dim, rng), int(t)) for r in (37, 16, 16)]  # Q, K, V
    ys, xn = _core.op_norm_matmuls(backend, x, norm_w, 1e-6, ws, fused=True)
    ys_ref, xn_ref = _core.op_norm_matmuls(backend, x, norm_w, 1e-6, ws, fused=False)
    same_bits(xn, xn_ref)
    for y, y_ref in zip(ys, ys_ref):
        same_bits(y, y_ref)
    assert np.abs(ys_ref[0]).max() > 0


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("act", [0, 1], ids=["silu", "gelu"])
@pytest.mark.parametrize("n_tok,dim", [(1, 512), (1, 768), (8, 1024), (1, 1280), (3, 3072), (1, 4096)])
def test_norm_gate_up_fused_is_the_composition_bit_for_bit(backend, t, act, n_tok, dim):
    rng, x, norm_w = case(t, n_tok, dim, int(t) * 10 + act + n_tok)
    gate, up = (random_rows(t, 45, dim, rng), int(t)), (random_rows(t, 45, dim, rng), int(t))
    h = _core.op_norm_gate_up(backend, x, norm_w, 1e-6, gate, up, act, fused=True)
    h_ref = _core.op_norm_gate_up(backend, x, norm_w, 1e-6, gate, up, act, fused=False)
    same_bits(h, h_ref)
    assert np.abs(h_ref).max() > 0


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok,n_cols", [(1, 512), (2, 1024), (1, 3072), (3, 3072), (9, 512)])
def test_matmul_add_fused_is_the_composition_bit_for_bit(backend, t, n_tok, n_cols):
    rng = np.random.default_rng(int(t) + 7 * n_tok + n_cols)
    raw = random_rows(t, 41, n_cols, rng)
    x = rng.standard_normal((n_tok, n_cols)).astype(np.float32)
    y = rng.standard_normal((n_tok, 41)).astype(np.float32)
    out = _core.op_matmul_add(backend, raw, int(t), x, y, fused=True)
    ref = _core.op_matmul_add(backend, raw, int(t), x, y, fused=False)
    same_bits(out, ref)
    assert not np.array_equal(out, y)  # the product was added


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("tile", ["64", "128"])
@pytest.mark.parametrize("act_kernel", ["q16", "q8"])
def test_prefill_sized_fused_ops_are_the_composition_bit_for_bit(backend, t, tile, act_kernel, monkeypatch):
    # Prefill sizes: on CUDA each fused op is one launch of the int8 tensor-core matmul
    # (matmul_q8mma.cu's MmaGroup: Q/K/V read with one x, gate and up in the same thread blocks
    # with the activation in the epilogue, the residual added in the epilogue), with 64- or
    # 128-token thread blocks (GAACRT_CUDA_Q8MMA_TOKENS); the composition runs a launch per
    # matmul, then act_mul / add; on 16-bit x (the default) and 8-bit (GAACRT_CUDA_MMA_MATMUL=q8).
    # 130 tokens: a partial token tile; 133/70/70, 45 and 41 rows: several row tiles per weight and
    # partial ones; 1,280 columns: a partial 256-column step for the 32-value types. (The CPU
    # backend reads neither setting: its fused ops against its composition.)
    monkeypatch.setenv("GAACRT_CUDA_Q8MMA_TOKENS", tile)
    monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", act_kernel)
    n_tok, dim = 130, 1280
    rng, x, norm_w = case(t, n_tok, dim, int(t) * 1000 + int(tile))
    ws = [(random_rows(t, r, dim, rng), int(t)) for r in (133, 70, 70)]
    ys, xn = _core.op_norm_matmuls(backend, x, norm_w, 1e-6, ws, fused=True)
    ys_ref, xn_ref = _core.op_norm_matmuls(backend, x, norm_w, 1e-6, ws, fused=False)
    same_bits(xn, xn_ref)
    for y, y_ref in zip(ys, ys_ref):
        same_bits(y, y_ref)
    gate, up = (random_rows(t, 45, dim, rng), int(t)), (random_rows(t, 45, dim, rng), int(t))
    for act in (0, 1):
        h = _core.op_norm_gate_up(backend, x, norm_w, 1e-6, gate, up, act, fused=True)
        same_bits(h, _core.op_norm_gate_up(backend, x, norm_w, 1e-6, gate, up, act, fused=False))
        assert np.abs(h).max() > 0
    raw = random_rows(t, 41, dim, rng)
    y = rng.standard_normal((n_tok, 41)).astype(np.float32)
    out = _core.op_matmul_add(backend, raw, int(t), x, y, fused=True)
    same_bits(out, _core.op_matmul_add(backend, raw, int(t), x, y, fused=False))
    assert not np.array_equal(out, y)


def test_fused_ops_refuse_mismatched_shapes(cpu):
    rng = np.random.default_rng(0)
    raw = random_rows(T.Q4_0, 8, 64, rng)
    with pytest.raises(ValueError, match="columns"):
        _core.op_norm_matmuls(cpu, np.zeros((1, 96), np.float32), np.ones(96, np.float32), 1e-6, [(raw, int(T.Q4_0))])
    with pytest.raises(ValueError, match=r"y must be \(n_tok, n_rows\)"):
        _core.op_matmul_add(cpu, raw, int(T.Q4_0), np.zeros((1, 64), np.float32), np.zeros((1, 9), np.float32))
    with pytest.raises(ValueError, match="1 to 3 weights"):
        _core.op_norm_matmuls(cpu, np.zeros((1, 64), np.float32), np.ones(64, np.float32), 1e-6, [])
