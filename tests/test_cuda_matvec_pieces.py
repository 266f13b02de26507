"""The CUDA decode matvec's weight unpacking (backends/cuda/kernels/matvec_pieces.cuh) checked on the
host under AddressSanitizer + UBSan, so CI (no GPU) runs it: tests/cpp/test_matvec_pieces.cpp
compares every quantized type's pieces with dequant_block. The kernels themselves are checked
against the CPU backend on the GPU machine (tests/test_cuda_backend.py).
"""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["tests/cpp/test_main.cpp", "tests/cpp/test_matvec_pieces.cpp", "src/common/error.cpp", "src/quant/types.cpp"]
FLAGS = ["-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra", "-Wno-unused-parameter",
         f"-I{ROOT / 'src'}", f"-I{ROOT / 'tests/cpp'}"]


def test_cuda_matvec_pieces_match_dequant_block_on_the_host(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    exe = tmp_path / "pieces"
    r = subprocess.run([cxx, *FLAGS, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        *[str(ROOT / s) for s in SOURCES], "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe), "cuda_matvec_pieces"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 test cases, 0 failed" in r.stdout, r.stdout
