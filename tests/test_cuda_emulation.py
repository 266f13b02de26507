"""The CUDA backend's kernels on the CPU, through the CUDA emulation (backends/cuda/emulation, issue 7).

CI has no GPU. The backend "cuda-emulated" is the very backends/cuda sources compiled as C++, a
block's threads run as fibers between synchronisation points, so a kernel's indexing, its warp
collectives, barriers, asynchronous copies and mma fragment layouts are checked here against the
CPU backend, and a bad synchronisation or a write past a buffer fails with the site named. It
does not model timing or registers, and its mma.sync rounds differently from the tensor cores, so
the GPU machine still runs every CUDA test on the GPU.

1. tests/cuda_emu/probe.cu pins down the emulation's own semantics (shuffles with masks and widths,
   cp.async landing at its wait, bulk copies at their mbarrier's, the errors for a divergent
   collective, a deadlock, shared memory above the kernel's limit and a write past an allocation,
   and mma.sync (bf16 and int8) / ldmatrix fragment layouts).
2. A selection of the CUDA test files runs against "cuda-emulated" (GAACRT_TEST_CUDA_BACKEND, read
   by tests/fixtures/cuda_target.py) in a subprocess each, which must pass with at least the
   given number of tests passed (none may fail; a selection that skipped everything fails).
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gaacrt

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
EMU = ROOT / "backends/cuda/emulation"

pytestmark = pytest.mark.skipif("cuda-emulated" not in gaacrt.compiled_backends(),
                                reason="this library was built without the CUDA emulation (GAACRT_CUDA_EMULATION=OFF)")


def test_cuda_emulation_semantics(tmp_path):
    exe = tmp_path / "probe"
    cmd = ["g++", "-std=c++17", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall", "-Wno-unknown-pragmas",
           "-D__CUDACC__", "-Dcuda=cuda_emulated", f"-I{EMU}", f"-I{ROOT / 'src'}", f"-I{ROOT / 'backends'}",
           "-x", "c++", "-include", str(EMU / "cuda_emu.h"), str(TESTS / "cuda_emu/probe.cu"), str(EMU / "cuda_emu.cpp"),
           str(EMU / "cuda_emu_mma.cpp"),
           "-x", "none", str(ROOT / "backends/emulation/fiber.cpp"), "-ldl", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"building the probe failed:\n{r.stderr}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    print(r.stdout)
    assert r.returncode == 0, f"probe failed:\n{r.stdout}\n{r.stderr}"
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and int(last.split()[0]) >= 22, last


# (test file, -k expression or None for all, fewest tests that must pass)
# Chosen to cover every kernel family in about ten minutes on two cores: the ops (attention on
# BF16 pages, prefill attention on one stream per thread block), every weight type's matvec and
# matmul, the fused ops, the lossy caches' kernels (E8 prefill on the tensor cores included), and
# the whole-model paths the last GPU-less sessions changed (grouped prefill launches, the shared
# prefill stream and its two-block steps, GAAC logits bit-identical to BF16, also with a
# calibration that makes every group 4-bit or raw, and through the prefill's expansion into BF16
# pages; a corrupt GAAC tile reported by either path). Where a GPU test is parametrized over
# settings that run the same kernels, the emulation takes a cross of them (the activation bits by
# the architecture, the calibration by the path; the one-stream prefill with the GAAC cache, whose
# newest blocks are BF16 pages on the same block path), which keeps the suite near 16 minutes on
# two cores; the GPU machine runs every case.
SELECTION = [
    ("test_cuda_ops.py", None, 45),
    ("test_cuda_backend.py", None, 100),
    ("test_fused_ops.py", "cuda", 60),
    ("test_cuda_lossy.py", "not model and not batched", 80),
    ("test_cuda_model.py",
     "(prefill_groups and (16-qwen2 or 8-llama)) or (one_stream and smollm2 and gaac) or (gaac_logits and smollm2)"
     " or (hostile and (raw-in-kernel or 4bit-expanded)) or two_block or (expanded_prefill and smollm2 and default)"
     " or (corrupt and smollm2)", 12),
]


@pytest.mark.parametrize("module,kexpr,min_passed", SELECTION, ids=[s[0] for s in SELECTION])
def test_cuda_tests_pass_on_the_emulation(module, kexpr, min_passed):
    env = dict(os.environ, GAACRT_TEST_CUDA_BACKEND="cuda-emulated", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TESTS / module)]
    if kexpr:
        cmd += ["-k", kexpr]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env, cwd=TESTS)
    tail = "\n".join(r.stdout.strip().splitlines()[-30:])
    print(tail)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error|errors|skipped)", tail)}
    assert r.returncode == 0, f"{module} on cuda-emulated:\n{tail}\n{r.stderr[-3000:]}"
    assert counts.get("passed", 0) >= min_passed, f"{module}: only {counts} on cuda-emulated\n{tail}"
