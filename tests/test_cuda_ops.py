"""CUDA backend ops (issue 7) against the CPU backend on the same inputs, awkward sizes included.

Each op runs through gaacrt._core.op_* (python/src/backend_ops_bind.cpp): inputs uploaded, the
backend's op, result downloaded. Runs on the GPU machine; skipped with the reason elsewhere.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core
from fixtures.backend_compare import ROPE_CASES, rel, rope_case
from fixtures.cuda_target import CUDA, REASON

gguf = pytest.importorskip("gguf")
from gguf.quants import quantize  # noqa: E402

T = gguf.GGMLQuantizationType
pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")





@pytest.mark.parametrize("rows,dim", [(1, 576), (7, 640), (3, 33), (130, 1537)])
def test_cuda_rms_norm_matches_cpu_to_float_rounding(cuda, cpu, rows, dim):
    rng = np.random.default_rng(rows * dim)
    x = rng.standard_normal((rows, dim)).astype(np.float32) * 3
    w = rng.standard_normal(dim).astype(np.float32)
    a, b = _core.op_rms_norm(cuda, x, w, 1e-6), _core.op_rms_norm(cpu, x, w, 1e-6)
    np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("style", [0, 2], ids=["norm", "neox"])
@pytest.mark.parametrize("case", ROPE_CASES)
def test_cuda_rope_matches_cpu(cuda, cpu, style, case):
    x, pos, kw = rope_case(style, case)
    a, b = _core.op_rope(cuda, x, pos, **kw), _core.op_rope(cpu, x, pos, **kw)
    # Angles and cos/sin in double on both; the rotation in float.
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    if case == "partial_rot":  # dims past n_rot pass through untouched
        assert np.array_equal(a[:, :, 32:], x[:, :, 32:])


@pytest.mark.parametrize("n", [1, 1000, 123457])
def test_cuda_add_is_exact(cuda, cpu, n):
    rng = np.random.default_rng(n)
    y, x = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    assert np.array_equal(_core.op_add(cuda, y, x), y + x)


@pytest.mark.parametrize("act", [0, 1], ids=["silu", "gelu_tanh"])
def test_cuda_act_mul_matches_cpu(cuda, cpu, act):
    rng = np.random.default_rng(act)
    g = (rng.standard_normal(77777) * 4).astype(np.float32)
    u = rng.standard_normal(77777).astype(np.float32)
    np.testing.assert_allclose(_core.op_act_mul(cuda, g, u, act), _core.op_act_mul(cpu, g, u, act), rtol=1e-5, atol=1e-6)


def test_cuda_softcap_matches_cpu(cuda, cpu):
    x = np.linspace(-200, 200, 10001).astype(np.float32)
    np.testing.assert_allclose(_core.op_softcap(cuda, x, 30.0), _core.op_softcap(cpu, x, 30.0), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("t", [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K])
def test_cuda_get_rows_is_bit_identical_to_cpu(cuda, cpu, t):
    rng = np.random.default_rng(int(t))
    n_cols = 512 if gguf.GGML_QUANT_SIZES[t][0] > 1 else 77
    if t in (T.Q4_K, T.Q6_K):  # the gguf package cannot quantize K-quants: random blocks
        from test_cuda_backend import random_rows
        raw = random_rows(t, 50, n_cols, rng)
    else:
        w = rng.standard_normal((50, n_cols)).astype(np.float32)
        raw = np.ascontiguousarray(quantize(w, t).view(np.uint8).reshape(50, -1))
    ids = np.array([3, 49, 0, 3, 17], np.int32)
    a, b = _core.op_get_rows(cuda, raw, int(t), ids, 0.5), _core.op_get_rows(cpu, raw, int(t), ids, 0.5)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d):
    k = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
    v = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
    q = rng.standard_normal((n_q, n_head, d)).astype(np.float32)
    return k, v, q


@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d", [
    (1, 1, 9, 3, 64),          # one key
    (37, 1, 9, 3, 64),         # SmolLM2 shape, partial block
    (5000, 1, 32, 8, 128),     # long decode: many chunks, split across thread blocks
    (1100, 3, 4, 1, 256),      # Gemma-3 shape: two 128-channel tiles per head, a few queries
    (300, 70, 4, 2, 16),       # prefill: more rows than one pass, tiny head
    (17, 17, 2, 2, 32),        # whole-prompt prefill, no GQA
])
def test_cuda_attention_matches_cpu(cuda, cpu, n_ctx, n_q, n_head, n_kv, d):
    rng = np.random.default_rng(n_ctx + n_q)
    k, v, q = attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    a, b = _core.op_attention(cuda, k, v, q, s), _core.op_attention(cpu, k, v, q, s)
    assert rel(a, b) < 1e-5


# One sequence, one kv-head, so its decode splits across up to kMaxSplits thread blocks: 5,000 keys
# are 79 live splits of 64 (at d = 64 too), the window of 3,000 48.
@pytest.mark.parametrize("n_ctx,d,window", [(5000, 128, 0), (5000, 64, 0), (5000, 128, 3000)])
def test_cuda_decode_many_splits_merged_match_cpu(cpu, n_ctx, d, window, monkeypatch):
    # The fused reduce (kernels/attention_split_k.cuh merge_decode): the last thread block to arrive
    # merges every split's partial; within fp32 rounding of the CPU. (Merging in two levels, groups
    # of eight first, was tried and timed slower on an H100: bench/results/cuda_h200.md, 26th.)
    monkeypatch.setenv("GAACRT_CUDA_EMU_SMS", "64")  # cuda-emulated: SMs for every split (a GPU has its own)
    cuda = _core.open_backend(CUDA)
    rng = np.random.default_rng(n_ctx + d + window)
    k, v, q = attention_inputs(rng, n_ctx, 1, 4, 1, d)
    run = lambda backend: _core.op_attention(backend, k, v, q, 1 / np.sqrt(d), sliding_window=window)  # noqa: E731
    assert rel(run(cuda), run(cpu)) < 1e-5


@pytest.mark.parametrize("window,cap", [(24, 0.0), (0, 20.0), (7, 5.0)])
def test_cuda_attention_sliding_window_and_softcap_match_cpu(cuda, cpu, window, cap):
    rng = np.random.default_rng(window)
    k, v, q = attention_inputs(rng, 200, 40, 4, 1, 64)
    a = _core.op_attention(cuda, k, v, q, 0.2, sliding_window=window, softcap=cap)
    b = _core.op_attention(cpu, k, v, q, 0.2, sliding_window=window, softcap=cap)
    assert rel(a, b) < 1e-5


@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d,window", [
    (300, 70, 4, 2, 16, 0),      # tiny head, 2 query heads per kv-head
    (700, 300, 8, 8, 128, 0),    # no GQA: a row group is 16 tokens, its warps' ranges differ
    (900, 200, 32, 8, 128, 0),   # Llama-3 shape
    (400, 120, 8, 1, 64, 0),     # 8 query heads per kv-head: a row group is two tokens
    (1100, 40, 4, 1, 256, 0),    # two tiles per head
    (90, 40, 4, 1, 256, 0),      # ... on a short stream: its pages by cp.async, every warp a quarter
    (500, 150, 4, 1, 64, 40),    # sliding window: the warps' ranges start apart too
    (400, 100, 4, 1, 80, 0),     # padded heads: 80 channels run as 128 (zeroed columns beside the ring)
    (300, 64, 8, 2, 48, 0),      # ... and 48 as 64
])
def test_cuda_prefill_attention_on_one_stream_per_thread_block_is_bit_identical(cuda, n_ctx, n_q, n_head, n_kv, d,
                                                                                 window, monkeypatch):
    # A thread block's four warps on one stream of blocks, each block copied once (run_rows_shared,
    # the default for prefill-sized launches) against a copy per warp (GAACRT_CUDA_PREFILL_SHARED=0):
    # every warp sums the same blocks in the same order.
    # (Row groups of 16: the wide ones of 64 sum differently, test below.)
    rng = np.random.default_rng(n_ctx + n_q + d)
    k, v, q = attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", "0")
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_SHARED", "0")
    apart = _core.op_attention(cuda, k, v, q, 1 / np.sqrt(d), sliding_window=window)
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_SHARED")
    shared = _core.op_attention(cuda, k, v, q, 1 / np.sqrt(d), sliding_window=window)
    assert np.isfinite(shared).all()
    assert np.array_equal(shared.view(np.uint32), apart.view(np.uint32))


# Prefill-sized attention in row groups of 64 (attention_wide.cuh), in one-block and two-block steps.
WIDE_CASES = [
    (700, 300, 8, 8, 128, 0, 0.0),    # no GQA: a warp's 16 rows are 16 tokens, its blocks end mid-step
    (900, 200, 32, 8, 128, 0, 0.0),   # Llama-3 shape
    (913, 37, 32, 8, 128, 0, 0.0),    # an odd number of blocks: a two-block stream ends with one block
    (400, 120, 9, 3, 64, 0, 0.0),     # SmolLM2's group of 3: a warp's rows start mid-token
    (500, 150, 4, 1, 64, 40, 0.0),    # sliding window: a row group's rows see different blocks
    (700, 150, 8, 2, 128, 106, 0.0),  # ... at head 128: warp 1's window starts a block after warp 0's,
                                      # inside a two-block step (pos0 550: (551 - 106) % 16 = 13)
    (400, 100, 4, 1, 80, 0, 20.0),    # padded head (80 as 128), softcap
    (300, 64, 8, 2, 48, 7, 5.0),      # 48 as 64, a narrow window, softcap
]


@pytest.mark.parametrize("steps", ["default", "1"])
@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d,window,cap", [
    (300, 70, 4, 2, 16, 0, 0.0),      # tiny head; 70 x 2 rows: a partial row group of 64
] + WIDE_CASES)
def test_cuda_prefill_attention_in_wide_row_groups_matches_cpu(cuda, cpu, n_ctx, n_q, n_head, n_kv, d, window, cap,
                                                               steps, monkeypatch):
    # Prefill-sized sequences in row groups of 64 (attention_wide.cuh, the default up to head size
    # 128): 16 query rows per warp, each bf16 part of the query and of the weights an mma of its
    # own. The BF16 pages come by cp.async, every warp a quarter of each block (the newest block's
    # unwritten rows zero-filled by the copies; padded heads: warp 0).
    # GAACRT_CUDA_PREFILL_WIDE=1: steps of one block with three parts, within fp32's rounding of
    # the CPU (~5e-7 on cuda-emulated, which rounds where the tensor cores truncate). The default
    # at head size 128 (the two-block kernels, attention_prefill_pairs_*.cu): steps of two blocks
    # (32 keys between two barriers, one softmax step for both; keys a warp's rows cannot see in a
    # step masked) with two parts, 16 significant bits: ~3e-6 from the CPU, within the attention
    # tests' bound, and other bits than the one-block steps (so their kernel ran). The narrow path
    # (=0: row groups of 16, attention_block.cuh's key-row layout) takes two parts too.
    rng = np.random.default_rng(n_ctx * 7 + n_q + d)
    k, v, q = attention_inputs(rng, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    run = lambda backend: _core.op_attention(backend, k, v, q, s, sliding_window=window, softcap=cap)  # noqa: E731
    if steps == "default":
        monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)
    else:
        monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", steps)
    wide = run(cuda)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", "0")
    narrow = run(cuda)
    ref = run(cpu)
    assert np.isfinite(wide).all()
    assert rel(wide, ref) < 1e-5  # the attention tests' bound
    assert not np.array_equal(wide.view(np.uint32), narrow.view(np.uint32))  # the wide path ran
    assert rel(wide, narrow) < 1e-5
    two_block = steps == "default" and d > 64  # (heads up to 64: the one-block steps)
    if not two_block:
        assert rel(wide, ref) < 2e-6  # three parts
    else:
        monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", "1")
        one = run(cuda)
        assert rel(wide, one) < 1e-5
        assert not np.array_equal(wide.view(np.uint32), one.view(np.uint32))


@pytest.mark.parametrize("steps", ["4", "2"])
@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,window,cap", [
    (900, 200, 32, 8, 0, 0.0),    # Llama-3 shape
    (913, 37, 32, 8, 0, 0.0),     # an odd number of blocks: the stream's last step padded
    (700, 300, 8, 8, 0, 0.0),     # no GQA
    (700, 150, 8, 2, 106, 0.0),   # a window starting inside a step
    (640, 100, 8, 2, 0, 30.0),    # softcap
    (130, 70, 8, 2, 0, 0.0),      # a stream of 9 blocks: three steps, the last one block and three of padding
])
def test_cuda_wgmma_prefill_matches_cpu_and_mma_sync(cuda, cpu, monkeypatch, steps, n_ctx, n_q, n_head, n_kv, window,
                                                     cap):
    # On compute capability 9.0 the wide row groups at head size 128 run on the warpgroup mma
    # (attention_wide.cuh; GAACRT_CUDA_PREFILL_WGMMA=0 keeps mma.sync's two-block steps). Its steps
    # of four blocks (=4, the default for long sequences) sum other products than mma.sync's
    # two-block steps: within the attention tests' bound of the CPU and of mma.sync, and other bits
    # (so it ran). Its two-block steps (=2) are the same k16 products in the same order, which gave
    # mma.sync's bits.
    if gaacrt.cuda_devices(CUDA)[0]["compute_capability"] != (9, 0):
        pytest.skip("the wgmma prefill runs on compute capability 9.0 only")
    rng = np.random.default_rng(n_ctx + 5 * n_q)
    k, v, q = attention_inputs(rng, n_ctx, n_q, n_head, n_kv, 128)
    run = lambda b: _core.op_attention(b, k, v, q, 1 / np.sqrt(128), sliding_window=window, softcap=cap)  # noqa: E731
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WGMMA", steps)
    wg = run(cuda)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WGMMA", "0")
    mma = run(cuda)
    assert np.isfinite(wg).all()
    if steps == "2":
        assert np.array_equal(wg.view(np.uint32), mma.view(np.uint32))
    else:
        assert rel(wg, run(cpu)) < 1e-5  # the attention tests' bound
        assert rel(wg, mma) < 1e-5
        assert not np.array_equal(wg.view(np.uint32), mma.view(np.uint32))


@pytest.mark.parametrize("n_ctx,steps", [(900, "2"), (8200, "4")])
def test_cuda_wgmma_prefill_takes_four_block_steps_from_8192_tokens(cuda, monkeypatch, n_ctx, steps):
    # By default the warpgroup mma's steps are four blocks where the launch's longest sequence
    # reaches 8,192 tokens (attention.cu kWgFourBlockLen), else two: bit for bit the chosen one.
    if gaacrt.cuda_devices(CUDA)[0]["compute_capability"] != (9, 0):
        pytest.skip("the wgmma prefill runs on compute capability 9.0 only")
    rng = np.random.default_rng(n_ctx)
    k, v, q = attention_inputs(rng, n_ctx, 40, 8, 2, 128)
    run = lambda: _core.op_attention(cuda, k, v, q, 1 / np.sqrt(128))  # noqa: E731
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WGMMA", raising=False)
    default = run()
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WGMMA", steps)
    chosen = run()
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WGMMA", "2" if steps == "4" else "4")
    other = run()
    assert np.array_equal(default.view(np.uint32), chosen.view(np.uint32))
    assert not np.array_equal(default.view(np.uint32), other.view(np.uint32))


@pytest.mark.parametrize("d", [32, 64])
def test_cuda_prefill_attention_below_head_128_keeps_one_block_steps(cuda, monkeypatch, d):
    # The two-block kernels are built for head size 128 only: below it the default is the
    # one-block steps with three parts (GAACRT_CUDA_PREFILL_WIDE=1), bit for bit.
    rng = np.random.default_rng(3)
    k, v, q = attention_inputs(rng, 300, 70, 4, 2, d)
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)
    default = _core.op_attention(cuda, k, v, q, 0.2)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", "1")
    one = _core.op_attention(cuda, k, v, q, 0.2)
    assert np.array_equal(default.view(np.uint32), one.view(np.uint32))


def test_cuda_attention_is_a_softmax_over_bf16_keys_and_values(cuda):
    # Against float64 numpy: the cache stores BF16, so round k and v the same way first.
    rng = np.random.default_rng(5)
    k, v, q = attention_inputs(rng, 100, 2, 4, 2, 64)
    bf = lambda x: ((x.view(np.uint32).astype(np.uint64) + 0x7FFF + ((x.view(np.uint32) >> 16) & 1)) >> 16 << 16
                    ).astype(np.uint32).view(np.float32).astype(np.float64)
    kb, vb = bf(k), bf(v)
    ref = np.zeros(q.shape)
    for i in range(2):
        p = 98 + i
        for h in range(4):
            sc = kb[: p + 1, h // 2] @ q[i, h].astype(np.float64) * 0.125
            w = np.exp(sc - sc.max())
            ref[i, h] = w @ vb[: p + 1, h // 2] / w.sum()
    assert rel(_core.op_attention(cuda, k, v, q, 0.125), ref) < 1e-5
