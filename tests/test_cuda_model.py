"""Whole-model logits on the CUDA backend (issue 7): seeded synthetic models of SmolLM2-135M's
and Gemma-3-270m's shapes (fewer layers, the tiny fixture vocabulary), CPU vs CUDA on the same
weights and tokens, and the GAAC cache bit-identical to the BF16 cache on the GPU.

Runs on the GPU machine; skipped with the reason elsewhere.
"""
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gaacrt
from gaacrt import _core
from fixtures.cuda_target import CUDA, REASON

pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")

pytest.importorskip("gguf")
from fixtures.backend_compare import (  # noqa: E402
    assert_close_logits, batch_decode_logits, logits_run, rel, shapes, write_shape_model)

SHAPES = shapes(n_layers=4, sliding_window=64)  # layers cut down to keep the test fast


@pytest.fixture(scope="module", params=list(SHAPES))
def model_path(request, tmp_path_factory):
    return write_shape_model(tmp_path_factory, request.param, SHAPES[request.param])


@pytest.mark.parametrize("act_bits", [16, 8])
def test_cuda_model_logits_match_cpu(model_path, act_bits):
    # act_bits: both backends' activation precision (16, the default, or llama.cpp's 8).
    cpu = gaacrt.Model(str(model_path), backend="cpu", n_threads=4, act_bits=act_bits)
    gpu = gaacrt.Model(str(model_path), backend=CUDA, act_bits=act_bits)
    rng = np.random.default_rng(3)
    toks = [int(t) for t in rng.integers(3, cpu.n_vocab, 140)]
    a, _ = logits_run(cpu, toks, 120, 20)
    b, _ = logits_run(gpu, toks, 120, 20)
    print(f"{model_path.name}: max relative L2 per row",
          max(np.linalg.norm(x - y) / np.linalg.norm(y) for x, y in zip(b, a)))
    assert_close_logits(b, a)


@pytest.mark.parametrize("path", ["0", "bf16", "q8", "q16"])
def test_cuda_model_logits_with_each_prefill_matmul_match_cpu(model_path, path, monkeypatch):
    # The same comparison with each prefill matmul (GAACRT_CUDA_MMA_MATMUL): matmul.cu's CUDA-core
    # reference, the bf16 tensor cores (matmul_mma.cu), the int8 tensor cores on 8-bit and on 16-bit
    # activations (matmul_q8mma.cu; q16 is the default).
    monkeypatch.setenv("GAACRT_CUDA_MMA_MATMUL", path)
    test_cuda_model_logits_match_cpu(model_path, 16)


def test_cuda_q4_0_model_in_the_group8_layout_matches_cpu(tmp_path, monkeypatch):
    # Every matrix of this model is Q4_0; those of a multiple of 256 columns (all but the down
    # projection's 1,056) the GPU stores regrouped by eight (place_weight.cu), the down projection
    # keeps the GGUF bytes: its logits against the CPU's, and against the same
    # model loaded with the GGUF layout (GAACRT_CUDA_GROUP8=0; prefill gives the same bits, the
    # decode matvec's lanes split the values differently).
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "q4_0.gguf", "llama", seed=5, weight_type="q4_0", n_layers=2, n_embd=512,
                            n_head=8, n_head_kv=2, head_dim=64, n_ff=1056)
    cpu = gaacrt.Model(str(path), backend="cpu", n_threads=4)
    toks = [int(t) for t in np.random.default_rng(6).integers(3, cpu.n_vocab, 60)]
    want, _ = logits_run(cpu, toks, 50, 10)
    got, _ = logits_run(gaacrt.Model(str(path), backend=CUDA), toks, 50, 10)
    assert_close_logits(got, want)
    monkeypatch.setenv("GAACRT_CUDA_GROUP8", "0")
    plain, _ = logits_run(gaacrt.Model(str(path), backend=CUDA), toks, 50, 10)
    assert np.array_equal(got[:50].view(np.uint32), plain[:50].view(np.uint32))
    # Decode: each layout's matvec rounds its float partial sums in its own order, and the next
    # int8 quantization of the activations turns an ulp at a rounding edge into a whole step
    # (measured on the H200: 1.1e-2 relative L2), so the two are held to the GPU-vs-CPU bound.
    rel = max(np.linalg.norm(a - b) / np.linalg.norm(b) for a, b in zip(got[50:], plain[50:]))
    print("group8 vs GGUF layout, decode logits: max relative L2", rel)
    assert_close_logits(got[50:], plain[50:])


