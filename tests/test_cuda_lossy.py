"""CUDA kernels of the lossy cache formats (issue 7): E8 k2v2, q8 and kivi2 block finalization
byte-identical to the CPU backend's slots, attention (decode, GQA, prefill, the raw window) equal
to the CPU's to float rounding, and whole-model logits on GPU vs CPU.

Each op case runs through gaacrt._core.op_lossy_attention (python/src/backend_ops_bind.cpp): a
one-layer cache written by kv_store, its blocks older than `window` finalized by kv_finalize,
then attention. Runs on the GPU machine; skipped with the reason elsewhere.
"""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core
from fixtures.backend_compare import batch_decode_logits, rel
from fixtures.cuda_target import CUDA, REASON

pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")





def inputs(seed, n_ctx, n_q, n_head, n_kv, d, offset=0.0):
    rng = np.random.default_rng(seed)
    k = (rng.standard_normal((n_ctx, n_kv, d)) + offset).astype(np.float32)
    v = rng.standard_normal((n_ctx, n_kv, d)).astype(np.float32)
    q = rng.standard_normal((n_q, n_head, d)).astype(np.float32)
    return k, v, q


FORMATS = ["e8", "q8", "kivi2"]


# E8 keys: a thread block per 2 tokens of a block (a decode step's few jobs) or per 16 (a prefill's).
FINALIZE_TOKENS = ["2", "16"]


@pytest.mark.parametrize("fmt,tokens", [("e8", t) for t in FINALIZE_TOKENS] + [(f, None) for f in FORMATS[1:]])
@pytest.mark.parametrize("d,n_kv", [(32, 2), (64, 3), (96, 2), (128, 2), (256, 1)])
def test_cuda_lossy_finalize_is_byte_identical_to_cpu(cuda, cpu, fmt, tokens, d, n_kv, monkeypatch):
    if tokens:
        monkeypatch.setenv("GAACRT_CUDA_E8_FINALIZE_TOKENS", tokens)
    k, v, q = inputs(d + n_kv, 200, 1, n_kv, n_kv, d)
    k[5, 0, :] = 0.0  # a zero key (E8: norm 0) and a constant value group
    v[7, 0, :32] = 1.5
    ga = _core.op_lossy_attention(cuda, k, v, q, 0.1, fmt, window=0)
    ca = _core.op_lossy_attention(cpu, k, v, q, 0.1, fmt, window=0)
    assert ga[1].shape[0] > 0 and (ga[3] == 1).all() and (ca[3] == 1).all()
    assert np.array_equal(ga[1], ca[1]), f"K slots differ in {np.argwhere(ga[1] != ca[1])[:5]}"
    assert np.array_equal(ga[2], ca[2]), f"V slots differ in {np.argwhere(ga[2] != ca[2])[:5]}"


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("tokens", FINALIZE_TOKENS)
def test_cuda_e8_centered_finalize_is_byte_identical_to_cpu(cuda, cpu, d, tokens, monkeypatch):
    monkeypatch.setenv("GAACRT_CUDA_E8_FINALIZE_TOKENS", tokens)
    k, v, q = inputs(d, 160, 1, 2, 1, d, offset=2.0)  # keys sharing a common direction
    ga = _core.op_lossy_attention(cuda, k, v, q, 0.1, "e8", window=0, center=True)
    ca = _core.op_lossy_attention(cpu, k, v, q, 0.1, "e8", window=0, center=True)
    assert np.array_equal(ga[1], ca[1]) and np.array_equal(ga[2], ca[2])
    assert rel(ga[0], ca[0]) < 1e-4


def test_cuda_e8_decode_many_splits_merged_match_cpu(cpu, monkeypatch):
    # 5,000 keys of one kv-head: 79 live splits, the E8 kernel's partials merged by the last thread
    # block as BF16's are; within the lossy bound of the CPU.
    monkeypatch.setenv("GAACRT_CUDA_EMU_SMS", "64")  # cuda-emulated: SMs for every split
    cuda = _core.open_backend(CUDA)
    k, v, q = inputs(11, 5000, 1, 4, 1, 128)
    ca = _core.op_lossy_attention(cpu, k, v, q, 0.1, "e8", window=0)
    assert rel(_core.op_lossy_attention(cuda, k, v, q, 0.1, "e8", window=0)[0], ca[0]) < 1e-4


