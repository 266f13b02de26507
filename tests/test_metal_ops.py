"""Metal kernels (issue 8) under the MSL emulation, op by op against the CPU backend.

The backend "metal-emulated" runs the very same backends/metal/kernels/*.metal sources, compiled as
C++ against backends/metal/emulation (a threadgroup's lanes as fibers, SIMD functions and barriers
as on the GPU), behind the Metal backend's portable host logic. Each op goes through
gaacrt._core.op_* / Backend.dequantize / Backend.matmul on the same inputs as the CPU backend,
awkward sizes included. What this cannot show: that Apple's compiler accepts the sources, and
real-GPU timing (README, "macOS").
"""
import numpy as np
import pytest

from gaacrt import _core
from fixtures.backend_compare import ROPE_CASES, rel, rope_case

gguf = pytest.importorskip("gguf")
from fixtures.tiny_quant import ALL_TYPES, random_rows  # noqa: E402

T = gguf.GGMLQuantizationType


@pytest.fixture(scope="module")
def metal():
    return _core.open_backend("metal-emulated")


def test_metal_emulated_backend_reports_itself(metal):
    assert metal.name == "metal-emulated"
    assert "emulation" in metal.device_name


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_metal_dequantize_is_bit_identical_to_cpu(metal, cpu, t):
    rng = np.random.default_rng(int(t))
    bs = gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, 37, bs * (3 if bs == 256 else 7) if bs > 1 else 227, rng)
    a, b = metal.dequantize(raw, int(t)), cpu.dequantize(raw, int(t))
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok", [1, 5, 41])  # matvec (1, 5: up to 8 tokens share a pass) and tiled matmul (41)
def test_metal_matmul_matches_float64(metal, cpu, t, n_tok):
    rng = np.random.default_rng(7 * int(t) + n_tok)
    bs = gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, 45, bs * (3 if bs == 256 else 5) if bs > 1 else 227, rng)
    x = rng.standard_normal((n_tok, raw.shape[1] // gguf.GGML_QUANT_SIZES[t][1] * bs)).astype(np.float32)
    w = cpu.dequantize(raw, int(t)).astype(np.float64)
    y = metal.matmul(raw, int(t), x)
    # fp32 activations (no 8-bit quantization as on the CPU): only summation rounding remains.
    assert rel(y, x.astype(np.float64) @ w.T) < 1e-5


@pytest.mark.parametrize("t", [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K])
def test_metal_get_rows_is_bit_identical_to_cpu(metal, cpu, t):
    rng = np.random.default_rng(int(t))
    raw = random_rows(t, 50, 512 if gguf.GGML_QUANT_SIZES[t][0] > 1 else 77, rng)
    ids = np.array([3, 49, 0, 3, 17], np.int32)
    a, b = _core.op_get_rows(metal, raw, int(t), ids, 0.5), _core.op_get_rows(cpu, raw, int(t), ids, 0.5)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("rows,dim", [(1, 576), (7, 640), (3, 33), (13, 1537)])
def test_metal_rms_norm_matches_cpu_to_float_rounding(metal, cpu, rows, dim):
    rng = np.random.default_rng(rows * dim)
    x = rng.standard_normal((rows, dim)).astype(np.float32) * 3
    w = rng.standard_normal(dim).astype(np.float32)
    np.testing.assert_allclose(_core.op_rms_norm(metal, x, w, 1e-6), _core.op_rms_norm(cpu, x, w, 1e-6),
                               rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("style", [0, 2], ids=["norm", "neox"])
@pytest.mark.parametrize("case", ROPE_CASES)
def test_metal_rope_matches_cpu_at_far_positions(metal, cpu, style, case):
    x, pos, kw = rope_case(style, case)
    a, b = _core.op_rope(metal, x, pos, **kw), _core.op_rope(cpu, x, pos, **kw)
    # No double in MSL: the angle is a two-float product reduced modulo 2 pi (rope.h).
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-6)
    if case == "partial_rot":
        assert np.array_equal(a[:, :, 32:], x[:, :, 32:])


@pytest.mark.parametrize("n", [1, 1000, 12345])
def test_metal_add_is_exact(metal, n):
    rng = np.random.default_rng(n)
    y, x = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    assert np.array_equal(_core.op_add(metal, y, x), y + x)


@pytest.mark.parametrize("act", [0, 1], ids=["silu", "gelu_tanh"])
def test_metal_act_mul_matches_cpu(metal, cpu, act):
    rng = np.random.default_rng(act)
    g = (rng.standard_normal(7777) * 4).astype(np.float32)
    u = rng.standard_normal(7777).astype(np.float32)
    np.testing.assert_allclose(_core.op_act_mul(metal, g, u, act), _core.op_act_mul(cpu, g, u, act), rtol=1e-5, atol=1e-6)


def test_metal_softcap_matches_cpu(metal, cpu):
    x = np.linspace(-200, 200, 1001).astype(np.float32)
    np.testing.assert_allclose(_core.op_softcap(metal, x, 30.0), _core.op_softcap(cpu, x, 30.0), rtol=1e-6, atol=1e-5)


def attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d):
    k = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
    v = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
    q = rng.standard_normal((n_q, n_head, d)).astype(np.float32)
    return k, v, q


@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d", [
    (1, 1, 9, 3, 64),          # one key
    (37, 1, 9, 3, 64),         # SmolLM2 shape, partial block
    (1100, 1, 8, 2, 128),      # decode over three 32-block chunks, merged in order
    (300, 3, 4, 1, 256),       # Gemma-3 shape: two 128-channel tiles per head, a few queries
    (90, 23, 4, 2, 16),        # prefill: query tiles of 8 tokens x 2 heads, tiny head
    (17, 17, 2, 2, 32),        # whole-prompt prefill, no GQA
])
def test_metal_attention_matches_cpu(metal, cpu, n_ctx, n_q, n_head, n_kv, d):
    rng = np.random.default_rng(n_ctx + n_q)
    k, v, q = attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    assert rel(_core.op_attention(metal, k, v, q, s), _core.op_attention(cpu, k, v, q, s)) < 1e-5


@pytest.mark.parametrize("window,cap", [(24, 0.0), (0, 20.0), (7, 5.0)])
def test_metal_attention_sliding_window_and_softcap_match_cpu(metal, cpu, window, cap):
    rng = np.random.default_rng(window)
    k, v, q = attention_inputs(rng, 120, 20, 4, 1, 64)
    a = _core.op_attention(metal, k, v, q, 0.2, sliding_window=window, softcap=cap)
    b = _core.op_attention(cpu, k, v, q, 0.2, sliding_window=window, softcap=cap)
    assert rel(a, b) < 1e-5