@pytest.mark.parametrize("arch,n_embd", [("llama", 64), ("llama", 1280), ("llama31", 64), ("qwen2", 64)])
def test_cuda_qkv_rope_in_one_launch_is_bit_identical(tmp_path, monkeypatch, arch, n_embd):
    # norm_qkv_rope_store: the Q/K/V matvec with RoPE and the cache store in its epilogue
    # (qkv_rope.cu) against the matvec then rope_store_kernel (GAACRT_CUDA_QKV_ROPE=0), for NORM
    # RoPE with the norm inside the launch (64 wide) and before it (1,280), llama3's frequency
    # factors, and NeoX RoPE with Q/K/V biases (qwen2); one-token and three-token decode steps.
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / f"{arch}.gguf", arch, seed=7, weight_type="q4_0", n_embd=n_embd,
                            n_head=4, n_head_kv=2, head_dim=64 if n_embd > 64 else 16)
    n_vocab = gaacrt.Model(str(path), backend="cpu").n_vocab
    toks = [int(t) for t in np.random.default_rng(8).integers(3, n_vocab, 40)]

    def run():
        m = gaacrt.Model(str(path), backend=CUDA)
        s = m.session(n_ctx=64)
        s.eval(toks[:20])
        rows = []
        for t in toks[20:30]:
            s.eval([t])
            rows.append(s.logits())
        for i in range(30, 39, 3):
            s.eval(toks[i:i + 3])
            rows.append(s.logits())
        return np.vstack(rows)

    fused = run()
    monkeypatch.setenv("GAACRT_CUDA_QKV_BLOCKS", "1")  # one token: the kernel without the register cap
    uncapped = run()
    monkeypatch.delenv("GAACRT_CUDA_QKV_BLOCKS")
    monkeypatch.setenv("GAACRT_CUDA_QKV_ROPE", "0")
    apart = run()
    assert np.isfinite(fused).all()
    assert np.array_equal(fused.view(np.uint32), apart.view(np.uint32))
    assert np.array_equal(uncapped.view(np.uint32), apart.view(np.uint32))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("act_bits", [16, 8])
def test_cuda_prefill_groups_are_bit_identical_to_a_launch_per_weight(tmp_path, monkeypatch, arch, act_bits):
    # A prefill's Q/K/V, gate/up (with the activation) and residual adds each as one launch of the
    # int8 tensor-core matmul (matmul_q8mma.cu MmaGroup), with 64- and 128-token thread blocks and
    # the tile chosen per launch (auto), against a launch per weight with act_mul and add after
    # them (GAACRT_CUDA_PREFILL_GROUP=0):
    # the same logits, bit for bit, after a 150-token prefill (a partial 128-token tile) and over
    # the decode steps after it; Q/K/V biases (qwen2); 16-bit and 8-bit activations.
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / f"{arch}.gguf", arch, seed=9, weight_type="q4_0", n_embd=512, n_head=8,
                            n_head_kv=2, head_dim=64, n_ff=1536)
    n_vocab = gaacrt.Model(str(path), backend="cpu").n_vocab
    toks = [int(t) for t in np.random.default_rng(10).integers(3, n_vocab, 156)]

    def run():
        s = gaacrt.Model(str(path), backend=CUDA, act_bits=act_bits).session(n_ctx=256)
        s.eval(toks[:150])
        rows = [s.logits()]
        for t in toks[150:]:
            s.eval([t])
            rows.append(s.logits())
        return np.vstack(rows)

    monkeypatch.setenv("GAACRT_CUDA_PREFILL_GROUP", "0")
    apart = run()
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_GROUP")
    for tile in ("64", "128", "auto"):
        monkeypatch.setenv("GAACRT_CUDA_Q8MMA_TOKENS", tile)
        grouped = run()
        assert np.isfinite(grouped).all()
        assert np.array_equal(grouped.view(np.uint32), apart.view(np.uint32)), f"{tile}-token tiles"


