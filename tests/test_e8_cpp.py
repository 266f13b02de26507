"""The E8 C++ unit tests (tests/cpp/test_e8_codebook.cpp, test_e8_rotation.cpp) built straight from
the sources three ways: under AddressSanitizer + UBSan, and for aarch64 under qemu, where the
recorded rotation and slot checksums must come out the same as on x86-64 (the rotation is
specified to be platform independent, src/codec/e8/e8_rotation.h).
"""
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["tests/cpp/test_main.cpp", "tests/cpp/test_e8_codebook.cpp", "tests/cpp/test_e8_rotation.cpp",
           "src/codec/e8/e8_rotation.cpp", "src/codec/e8/e8_keys.cpp", "src/codec/scalar/scalar_codecs.cpp",
           "src/common/error.cpp"]
FLAGS = ["-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra", "-Wno-unused-parameter",
         f"-I{ROOT / 'src'}", f"-I{ROOT / 'tests/cpp'}"]
CASES = 11


def _build(cxx, extra, out):
    r = subprocess.run([cxx, *FLAGS, *extra, *[str(ROOT / s) for s in SOURCES], "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_e8_cpp_units_pass_under_address_sanitizer(tmp_path):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler on PATH")
    exe = tmp_path / "e8_asan"
    _build(cxx, ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"], exe)
    r = subprocess.run([str(exe), "e8_"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{CASES} test cases, 0 failed" in r.stdout, r.stdout


def test_e8_rotation_and_slots_are_bit_identical_on_aarch64(tmp_path):
    cxx, qemu, sysroot = "aarch64-linux-gnu-g++", "qemu-aarch64", "/usr/aarch64-linux-gnu"
    if shutil.which(cxx) is None or shutil.which(qemu) is None or not pathlib.Path(sysroot).is_dir():
        if os.environ.get("GAACRT_REQUIRE_NEON") == "1":
            pytest.fail("GAACRT_REQUIRE_NEON=1 but the aarch64 cross compiler or qemu-user is missing")
        pytest.skip("needs g++-aarch64-linux-gnu and qemu-user")
    exe = tmp_path / "e8_arm"
    _build(cxx, ["-O2"], exe)
    r = subprocess.run([qemu, "-L", sysroot, str(exe), "e8_repro_"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("e8_repro_rotation_bits_are_the_recorded_ones", "e8_repro_key_slots_are_the_recorded_bytes",
                 "e8_repro_det_log_and_sincos_match_libm", "e8_repro_scores_match_dense_decode"):
        assert f"[ ok ] {name}" in r.stdout, r.stdout