def test_cuda_refuses_e8_block_centering_by_name(cuda):
    # e8_center="block" is implemented on the CPU backend only (tests/test_e8_block_center.py).
    k, v, q = inputs(1, 64, 1, 2, 1, 64)
    with pytest.raises(gaacrt.GaacrtError, match="e8_center=block.*CPU backend only"):
        _core.op_lossy_attention(cuda, k, v, q, 0.1, "e8", window=0, center="block")


CASES = [
    # n_ctx, n_q, n_head, n_kv, d, window
    (37, 1, 9, 3, 64, 0),          # SmolLM2 decode, partial last block (raw), GQA 3
    (300, 1, 9, 3, 64, 128),       # SmolLM2 decode across the raw window
    (5000, 1, 32, 8, 128, 128),    # long decode, split across thread blocks, GQA 4
    (3000, 1, 8, 8, 128, 128),     # no GQA (R = 1)
    (2000, 1, 16, 8, 64, 64),      # GQA 2
    (1100, 3, 4, 1, 256, 128),     # Gemma-3 shape: two 128-channel halves, a few queries
    (700, 5, 32, 8, 128, 128),     # 20 rows: prefill-sized path
    (400, 70, 9, 3, 64, 128),      # prefill chunk crossing the window
    (260, 40, 2, 2, 32, 16),       # tiny head
    (500, 2, 4, 2, 96, 128),       # 96-channel head (tile of 96)
    (900, 4, 32, 8, 128, 128),     # 16 rows: four M-tiles of a decode step (E8: tensor cores)
    (600, 2, 8, 2, 64, 64),        # 8 rows: two M-tiles, two key groups per M-tile
    (260, 1, 4, 2, 32, 16),        # tiny head, decode
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d,window", CASES)
def test_cuda_lossy_attention_matches_cpu(cuda, cpu, fmt, n_ctx, n_q, n_head, n_kv, d, window):
    k, v, q = inputs(n_ctx + n_q + d, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    ga = _core.op_lossy_attention(cuda, k, v, q, s, fmt, window=window)
    ca = _core.op_lossy_attention(cpu, k, v, q, s, fmt, window=window)
    assert np.array_equal(ga[1], ca[1]) and np.array_equal(ga[2], ca[2])
    assert rel(ga[0], ca[0]) < 1e-4, rel(ga[0], ca[0])
    if window >= n_ctx:  # nothing compressed: the BF16 answer
        assert rel(ga[0], _core.op_attention(cpu, k, v, q, s)) < 1e-5


E8_PREFILL_CASES = [
    # n_ctx, n_q, n_head, n_kv, d, window
    (700, 5, 32, 8, 128, 128),   # 20 rows: one row group and a bit
    (400, 70, 9, 3, 64, 128),    # 210 rows: two slices of the query rotation, the raw window crossed
    (600, 150, 8, 8, 128, 64),   # no GQA: a row group's warps see ranges a block apart
    (260, 40, 2, 2, 32, 16),     # tiny head
    (2000, 40, 8, 2, 128, 0),    # every full block a slot, 160 rows: three 64-row groups, the last partial
]
# The E8 prefill paths: the tensor-core kernel in 64-row groups (attention_e8_wide.cuh, the
# default), in 16-row groups (GAACRT_CUDA_PREFILL_WIDE=0, run_rows_e8), and the CUDA-core kernel
# (GAACRT_CUDA_E8_MMA_PREFILL=0).
E8_PREFILL_PATHS = {"wide": ("1", "1"), "narrow": ("1", "0"), "cuda-cores": ("0", "1")}


def e8_prefill(backend, monkeypatch, path, k, v, q, s, window):
    on_mma, wide = E8_PREFILL_PATHS[path]
    monkeypatch.setenv("GAACRT_CUDA_E8_MMA_PREFILL", on_mma)
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", wide)
    return _core.op_lossy_attention(backend, k, v, q, s, "e8", window=window)


@pytest.mark.parametrize("path", list(E8_PREFILL_PATHS))
@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d,window", E8_PREFILL_CASES)
def test_cuda_e8_prefill_on_the_tensor_cores_matches_cpu(cuda, cpu, path, n_ctx, n_q, n_head, n_kv, d, window,
                                                        monkeypatch):
    # E8 prefill-sized sequences (queries rotated for every row first): each path the CPU's answer
    # to 1e-4.
    k, v, q = inputs(n_ctx + 7 * n_q + d, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    ga = e8_prefill(cuda, monkeypatch, path, k, v, q, s, window)
    ca = _core.op_lossy_attention(cpu, k, v, q, s, "e8", window=window)
    assert np.array_equal(ga[1], ca[1]) and np.array_equal(ga[2], ca[2])
    assert rel(ga[0], ca[0]) < 1e-4, rel(ga[0], ca[0])


@pytest.mark.parametrize("n_ctx,n_q,n_head,n_kv,d,window", E8_PREFILL_CASES)
def test_cuda_e8_prefill_in_wide_row_groups_matches_the_narrow_path(cuda, cpu, n_ctx, n_q, n_head, n_kv, d, window,
                                                                   monkeypatch):
    # The 64-row groups decode each code once per 16 rows and sum in a different order (the flash
    # layout, the weights' parts in fresh accumulators): other bits than the 16-row groups' (so
    # the wide path is the one that ran), the same answer within the suite's E8 bound, and as close
    # to the CPU's (within 2x of the narrow path's distance; on the emulation ~6e-7 wide, ~2.5e-6
    # narrow, whose weights are two bf16 parts, the wide path's two fp16 parts). On a GPU the
    # narrow path adds every block into its accumulators on the tensor cores, which truncate: its
    # distance may grow there, the wide path's should not.
    k, v, q = inputs(n_ctx + 7 * n_q + d, n_ctx, n_q, n_head, n_kv, d)
    s = 1 / np.sqrt(d)
    wide = e8_prefill(cuda, monkeypatch, "wide", k, v, q, s, window)[0]
    narrow = e8_prefill(cuda, monkeypatch, "narrow", k, v, q, s, window)[0]
    ca = _core.op_lossy_attention(cpu, k, v, q, s, "e8", window=window)[0]
    assert not np.array_equal(wide, narrow)
    assert rel(wide, narrow) < 1e-4, rel(wide, narrow)
    assert rel(wide, ca) < 2 * rel(narrow, ca) + 1e-7, (rel(wide, ca), rel(narrow, ca))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sw,cap", [(100, 0.0), (0, 20.0), (40, 5.0)])
@pytest.mark.parametrize("n_q", [30, 1])  # prefill-sized, and a decode step
def test_cuda_lossy_attention_sliding_window_and_softcap(cuda, cpu, fmt, sw, cap, n_q):
    k, v, q = inputs(sw + 1, 400, n_q, 4, 1, 64)
    ga = _core.op_lossy_attention(cuda, k, v, q, 0.2, fmt, window=32, sliding_window=sw, softcap=cap)
    ca = _core.op_lossy_attention(cpu, k, v, q, 0.2, fmt, window=32, sliding_window=sw, softcap=cap)
    assert rel(ga[0], ca[0]) < 1e-4


# ---- whole model -------------------------------------------------------------------------------
pytest.importorskip("gguf")
from fixtures.tiny_models import write_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("smollm2") / "smollm2.gguf", "llama", seed=11, weight_type="q4_1",
                            n_layers=4, n_embd=576, n_head=9, n_head_kv=3, head_dim=64, n_ff=1536)


def run_logits(model, toks, n_prefill, cache, center=False, chunk=None):
    c = _core.Context(model._m, n_ctx=len(toks) + 8, cache=cache, e8_center=center)
    s = _core.Session(c)
    chunk = chunk or n_prefill
    rows = [s.eval(toks[i:min(i + chunk, n_prefill)], all_logits=True) for i in range(0, n_prefill, chunk)]
    for t in toks[n_prefill:]:
        rows.append(s.eval([t], all_logits=True))
    return np.vstack(rows), c.kv_stats()


@pytest.mark.parametrize("cache,center", [("e8", False), ("e8", True), ("q8", False), ("kivi2", False)])
def test_cuda_lossy_model_logits_match_cpu(smollm2, cache, center):
    cpu = gaacrt.Model(str(smollm2), backend="cpu", n_threads=4)
    gpu = gaacrt.Model(str(smollm2), backend=CUDA)
    rng = np.random.default_rng(6)
    toks = [int(t) for t in rng.integers(3, cpu.n_vocab, 330)]
    a, sa = run_logits(cpu, toks, 300, cache, center)
    b, sb = run_logits(gpu, toks, 300, cache, center)
    assert sb["k"]["tiles_encoded"] > 0 and sb["k"]["tiles_encoded"] == sa["k"]["tiles_encoded"]
    # The two forwards differ by float rounding (matmul order), and a lossy cache turns the rare
    # BF16 rounding flip of a K/V element into a different 2-bit / lattice code, so single rows
    # scatter more than with a BF16 cache: the whole run must be within 3e-2, each row within 5e-2.
    rows = [np.linalg.norm(g.astype(np.float64) - w) / np.linalg.norm(w.astype(np.float64)) for g, w in zip(b, a)]
    total = rel(b, a)
    print(f"{cache} center={center}: relative L2 all rows {total:.3g}, worst row {max(rows):.3g}")
    assert total <= 3e-2 and max(rows) <= 5e-2


@pytest.mark.parametrize("path", ["wide", "narrow"])
def test_cuda_e8_chunked_prefill_logits_match_cpu(smollm2, path, monkeypatch):
    # A prefill in chunks of 100: the later chunks' attention reads the earlier ones' blocks as E8
    # slots (older than the raw window) through the prefill kernel, in 64-row groups
    # (attention_e8_wide.cuh) or 16 (GAACRT_CUDA_PREFILL_WIDE=0).
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", {"wide": "1", "narrow": "0"}[path])
    cpu = gaacrt.Model(str(smollm2), backend="cpu", n_threads=4)
    gpu = gaacrt.Model(str(smollm2), backend=CUDA)
    rng = np.random.default_rng(9)
    toks = [int(t) for t in rng.integers(3, cpu.n_vocab, 410)]
    a, sa = run_logits(cpu, toks, 400, "e8", chunk=100)
    b, sb = run_logits(gpu, toks, 400, "e8", chunk=100)
    assert sb["k"]["tiles_encoded"] > 0 and sb["k"]["tiles_encoded"] == sa["k"]["tiles_encoded"]
    rows = [np.linalg.norm(g.astype(np.float64) - w) / np.linalg.norm(w.astype(np.float64)) for g, w in zip(b, a)]
    print(f"e8 chunked prefill ({path}): relative L2 all rows {rel(b, a):.3g}, worst row {max(rows):.3g}")
    assert rel(b, a) <= 3e-2 and max(rows) <= 5e-2


@pytest.mark.parametrize("cache", ["e8", "q8"])
def test_cuda_lossy_batched_decode_matches_cpu(smollm2, cache):
    # Three sequences of one batch, two of them past the raw window (slots and raw pages), decoded
    # together: one attention launch over sequences of different lengths.
    cpu = gaacrt.Model(str(smollm2), backend="cpu", n_threads=4)
    gpu = gaacrt.Model(str(smollm2), backend=CUDA)
    rng = np.random.default_rng(8)
    prompts = [[int(t) for t in rng.integers(3, cpu.n_vocab, n)] for n in (230, 170, 20)]
    want, _ = batch_decode_logits(cpu, prompts, 8, n_ctx=256, cache=cache)
    got, _ = batch_decode_logits(gpu, prompts, 8, n_ctx=256, cache=cache)
    rows = [rel(g, w) for g, w in zip(got, want)]
    print(f"{cache} batched decode: worst row {max(rows):.3g}")
    assert rel(got, want) <= 3e-2 and max(rows) <= 5e-2