def test_cuda_gaac_logits_are_bit_identical_to_bf16(model_path):
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    rng = np.random.default_rng(4)
    toks = [int(t) for t in rng.integers(3, gpu.n_vocab, 330)]
    a, _ = logits_run(gpu, toks, 300, 30, cache="bf16")
    b, s = logits_run(gpu, toks, 300, 30, cache="gaac")
    st = s.kv_stats()
    print(f"{model_path.name}: GAAC stats", st)
    assert st["k"]["tiles_encoded"] > 0 and st["v"]["tiles_encoded"] > 0
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


# Head size 128 (the Llama-3 shapes'): GAAC bit-identical to BF16 and both near the CPU, over a
# context long enough for several decode splits and their fused reduce. In a fresh process per
# setting of GAACRT_CUDA_ATTN_BLOCKS_PER_SM (read once per process): the kernel built for two
# thread blocks per SM, and the one for three (one decoded GAAC tile that V reuses); and at three
# with GAACRT_CUDA_BULK_MIN_BLOCKS=0, so that the BF16 decode streams its pages by bulk copy (700
# tokens give a decode warp fewer blocks than the default threshold: cp.async).
HEAD_128_RUN = """
import sys
import numpy as np
import gaacrt
sys.path.insert(0, sys.argv[1])
from fixtures.backend_compare import assert_close_logits, logits_run
from fixtures.cuda_target import CUDA
path = sys.argv[2]
gpu = gaacrt.Model(path, backend=CUDA)
cpu = gaacrt.Model(path, backend="cpu", n_threads=4)
toks = [int(t) for t in np.random.default_rng(6).integers(3, gpu.n_vocab, 700)]
a, _ = logits_run(gpu, toks, 660, 40, cache="bf16")
b, s = logits_run(gpu, toks, 660, 40, cache="gaac")
assert s.kv_stats()["k"]["tiles_encoded"] > 0 and s.kv_stats()["v"]["tiles_encoded"] > 0
assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), "GAAC differs from BF16"
c, _ = logits_run(cpu, toks, 660, 40)
assert_close_logits(a, c)
print("head 128 ok")
"""


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for x in data:
        h = ((h ^ x) * 0x01000193) & 0xFFFFFFFF
    return h


def _hostile_sidecar(src: Path, dst: Path, b3: int | None, b4: int | None, capacity: int) -> Path:
    """A copy of a GAAC calibration sidecar (layout in src/codec/gaac/sidecar.cpp) with every 3-bit
    base set to b3 and every 4-bit base to b4 (None: kept), both escape capacities set to
    `capacity`, and its checksum redone."""
    b = bytearray(src.read_bytes())
    n_layer, n_head_kv, dk, dv = struct.unpack_from("<4i", b, 24)
    n = n_layer * n_head_kv * (dk + dv)
    struct.pack_into("<3I", b, 52, capacity, capacity, capacity)
    if b3 is not None:
        b[96:96 + n] = bytes([b3]) * n
    if b4 is not None:
        b[96 + n:96 + 2 * n] = bytes([b4]) * n
    struct.pack_into("<I", b, len(b) - 4, _fnv1a32(bytes(b[:-4])))
    dst.write_bytes(bytes(b))
    return dst


