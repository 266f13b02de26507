"""Builds the C++ test programs of tests/metal against the installed gaacrt library (headers from
src/ and backends/, libgaacrt beside gaacrt._core), for tests/test_metal_*.py."""
import shutil
import subprocess
from pathlib import Path

import gaacrt

ROOT = Path(__file__).resolve().parents[2]
PKG = Path(gaacrt._core.__file__).resolve().parent


def build_against_gaacrt(source: str, out: Path) -> Path:
    cxx = shutil.which("g++") or shutil.which("clang++")
    assert cxx, f"no C++ compiler to build {source}"
    cmd = [cxx, "-std=c++17", "-O1", "-ffp-contract=off", f"-I{ROOT / 'src'}", f"-I{ROOT / 'backends'}",
           str(ROOT / source), f"-L{PKG}", "-lgaacrt", f"-Wl,-rpath,{PKG}", "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"building {source} failed:\n{r.stderr}"
    return out


def run_counted(exe: Path, expect_passed: int) -> str:
    """Runs a program that ends with 'N passed, M failed'; asserts all of its checks passed."""
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last == f"{expect_passed} passed, 0 failed", last
    return r.stdout
