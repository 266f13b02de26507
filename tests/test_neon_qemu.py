"""The NEON path, built with Debian's aarch64 cross compiler and run under qemu-aarch64 (issue 2).

Two builds of the C++ kernel tests (tests/cpp/test_main.cpp + test_vec_dot.cpp + test_vec_dot_q16.cpp):
one for armv8.2-a+dotprod (vdotq_s32) and one for plain armv8-a (vmull/vpadal), each checking NEON
vec_dot against the scalar reference for every weight type, with 8-bit and with Q16 (int16,
vmlal_s16) activations, and the NEON attention inner loops against the plain ones; and tests/cpp/tools/dequant_dump.cpp
built for aarch64, whose dequantization of random blocks must match gguf.quants.dequantize bit
for bit. Without the cross tools the tests skip, unless GAACRT_REQUIRE_NEON=1 (CI) makes that a
failure. Sources are compiled directly (no CMake) into a temporary directory.
"""
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CXX = "aarch64-linux-gnu-g++"
QEMU = "qemu-aarch64"
SYSROOT = "/usr/aarch64-linux-gnu"

# The kernel sources the programs need, and nothing that pulls in the rest of the core.
CORE_SOURCES = [
    "src/common/error.cpp", "src/quant/types.cpp",
    "backends/cpu/cpu_features.cpp", "backends/cpu/dequantize.cpp",
    "backends/cpu/quantize_act.cpp", "backends/cpu/quantize_act_neon.cpp",
    "backends/cpu/vec_dot.cpp", "backends/cpu/vec_dot_scalar.cpp", "backends/cpu/vec_dot_neon.cpp",
    "backends/cpu/vec_dot_q16_scalar.cpp", "backends/cpu/vec_dot_q16_neon.cpp",
    "backends/cpu/attention_math.cpp", "backends/cpu/attention_math_neon.cpp",
]
TEST_SOURCES = ["tests/cpp/test_main.cpp", "tests/cpp/test_vec_dot.cpp", "tests/cpp/test_vec_dot_q16.cpp",
                "tests/cpp/test_attention_math.cpp"]
FLAGS = ["-O2", "-std=c++17", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wextra",
         f"-I{ROOT / 'src'}", f"-I{ROOT / 'backends'}"]


def _require_tools():
    missing = [t for t in (CXX, QEMU) if shutil.which(t) is None]
    if not pathlib.Path(SYSROOT).is_dir():
        missing.append(SYSROOT)
    if missing:
        msg = (f"NEON tests need the aarch64 cross compiler and qemu-user (missing: {', '.join(missing)}; "
               "apt-get install g++-aarch64-linux-gnu qemu-user)")
        if os.environ.get("GAACRT_REQUIRE_NEON") == "1":
            pytest.fail("GAACRT_REQUIRE_NEON=1 but " + msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def arm_programs(tmp_path_factory):
    """Builds the three aarch64 programs in parallel; returns {name: path}."""
    _require_tools()
    out = tmp_path_factory.mktemp("neon")
    builds = {
        "tests_dotprod": (["-march=armv8.2-a+dotprod"], CORE_SOURCES + TEST_SOURCES),
        "tests_plain": (["-march=armv8-a"], CORE_SOURCES + TEST_SOURCES),
        "dequant_dump": (["-march=armv8-a"], CORE_SOURCES + ["tests/cpp/tools/dequant_dump.cpp"]),
    }
    procs = {}
    for name, (arch, sources) in builds.items():
        cmd = [CXX, *FLAGS, *arch, *[str(ROOT / s) for s in sources], "-o", str(out / name)]
        procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, p in procs.items():
        log, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"cross-compiling {name} failed:\n{log}"
    return {name: out / name for name in builds}


def _qemu(*args, timeout=120):
    return subprocess.run([QEMU, "-L", SYSROOT, *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("build,isa_line", [
    ("tests_dotprod", "tested isa: neon (dotprod)"),
    ("tests_plain", "tested isa: neon (no dotprod: vmull/vpadal)"),
])
def test_neon_vec_dot_matches_scalar_under_qemu(arm_programs, build, isa_line):
    r = _qemu(arm_programs[build])
    assert r.returncode == 0, f"aarch64 kernel tests failed:\n{r.stdout}\n{r.stderr}"
    assert isa_line in r.stdout, f"the NEON path was not the one tested:\n{r.stdout}"
    assert "[ ok ] simd_vec_dot_matches_scalar_for_every_type" in r.stdout
    assert "[ ok ] simd_activation_quantizers_are_bit_identical_to_scalar" in r.stdout
    assert "[ ok ] simd_q16_vec_dot_matches_scalar_for_every_type" in r.stdout
    assert "[ ok ] q16_kernels_stay_exact_at_every_formats_extreme_values" in r.stdout
    assert "[ ok ] simd_q16_quantizer_is_bit_identical_to_scalar" in r.stdout
    assert "attention math: neon" in r.stdout
    for case in ("attention_math_uses_the_simd_set_where_the_cpu_has_one", "attention_dots_match_the_plain_dot_products",
                 "attention_exp_is_within_3e_7_of_std_exp_on_the_softmax_range",
                 "attention_acc_rows_of_a_block_equals_its_rows_one_at_a_time",
                 "attention_scale_and_bf16_conversion_are_exact"):
        assert f"[ ok ] {case}" in r.stdout, r.stdout
    assert " 0 failed" in r.stdout


def test_aarch64_dequantization_is_bit_identical_to_gguf(arm_programs, tmp_path):
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize
    T = gguf.GGMLQuantizationType
    rng = np.random.default_rng(2024)
    specials = np.array([0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFC00, 0x3C00, 0xBC00], np.uint16)
    for t in [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]:
        bs, ts = gguf.GGML_QUANT_SIZES[t]
        nb = 64 if bs > 1 else 64 * 32
        raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)  # random scales: every fp16 class
        if bs > 1:  # and each special scale (±0, subnormals, ±Inf, ±1) at least once, as d
            d_at = 208 if t == T.Q6_K else 0
            raw[: len(specials), d_at:d_at + 2] = specials.view(np.uint8).reshape(-1, 2)
        n = nb * bs
        src, dst = tmp_path / f"{t.name}.bin", tmp_path / f"{t.name}.f32"
        raw.tofile(src)
        r = _qemu(arm_programs["dequant_dump"], int(t), n, src, dst)
        assert r.returncode == 0, r.stderr
        got = np.fromfile(dst, np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # Inf * 0 scales: NaN, as in C
            ref = dequantize(raw.reshape(-1), t).astype(np.float32).reshape(-1)
        same = (got.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(got) & np.isnan(ref))
        assert same.all(), f"{t.name}: {np.count_nonzero(~same)} of {n} values differ on aarch64"