@pytest.mark.parametrize("expand", ["", "0"], ids=["expanded", "in-kernel"])
@pytest.mark.parametrize("mix", ["raw", "4bit"])
def test_cuda_gaac_with_a_hostile_calibration_is_bit_identical_to_bf16(tmp_path, monkeypatch, mix, expand):
    # Calibration decides the ratio, never correctness (shared/spec/gaac.md). With every base 0,
    # every group of every tile is raw (each lane 8 X bytes and 8 R records); with the 3-bit bases
    # 0, most groups are 4-bit and the rest raw (85% / 15% here). The escape capacity is the
    # largest a tile can use (128 channels: 1,280 bytes), so every tile is still a slot. Every lane
    # then takes the decode's rare paths: the escape offsets' high-bit ballots
    # (kernels/attention_tiles.cuh segment_prefix) and the raw-group repair (gaac_lane.cuh), in
    # the prefill (chunks of 64 tokens over encoded blocks: their tiles decoded into BF16 pages
    # first by default, attention_gaac_expand.cu; in the GAAC kernels' shared stream with
    # GAACRT_CUDA_GAAC_EXPAND=0) and in decode steps.
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "h128.gguf", "llama", seed=7, weight_type="q8_0", n_layers=2, n_embd=256,
                            n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    gpu = gaacrt.Model(str(path), backend=CUDA)
    good = tmp_path / "good.gaac"
    gaacrt.calibrate(gaacrt.Model(str(path), backend="cpu", n_threads=4), texts=["hello world " * 200], ctx=256,
                     out=str(good))
    cal = _hostile_sidecar(good, tmp_path / f"{mix}.gaac", 0, 0 if mix == "raw" else None, 1280)
    toks = [int(t) for t in np.random.default_rng(8).integers(3, gpu.n_vocab, 300)]
    if expand:
        monkeypatch.setenv("GAACRT_CUDA_GAAC_EXPAND", expand)

    def run(cache):
        s = gpu.session(n_ctx=320, cache=cache, n_ubatch=64, calibration=str(cal) if cache == "gaac" else None)
        rows = [s.eval(toks[:280], all_logits=True)]
        for t in toks[280:]:
            s.eval([t])
            rows.append(s.logits()[None])
        return np.vstack(rows), s

    a, _ = run("bf16")
    b, s = run("gaac")
    st = s.kv_stats()
    assert st["k"]["tiles_encoded"] > 0 and st["v"]["tiles_encoded"] > 0
    assert st["k"]["raw_tile_share"] == 0 and st["v"]["raw_tile_share"] == 0  # every tile a slot
    assert np.isfinite(a).all()
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("blocks,bulk_min,wide,chunks", [("2", "8", "", ""), ("3", "8", "", ""), ("3", "0", "", ""),
                                                          ("3", "8", "1", ""), ("3", "8", "", "2"), ("3", "8", "", "4")],
                         ids=["2", "3", "3-bulk", "3-one-block-steps", "3-splits-of-128", "3-splits-of-256"])
