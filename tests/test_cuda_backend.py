"""CUDA backend (issue 2): device query and real kernels checked against the CPU backend.

Runs on the GPU machine; where no CUDA device (or no CUDA backend) is present the tests are
skipped with the reason printed — CI has no GPU and only compiles the CUDA code.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core

gguf = pytest.importorskip("gguf")
from fixtures.tiny_quant import ALL_TYPES, random_rows  # noqa: E402
from fixtures.cuda_target import CUDA, REASON

T = gguf.GGMLQuantizationType

pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")


def test_cuda_device_query_reports_a_real_gpu():
    devs = gaacrt.cuda_devices(CUDA)
    assert devs, "cuda_unavailable_reason() is empty but no device is listed"
    d = devs[0]
    print("CUDA device:", d)
    assert d["total_memory"] > 1 << 30 and d["multiprocessors"] > 0
    assert d["compute_capability"] >= (8, 0)
    assert CUDA in gaacrt.compiled_backends()


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_cuda_dequantize_is_bit_identical_to_cpu(cuda, cpu, t):
    rng = np.random.default_rng(int(t))
    bs = gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, 37, bs * (3 if bs == 256 else 7) if bs > 1 else 227, rng)
    a, b = cuda.dequantize(raw, int(t)), cpu.dequantize(raw, int(t))
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok", [1, 3])
def test_cuda_matmul_matches_float64_within_1e_3(cuda, cpu, t, n_tok):
    rng = np.random.default_rng(7 * int(t) + n_tok)
    bs = gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, 101, bs * (3 if bs == 256 else 7) if bs > 1 else 227, rng)
    x = rng.standard_normal((n_tok, raw.shape[1] // gguf.GGML_QUANT_SIZES[t][1] * bs)).astype(np.float32)
    w = cpu.dequantize(raw, int(t)).astype(np.float64)
    ref = x.astype(np.float64) @ w.T
    y = cuda.matmul(raw, int(t), x)
    # Float weights keep fp32 activations (near-exact); quantized weights at decode sizes take the
    # dp4a path (matvec_q8.cu) on 16-bit x, as the CPU backend: one rounding of x to 16 bits per
    # 32 values (its 8-bit mode: test_cuda_8bit_activations_follow_the_backend_setting).
    tol = 1e-3
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < tol


@pytest.mark.parametrize("n_groups", [1, 3])
@pytest.mark.parametrize("t", [T.Q4_0, T.Q8_0, T.Q6_K], ids=lambda t: t.name)
def test_cuda_group8_layout_reads_the_same_weights(cuda, cpu, t, n_groups, monkeypatch):
    # Q4_0 / Q8_0 / Q6_K rows of whole groups of eight blocks are regrouped on upload (quant/group8.h,
    # place_weight.cu; GAACRT_CUDA_GROUP8=0 keeps the GGUF bytes). Every op reading weights must
    # see the same values: dequantize and get_rows the same bits as the CPU, the prefill kernels
    # the same bits as on the GGUF layout (their tiles hold the same integers at the same columns),
    # the decode matvec (1 and 8 tokens, lanes split the values differently) the same integer
    # sums up to float rounding. One group per row (a one-token matvec of at most 2,048 values
    # quantizes x itself: matvec_q8_self) and three (groups 0..2, every slot).
    rng = np.random.default_rng(int(t) + 800 + n_groups)
    n_cols = n_groups * 8 * gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, 70, n_cols, rng)
    x = rng.standard_normal((70, n_cols)).astype(np.float32)
    ids = np.array([69, 0, 5, 5], np.int32)

    def run():
        out = {"dequantize": cuda.dequantize(raw, int(t)), "get_rows": _core.op_get_rows(cuda, raw, int(t), ids, 1.0),
               "decode1": cuda.matmul(raw, int(t), x[:1]), "decode8": cuda.matmul(raw, int(t), x[:8])}
        for path in ("q16", "q8", "bf16", "0"):
            monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", path)
            out["prefill_" + path] = cuda.matmul(raw, int(t), x)
        monkeypatch.delenv("GAACRT_CUDA_MMA_MATMUL")
        return out

    grouped = run()
    monkeypatch.setenv("GAACRT_CUDA_GROUP8", "0")
    gguf_layout = run()
    w = cpu.dequantize(raw, int(t))
    assert np.array_equal(grouped["dequantize"].view(np.uint32), w.view(np.uint32))
    assert np.array_equal(grouped["get_rows"].view(np.uint32), w[ids].view(np.uint32))
    for name in grouped:
        if name.startswith("decode"):
            a, b = grouped[name], gguf_layout[name]
            assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-6, name
        else:
            assert np.array_equal(grouped[name].view(np.uint32), gguf_layout[name].view(np.uint32)), name
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    assert np.linalg.norm(grouped["decode8"] - ref[:8]) / np.linalg.norm(ref[:8]) < 1.5e-2


PREFILL_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]


def _prefill_case(cpu, t, n_tok, n_rows=101, blocks=(3, 7)):
    # 101 rows and 130 tokens leave partial tiles; 7 blocks of 32 columns a partial column step.
    # blocks: (K-quant super-blocks, 32-value blocks) per row.
    rng = np.random.default_rng(11 * int(t) + n_tok)
    bs = gguf.GGML_QUANT_SIZES[t][0]
    raw = random_rows(t, n_rows, bs * (blocks[0] if bs == 256 else blocks[1]), rng)
    x = rng.standard_normal((n_tok, raw.shape[1] // gguf.GGML_QUANT_SIZES[t][1] * bs)).astype(np.float32)
    ref = x.astype(np.float64) @ cpu.dequantize(raw, int(t)).astype(np.float64).T
    return raw, x, ref


@pytest.mark.parametrize("t", PREFILL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok", [9, 70, 130])
@pytest.mark.parametrize("path", ["bf16", "reference"])
def test_cuda_prefill_matmul_matches_float64(cuda, cpu, t, n_tok, path, monkeypatch):
    # The bf16 tensor-core prefill path (matmul_mma.cu): bf16 hi + lo parts of weights and
    # activations, three products, fp32 accumulation — close to fp32; and matmul.cu's fp32
    # reference kernel (GAACRT_CUDA_MMA_MATMUL=0).
    monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", "bf16" if path == "bf16" else "0")
    raw, x, ref = _prefill_case(cpu, t, n_tok)
    y = cuda.matmul(raw, int(t), x)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-4


@pytest.mark.parametrize("t", PREFILL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok", [9, 70, 130])
@pytest.mark.parametrize("act", ["q8", "q16"])
def test_cuda_int8_prefill_matmul_sums_the_integers_of_its_reference(cuda, cpu, t, n_tok, act, monkeypatch):
    # The int8 tensor-core paths (matmul_q8mma.cu, GAACRT_CUDA_MMA_MATMUL=q8 / q16) sum exactly the
    # integers of a reference, so they match it to float rounding: q8 the decode matvec (the same
    # int8 x; run 8 tokens at a time), q16 the CPU backend's matmul (its 16-bit activations, the
    # same bits, split into two bytes on the GPU). Against float64: the rounding of x. 133 rows
    # leave a partial 64-row tile, 23 blocks of 32 two full 256-column steps and a partial one (5
    # super-blocks: five steps); a small block beside large ones gets its own scale, an all-zero
    # block scale 0.
    monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", act)
    raw, x, _ = _prefill_case(cpu, t, n_tok, n_rows=133, blocks=(5, 23))
    x[0, :32] *= 1e-3
    x[1, 32:64] = 0.0
    ref = x.astype(np.float64) @ cpu.dequantize(raw, int(t)).astype(np.float64).T
    y = cuda.matmul(raw, int(t), x)
    if act == "q8":
        cuda8 = _core.open_backend(CUDA, act_bits=8)  # the decode matvec on 8-bit x
        same = np.concatenate([cuda8.matmul(raw, int(t), x[i:i + 8]) for i in range(0, n_tok, 8)])
    else:
        same = cpu.matmul(raw, int(t), x)
    assert np.linalg.norm(y - same) / np.linalg.norm(same) < 1e-5
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < (1.5e-2 if act == "q8" else 1e-3)


@pytest.mark.parametrize("t,n_cols", [(T.Q4_0, 512), (T.Q8_0, 256), (T.Q6_K, 2048), (T.Q4_K, 1280), (T.Q5_1, 736),
                                      (T.IQ4_XS, 512), (T.IQ4_NL, 224)], ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("act", ["q8", "q16"])
def test_cuda_int8_prefill_token_tiles_give_the_same_bits(cuda, t, n_cols, act, monkeypatch):
    # matmul_q8mma.cu's thread block takes 64 tokens or 128 (GAACRT_CUDA_Q8MMA_TOKENS; each warp 32
    # x 16 or 32 x 32 outputs): every output sums the same slices in the same order, so the same
    # bits. 200 tokens: a full and a partial 128-token tile (64: three full, one partial); 133 rows
    # a partial 64-row tile; the group-of-eight layout (Q4_0, Q8_0, Q6_K at whole groups) and the
    # GGUF one, and a partial 256-column step (IQ4_NL at 224, Q5_1 at 736).
    # (On an H200 every type here takes 128-token blocks; devices allowing a thread block under
    # 117 KiB of shared memory run the types with a min term (Q4_K, Q5_1) at 64 both times.)
    if t in (T.Q4_K, T.Q5_1) and gaacrt.cuda_devices(CUDA)[0]["compute_capability"] < (9, 0):
        pytest.skip("this device runs the 128-token tile of types with a min term at 64 tokens")
    monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", act)
    rng = np.random.default_rng(n_cols + (1 if act == "q8" else 2))
    raw = random_rows(t, 133, n_cols, rng)
    x = rng.standard_normal((200, n_cols)).astype(np.float32)
    x[3, :32] *= 1e-3
    out = {}
    for tile in ("64", "128"):
        monkeypatch.setenv("GAACRT_CUDA_Q8MMA_TOKENS", tile)
        out[tile] = cuda.matmul(raw, int(t), x)
    assert np.isfinite(out["64"]).all() and np.abs(out["64"]).max() > 0
    assert np.array_equal(out["64"].view(np.uint32), out["128"].view(np.uint32))


@pytest.mark.parametrize("t,n_rows,n_cols", [(T.Q4_0, 301, 4096), (T.Q4_0, 64, 14336), (T.Q6_K, 300, 4352),
                                            (T.Q6_K, 257, 4096), (T.Q8_0, 299, 4096), (T.Q4_K, 130, 4096)],
                         ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("act_bits", [16, 8])
def test_cuda_two_rows_per_warp_matvec_gives_the_same_bits(cuda, t, n_rows, n_cols, act_bits, monkeypatch):
    # One warp takes two rows of one token's matvec (the default; GAACRT_CUDA_MATVEC_ROWS=1 asks
    # one), each row summed in the same order: the same bits, odd row counts (the last warp's
    # second row past the end), the group-of-eight layout (Q4_0, Q8_0, Q6_K at 4,096 columns) and
    # the GGUF one (Q6_K at 4,352).
    # (Up to 2,048 columns one token takes matvec_q8_self, which quantizes x itself.)
    be = cuda if act_bits == 16 else _core.open_backend(CUDA, act_bits=8)
    rng = np.random.default_rng(n_rows * n_cols)
    raw = random_rows(t, n_rows, n_cols, rng)
    x = rng.standard_normal((1, n_cols)).astype(np.float32)
    monkeypatch.setenv("GAACRT_CUDA_MATVEC_ROWS", "1")
    one = be.matmul(raw, int(t), x)
    monkeypatch.setenv("GAACRT_CUDA_MATVEC_ROWS", "2")
    two = be.matmul(raw, int(t), x)
    assert np.array_equal(one.view(np.uint32), two.view(np.uint32))


@pytest.mark.parametrize("t", [T.Q4_0, T.Q4_1, T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K], ids=lambda t: t.name)
def test_cuda_int8_matvec_agrees_with_the_fp32_path(cuda, cpu, t):
    # 8 tokens take the dp4a path, 9 the fp32 reference path: same weights, same first 8 rows.
    rng = np.random.default_rng(int(t))
    raw = random_rows(t, 300, 1024, rng)
    x = rng.standard_normal((9, 1024)).astype(np.float32)
    a, b = cuda.matmul(raw, int(t), x[:8]), cuda.matmul(raw, int(t), x)[:8]
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-3


@pytest.mark.parametrize("t", [T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K, T.Q6_K], ids=lambda t: t.name)
@pytest.mark.parametrize("n_tok", [1, 8])
def test_cuda_8bit_activations_follow_the_backend_setting(cpu, t, n_tok):
    # act_bits picks the activation precision of the decode matvec as on the CPU backend: 16 bits
    # sums the CPU's own integers (float rounding apart), 8 bits rounds x to int8 per 32 values
    # (llama.cpp's precision, ~0.5% error), and the same x on both gives different results.
    rng = np.random.default_rng(11 * int(t) + n_tok)
    raw = random_rows(t, 257, 2048, rng)
    x = rng.standard_normal((n_tok, 2048)).astype(np.float32)
    x[:, :32] *= 1e-3  # a small block beside large ones: its own scale
    ref = x.astype(np.float64) @ cpu.dequantize(raw, int(t)).astype(np.float64).T
    y16 = _core.open_backend(CUDA, act_bits=16).matmul(raw, int(t), x)
    y8 = _core.open_backend(CUDA, act_bits=8).matmul(raw, int(t), x)
    err = lambda y: np.linalg.norm(y - ref) / np.linalg.norm(ref)  # noqa: E731
    assert np.linalg.norm(y16 - cpu.matmul(raw, int(t), x)) / np.linalg.norm(ref) < 1e-5
    assert err(y16) < 1e-4 and 1e-3 < err(y8) < 1.5e-2
    with pytest.raises(gaacrt.GaacrtError, match="act_bits"):
        _core.open_backend(CUDA, act_bits=4)