def test_cuda_gaac_head_128_is_bit_identical_to_bf16(tmp_path, blocks, bulk_min, wide, chunks):
    # The kernels built for two and for three thread blocks per SM (GAACRT_CUDA_ATTN_BLOCKS_PER_SM is
    # read once per process: a subprocess each; the prefill in the three-block build in two-block
    # steps by default, GAACRT_CUDA_PREFILL_WIDE=1 one-block steps), BF16 pages by bulk copy at any
    # length. GAAC's prefill in those kernels too, not through BF16 pages (GAACRT_CUDA_GAAC_EXPAND=0).
    # Decode splits of at least 1 (the default), 2 and 4 chunks of 64 keys (GAACRT_CUDA_MIN_SPLIT_CHUNKS):
    # the decode steps' 660-700 keys in 11 splits (6 on the emulation's four SMs), 6 and 3.
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "h128.gguf", "llama", seed=7, weight_type="q8_0", n_layers=2, n_embd=256,
                            n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    env = dict(os.environ, GAACRT_CUDA_ATTN_BLOCKS_PER_SM=blocks, GAACRT_CUDA_BULK_MIN_BLOCKS=bulk_min,
               GAACRT_CUDA_PREFILL_WIDE=wide, GAACRT_CUDA_GAAC_EXPAND="0", GAACRT_CUDA_MIN_SPLIT_CHUNKS=chunks)
    tests_dir = str(Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", HEAD_128_RUN, tests_dir, str(path)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "head 128 ok" in r.stdout, r.stdout + r.stderr


def _chunked_prefill_shared_vs_per_warp(gpu, cache, monkeypatch, n_tok=330):
    # A prompt prefilled in chunks of 64 tokens (n_ubatch), so that the later chunks attend to
    # blocks the GAAC cache has already encoded (in the GAAC kernels: GAACRT_CUDA_GAAC_EXPAND=0):
    # logits of every token with the prefill attention's
    # thread blocks on one stream of blocks in row groups of 16 (run_rows_shared) and with a copy
    # per warp (GAACRT_CUDA_PREFILL_SHARED=0): bit-identical. Then in row groups of 64 (the default
    # up to head size 128, attention_wide.cuh): other sums (~3e-7 apart per attention op), which
    # the quantized activations of the next layers amplify: on SmolLM2's shape the narrow path's
    # logits are 4e-4 from the CPU's and the wide path's 2.5e-4 from the narrow's (emulation).
    # Returns (narrow, wide).
    toks = [int(t) for t in np.random.default_rng(11).integers(3, gpu.n_vocab, n_tok)]

    def run():
        s = gpu.session(n_ctx=n_tok + 64, cache=cache, n_ubatch=64)
        return s.eval(toks, all_logits=True), s

    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)  # the defaults, whatever the caller set
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_SHARED", raising=False)
    monkeypatch.setenv("GAACRT_CUDA_GAAC_EXPAND", "0")  # GAAC's own kernels, not BF16 pages
    wide, _ = run()
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", "0")
    monkeypatch.setenv("GAACRT_CUDA_PREFILL_SHARED", "0")
    apart, _ = run()
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_SHARED")
    shared, s = run()
    monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE")
    monkeypatch.delenv("GAACRT_CUDA_GAAC_EXPAND")
    if cache == "gaac":
        assert s.kv_stats()["k"]["tiles_encoded"] > 0 and s.kv_stats()["v"]["tiles_encoded"] > 0
    assert np.isfinite(shared).all() and np.isfinite(wide).all()
    assert np.array_equal(shared.view(np.uint32), apart.view(np.uint32))
    assert rel(wide, shared) < 2e-3
    return shared, wide


@pytest.mark.parametrize("cache", ["bf16", "gaac"])
def test_cuda_prefill_on_one_stream_per_thread_block_is_bit_identical(model_path, cache, monkeypatch):
    # SmolLM2's shape (head 64, 3 query heads per kv-head) and Gemma-3's (head 256: two tiles per
    # head, four decode rounds, one per warp; a sliding window of 64 on its local layers; no wide
    # row groups: its "wide" run is the narrow path again).
    _chunked_prefill_shared_vs_per_warp(gaacrt.Model(str(model_path), backend=CUDA), cache, monkeypatch)


def test_cuda_prefill_on_one_stream_per_thread_block_head_128(tmp_path, monkeypatch):
    # Head 128 (the kernel built for three thread blocks per SM), one query head per kv-head (a row
    # group is 16 tokens: its warps' ranges differ by up to a block) and four; GAAC's chunked prefill
    # bit-identical to BF16's as well, in row groups of 16 and of 64.
    # A padded head (80 channels run as 128: the zeroed columns sit beside the shared ring).
    from fixtures.tiny_models import write_tiny_model
    for n_head_kv, head_dim in ((8, 128), (2, 128), (2, 80)):
        path = write_tiny_model(tmp_path / f"h{head_dim}_{n_head_kv}.gguf", "llama", seed=7, weight_type="q8_0",
                                n_layers=2, n_embd=256, n_head=8, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=256)
        gpu = gaacrt.Model(str(path), backend=CUDA)
        a = _chunked_prefill_shared_vs_per_warp(gpu, "bf16", monkeypatch)
        b = _chunked_prefill_shared_vs_per_warp(gpu, "gaac", monkeypatch)
        for x, y, rows in zip(a, b, ("16", "64")):
            assert np.array_equal(x.view(np.uint32), y.view(np.uint32)), f"GAAC differs from BF16 ({path.name}, {rows})"


@pytest.mark.parametrize("n_head,n_head_kv,head_dim", [(8, 8, 128), (8, 2, 128), (8, 2, 80)],
                         ids=["h128-g1", "h128-g4", "h80-g4"])
def test_cuda_prefill_in_two_block_steps_gaac_is_bit_identical_to_bf16(tmp_path, monkeypatch, n_head, n_head_kv,
                                                                       head_dim):
    # The wide row groups in steps of two blocks with two bf16 parts (attention_prefill_pairs_*.cu,
    # the default at head size 128): a prompt prefilled in chunks of 64 tokens, so that the later
    # chunks attend to blocks the GAAC cache has encoded (a step's two blocks decoded by different
    # warps). 310 tokens: the last chunk's newest block is partial and ends a two-block step (its
    # rows past the last token zeroed after the decode). A padded head (80 channels as 128).
    # GAAC's logits bit-identical to BF16's, with the chunks' tiles decoded into BF16 pages first
    # (attention_gaac_expand.cu: 64 tokens are 256 rows of a 4-head group, more than one row group;
    # one head per kv-head gives 64 rows, one group: the GAAC kernels) and with the GAAC kernels
    # (GAACRT_CUDA_GAAC_EXPAND=0); other sums than the one-block steps' (GAACRT_CUDA_PREFILL_WIDE=1),
    # within the wide path's bound of them.
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "m.gguf", "llama", seed=5, weight_type="q8_0", n_layers=2, n_embd=256,
                            n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=256)
    gpu = gaacrt.Model(str(path), backend=CUDA)
    toks = [int(t) for t in np.random.default_rng(12).integers(3, gpu.n_vocab, 310)]

    def run(cache, wide=None):
        if wide is None:
            monkeypatch.delenv("GAACRT_CUDA_PREFILL_WIDE", raising=False)
        else:
            monkeypatch.setenv("GAACRT_CUDA_PREFILL_WIDE", wide)
        s = gpu.session(n_ctx=len(toks) + 64, cache=cache, n_ubatch=64)
        return s.eval(toks, all_logits=True), s

    bf16, _ = run("bf16")
    gaac, s = run("gaac")
    # The GAAC kernels' own decode; BF16 launches then keep mma.sync's two-block steps too (on
    # compute capability 9.0 they take the wgmma kernel only where a GAAC launch would expand).
    monkeypatch.setenv("GAACRT_CUDA_GAAC_EXPAND", "0")
    in_kernel, _ = run("gaac")
    bf16_mma, _ = run("bf16")
    monkeypatch.delenv("GAACRT_CUDA_GAAC_EXPAND")
    one, _ = run("bf16", "1")
    assert s.kv_stats()["k"]["tiles_encoded"] > 0 and s.kv_stats()["v"]["tiles_encoded"] > 0
    assert np.isfinite(bf16).all()
    assert np.array_equal(gaac.view(np.uint32), bf16.view(np.uint32))
    assert np.array_equal(in_kernel.view(np.uint32), bf16_mma.view(np.uint32))
    assert rel(bf16, bf16_mma) < 2e-3
    assert rel(bf16, one) < 2e-3
    assert not np.array_equal(bf16.view(np.uint32), one.view(np.uint32))


@pytest.mark.parametrize("expand", ["", "1", "0"], ids=["default", "expanded", "in-kernel"])
def test_cuda_gaac_expanded_prefill_is_bit_identical_to_bf16(model_path, monkeypatch, expand):
    # A GAAC cache's prefill-sized attention through its tiles decoded once into BF16 pages
    # (attention_gaac_expand.cu), SmolLM2's shape (head 64: a tile's 16 decoders, half a warp) and
    # Gemma-3's (head 256: two tiles a head; sliding window 64 on its local layers, whose blocks
    # before the window are left out): chunks of 48 tokens over encoded blocks, bit-identical to
    # the BF16 cache's logits with the default, with =1 (every prefill-sized launch) and with the
    # GAAC kernels (=0). A 48-token chunk of SmolLM2's 3-head groups is 144 rows; of Gemma-3's
    # 4-head groups (one kv-head) 192: more than one row group either way.
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    toks = [int(t) for t in np.random.default_rng(14).integers(3, gpu.n_vocab, 250)]
    if expand:
        monkeypatch.setenv("GAACRT_CUDA_GAAC_EXPAND", expand)
    a, _ = logits_run(gpu, toks, 240, 10, cache="bf16", n_ctx=300, n_ubatch=48)
    b, s = logits_run(gpu, toks, 240, 10, cache="gaac", n_ctx=300, n_ubatch=48)
    st = s.kv_stats()
    assert st["k"]["tiles_encoded"] > 0 and st["v"]["tiles_encoded"] > 0
    assert np.isfinite(a).all()
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


# argv: tests dir, model, output .npy. A GAAC session's prefill in chunks of 64 tokens.
EXPAND_RUN = """
import sys
import numpy as np
import gaacrt
sys.path.insert(0, sys.argv[1])
from fixtures.cuda_target import CUDA
gpu = gaacrt.Model(sys.argv[2], backend=CUDA)
toks = [int(t) for t in np.random.default_rng(3).integers(3, gpu.n_vocab, 200)]
s = gpu.session(n_ctx=256, cache=sys.argv[4], n_ubatch=64)
np.save(sys.argv[3], s.eval(toks, all_logits=True))
if sys.argv[4] == "gaac":
    assert s.kv_stats()["k"]["tiles_encoded"] > 0
"""


def test_cuda_gaac_expansion_over_its_memory_cap_falls_back(tmp_path):
    # Which path a GAAC prefill took, by the attention timeline (attention_timeline.h: a line per
    # launch, naming the format it ran as): through BF16 pages by default, in the GAAC kernels with
    # GAACRT_CUDA_GAAC_EXPAND_MIB=0 (the cap, read once per process: a subprocess each). Either
    # way the BF16 cache's bits: its launches take the wgmma kernel (compute capability 9.0) only
    # where a GAAC launch would expand, so both caches run one kernel. The two paths' logits are
    # close, and the same bits but on 9.0 (where the wgmma kernel's four-block steps, which long
    # sequences take, sum other products).
    from fixtures.tiny_models import write_tiny_model
    path = write_tiny_model(tmp_path / "m.gguf", "llama", seed=5, weight_type="q8_0", n_layers=2, n_embd=256,
                            n_head=8, n_head_kv=2, head_dim=128, n_ff=256)
    tests_dir = str(Path(__file__).resolve().parent)
    logits, formats = {}, {}
    for cache in ("gaac", "bf16"):
        for cap in ("", "0"):
            line_file, out = tmp_path / f"timeline{cache}{cap}.txt", tmp_path / f"logits{cache}{cap}.npy"
            env = dict(os.environ, GAACRT_CUDA_ATTN_TIMELINE=str(line_file))
            for name in ("GAACRT_CUDA_GAAC_EXPAND", "GAACRT_CUDA_PREFILL_WGMMA"):
                env.pop(name, None)
            if cap:
                env["GAACRT_CUDA_GAAC_EXPAND_MIB"] = cap
            r = subprocess.run([sys.executable, "-c", EXPAND_RUN, tests_dir, str(path), str(out), cache], env=env,
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stdout + r.stderr
            logits[cache, cap] = np.load(out)
            formats[cache, cap] = [ln.split()[0] for ln in line_file.read_text().splitlines() if ln.strip()]
    # 200 tokens in chunks of 64: 4 prefill launches a layer, 2 layers; a chunk of 8 tokens (the
    # last) is 32 rows, one row group: the GAAC kernels either way. The others' 256 rows are more.
    assert formats["gaac", ""] == ["bf16"] * 6 + ["gaac"] * 2, formats["gaac", ""]
    assert formats["gaac", "0"] == ["gaac"] * 8, formats["gaac", "0"]
    for cap in ("", "0"):
        assert np.isfinite(logits["gaac", cap]).all()
        assert np.array_equal(logits["gaac", cap].view(np.uint32), logits["bf16", cap].view(np.uint32)), cap
    a, b = logits["gaac", ""], logits["gaac", "0"]
    assert rel(a, b) < 2e-3  # (the two-block test's bound against other sums)
    if gaacrt.cuda_devices(CUDA)[0]["compute_capability"] != (9, 0):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("expand", ["", "0"], ids=["expanded", "in-kernel"])
def test_cuda_reports_a_corrupt_gaac_tile(model_path, monkeypatch, expand):
    # A tile marked corrupt (reserved tags) is reported at the next synchronization, naming its
    # layer, by the prefill's expansion into BF16 pages and by the GAAC kernels' own decode, and in
    # a decode step.
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    if expand:
        monkeypatch.setenv("GAACRT_CUDA_GAAC_EXPAND", expand)
    rng = np.random.default_rng(6)
    for step in (80, 1):
        ctx = _core.Context(gpu._m, n_ctx=600, cache="gaac")
        s = _core.Session(ctx)
        s.eval([int(t) for t in rng.integers(3, gpu.n_vocab, 64)])
        assert ctx._corrupt_first_slot_for_test(s, 1)
        with pytest.raises(gaacrt.GaacrtError, match="layer 1") as e:
            s.eval([int(t) for t in rng.integers(3, gpu.n_vocab, step)])
            s.logits()
        assert e.value.kind == "corrupt_tile"


def test_cuda_batched_decode_matches_cpu(model_path):
    cpu = gaacrt.Model(str(model_path), backend="cpu", n_threads=4)
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    rng = np.random.default_rng(5)
    prompts = [[int(t) for t in rng.integers(3, cpu.n_vocab, n)] for n in (40, 75, 9)]
    want, _ = batch_decode_logits(cpu, prompts, 6)
    got, _ = batch_decode_logits(gpu, prompts, 6)
    assert_close_logits(got, want)


def graph_stats(session):
    return session._s.context._graph_stats()


@pytest.mark.parametrize("cache", ["bf16", "gaac"])
def test_cuda_graph_decode_is_bit_identical_to_eager(model_path, cache, monkeypatch):
    """40 decode steps after a 10-token prompt (crossing the 16/32/48 block boundaries; the GAAC
    cache calibrates itself at the first full block, which changes what a recorded step bakes in):
    replayed CUDA graphs give the eager logits bit for bit."""
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    rng = np.random.default_rng(6)
    toks = [int(t) for t in rng.integers(3, gpu.n_vocab, 50)]
    monkeypatch.setenv("GAACRT_CUDA_GRAPH", "0")
    a, s0 = logits_run(gpu, toks, 10, 40, cache=cache, n_ctx=256)  # room for GAAC's slots beside the pages
    assert graph_stats(s0)["replays"] == 0
    monkeypatch.setenv("GAACRT_CUDA_GRAPH", "1")
    b, s1 = logits_run(gpu, toks, 10, 40, cache=cache, n_ctx=256)
    st = graph_stats(s1)
    print(f"{model_path.name} {cache}: graph stats", st)
    assert st["replays"] >= 30 and st["captures"] >= 1
    if cache == "gaac":
        assert st["captures"] >= 2  # recorded again once calibration fixed the slot sizes
        assert s1.kv_stats()["k"]["tiles_encoded"] > 0
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_cuda_graph_batched_decode_is_bit_identical_to_eager(model_path, monkeypatch):
    gpu = gaacrt.Model(str(model_path), backend=CUDA)
    rng = np.random.default_rng(7)
    prompts = [[int(t) for t in rng.integers(3, gpu.n_vocab, n)] for n in (12, 30, 5)]
    outs = []
    for flag in ("0", "1"):
        monkeypatch.setenv("GAACRT_CUDA_GRAPH", flag)
        rows, ss = batch_decode_logits(gpu, prompts, 20)
        outs.append(rows)
        assert (graph_stats(ss[0])["replays"] > 0) == (flag == "1")
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
