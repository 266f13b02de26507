"""CPU quantized matvec (issues 2, 4): activation quantizers, vec_dot kernels per ISA, matmul.

The contract (shared/spec/gguf.md §2.7, §2.9): activations are quantized to 8 bits exactly as
llama.cpp's reference quantizers do (act_bits=8), or to Q16 (act_bits=16: int16 with an fp32
scale per 32 values, backends/cpu/quantize_act.h), integer dot products are summed per block, and
the result is within 1e-2 (8 bits) / 1e-4 (16 bits) relative L2 of exact math on the dequantized
weights. Every SIMD path computes the same integers as the scalar reference, so ISAs agree to
float-summation-order noise, and a token's output does not depend on how many tokens share the
call (bit for bit).
"""
import ctypes
import os
import pathlib

import numpy as np
import pytest

import gaacrt
from gaacrt import _core

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize, quantize  # noqa: E402

T = gguf.GGMLQuantizationType

QUANTIZABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]  # gguf.quants.quantize works
RANDOM_BYTES = [T.IQ4_NL, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]  # no numpy quantizer: random blocks
ALL_TYPES = QUANTIZABLE + RANDOM_BYTES
ISAS = _core.cpu_isas()
SIMD_ISAS = [i for i in ISAS if i != "scalar"]
ACT_BITS = [8, 16]
TOL = {8: 1e-2, 16: 1e-4}  # relative L2 to exact math on the dequantized weights


def block_size(t):
    return gguf.GGML_QUANT_SIZES[t][0]


def type_size(t):
    return gguf.GGML_QUANT_SIZES[t][1]


def fp16_bytes(values):
    return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def make_weights(t, n_rows, n_cols, rng):
    """Raw GGUF rows (n_rows, row_bytes) of type t holding plausible weights."""
    if t in QUANTIZABLE:
        w = rng.standard_normal((n_rows, n_cols)).astype(np.float32) * 0.05
        return np.ascontiguousarray(quantize(w, t).view(np.uint8).reshape(n_rows, -1))
    bs, ts = block_size(t), type_size(t)
    nb = n_rows * (n_cols // bs)
    blocks = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    scale = lambda: fp16_bytes(rng.uniform(1e-4, 2e-3, size=nb))  # noqa: E731
    if t == T.Q6_K:
        blocks[:, 208:210] = scale()  # d sits at the end (spec §2.6)
    else:
        blocks[:, 0:2] = scale()  # d
        if t in (T.Q4_K, T.Q5_K):
            blocks[:, 2:4] = scale()  # dmin
    return blocks.reshape(n_rows, -1)


def reference(raw, t, x):
    w = dequantize(raw, t).astype(np.float64)
    return x.astype(np.float64) @ w.T


def rel_l2(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def odd_cols(t):
    # Odd multiples of the block size: 7 blocks of 32, 3 super-blocks of 256; float types 7*32+3.
    return {1: 227, 32: 32 * 7, 256: 256 * 3}[block_size(t)]


@pytest.mark.parametrize("act_bits", ACT_BITS)
@pytest.mark.parametrize("n_tok", [1, 5])
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_matvec_is_within_tolerance_of_float64_reference_for_odd_block_counts(t, n_tok, act_bits):
    rng = np.random.default_rng(1000 + int(t) * 7 + n_tok)
    n_rows, n_cols = 67, odd_cols(t)
    raw = make_weights(t, n_rows, n_cols, rng)
    x = rng.standard_normal((n_tok, n_cols)).astype(np.float32)
    ref = reference(raw, t, x)
    for isa in ISAS:
        y = _core.matvec(raw, t.name, x, n_threads=2, isa=isa, act_bits=act_bits)
        assert y.shape == (n_tok, n_rows) and y.dtype == np.float32
        err = rel_l2(y, ref)
        assert err < TOL[act_bits], f"{t.name} isa={isa} act_bits={act_bits}: relative L2 error {err:.3g}"


@pytest.mark.parametrize("act_bits", ACT_BITS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_every_isa_agrees_with_scalar(t, act_bits):
    # Every kernel sums the same integers per block; only the order of the float additions that
    # follow differs (SIMD: block results in 8 or 4 FMA lanes, scalar: one serial sum), which
    # costs ~1e-7 relative — far below the error of quantizing the activations.
    rng = np.random.default_rng(int(t))
    n_cols = block_size(t) * (9 if block_size(t) > 1 else 301)
    raw = make_weights(t, 45, n_cols, rng)
    x = rng.standard_normal((3, n_cols)).astype(np.float32)
    ys = _core.matvec(raw, t.name, x, isa="scalar", act_bits=act_bits).astype(np.float64)
    for isa in SIMD_ISAS:
        err = rel_l2(_core.matvec(raw, t.name, x, isa=isa, act_bits=act_bits), ys)
        assert err < 1e-5, f"{t.name} {isa} act_bits={act_bits}: {err:.3g} relative to scalar"


@pytest.mark.parametrize("act_bits", ACT_BITS)
@pytest.mark.parametrize("t", ALL_TYPES, ids=lambda t: t.name)
def test_matvec_rows_tokens_and_threads_do_not_change_the_result(t, act_bits):
    # Each output is one vec_dot whatever the split: 1 or 2 threads, 1 or many tokens (prefill's
    # row chunks and 2-row x 4-token tiles, whose every pair runs the 1x1 kernel's exact operations)
    # give identical bits. 131 rows, 9 tokens: chunks, tiles and thread ranges all end unevenly.
    rng = np.random.default_rng(7)
    n_cols = block_size(t) * 5 if block_size(t) > 1 else 160
    raw = make_weights(t, 131, n_cols, rng)
    x = rng.standard_normal((9, n_cols)).astype(np.float32)
    for isa in ISAS:
        y1 = _core.matvec(raw, t.name, x, n_threads=1, isa=isa, act_bits=act_bits)
        y2 = _core.matvec(raw, t.name, x, n_threads=2, isa=isa, act_bits=act_bits)
        np.testing.assert_array_equal(y1, y2)
        for k in (0, 4, 8):
            np.testing.assert_array_equal(_core.matvec(raw, t.name, x[k], isa=isa, act_bits=act_bits), y1[k])


@pytest.mark.parametrize("act_bits", ACT_BITS)
def test_matvec_of_zero_activations_is_zero(act_bits):
    rng = np.random.default_rng(3)
    for t in ALL_TYPES:
        n_cols = odd_cols(t)
        raw = make_weights(t, 8, n_cols, rng)
        for isa in ISAS:
            y = _core.matvec(raw, t.name, np.zeros(n_cols, np.float32), isa=isa, act_bits=act_bits)
            np.testing.assert_array_equal(y, np.zeros(8, np.float32), err_msg=f"{t.name} {isa}")


def test_q16_beats_8_bit_activations_by_two_orders_of_magnitude():
    # Why Q16 exists: with int16 the activation's rounding (~1/65534 of the block max) is no
    # longer what limits the product; with 8 bits it is (~1/254).
    rng = np.random.default_rng(21)
    for t in [T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K, T.Q6_K]:
        n_cols = 256 * 4
        raw = make_weights(t, 64, n_cols, rng)
        x = rng.standard_normal((4, n_cols)).astype(np.float32)
        ref = reference(raw, t, x)
        e8 = rel_l2(_core.matvec(raw, t.name, x, act_bits=8), ref)
        e16 = rel_l2(_core.matvec(raw, t.name, x, act_bits=16), ref)
        assert e16 < e8 / 100, f"{t.name}: act_bits 16 error {e16:.3g}, 8 bits {e8:.3g}"


# ---- activation quantizers against llama.cpp's own (ggml's quantize_row_q8_*_ref) ---------------

def _q8k_numpy(x):
    """quantize_row_q8_K_ref transcribed: signed max, iscale=-127/max, round half even, clamp 127."""
    out = bytearray()
    for blk in x.reshape(-1, 256):
        ax = np.abs(blk)
        if ax.max() == 0:
            out += np.float32(0).tobytes() + bytes(256) + bytes(32)
            continue
        mx = blk[int(np.argmax(ax))]  # the first index of the largest |x|, as the C loop's '>'
        iscale = np.float32(-127.0) / mx
        q = np.minimum(127, np.rint(iscale * blk)).astype(np.int8)
        bsums = q.reshape(16, 16).astype(np.int16).sum(axis=1).astype(np.int16)
        out += (np.float32(1.0) / iscale).astype(np.float32).tobytes() + q.tobytes() + bsums.tobytes()
    return np.frombuffer(bytes(out), np.uint8)


def test_q8_0_activations_are_bit_identical_to_gguf_quantize():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(32 * 9) * rng.choice([1e-3, 1, 300], 32 * 9)).astype(np.float32)
    x[32:64] = 0  # an all-zero block: d = 0, q = 0
    x[64:96] = np.arange(-16, 16) + 0.5  # with amax = 127, d = 1 and every x*id is a tie:
    x[64] = -127.0                       # roundf rounds half away from zero, np.round would not
    expect = quantize(x.reshape(1, -1), T.Q8_0).view(np.uint8).ravel()
    for isa in ISAS:
        np.testing.assert_array_equal(_core.quantize_act(x, "q4_0", isa=isa), expect, err_msg=isa)
        np.testing.assert_array_equal(_core.quantize_act(x, "iq4_nl", isa=isa), expect, err_msg=isa)


def test_q8_k_activations_match_the_reference_transcription():
    rng = np.random.default_rng(12)
    x = rng.standard_normal(256 * 3).astype(np.float32)
    x[256:512] = 0
    x[600] = -9.0  # the signed max is negative: iscale > 0 ...
    x[700] = 9.0  # ... and a later +9.0 ties with it: the first one (-9.0) sets the sign
    for isa in ISAS:
        np.testing.assert_array_equal(_core.quantize_act(x, "q4_K", isa=isa), _q8k_numpy(x), err_msg=isa)


def _q16_numpy(x):
    """Q16 transcribed (backends/cpu/quantize_act.h): d = amax/32767 (0 below 1e-30), q = round
    half to even of x*(1/d) in float32, s = d*Σq; laid out as d[nb], s[nb], q[n]."""
    b = x.reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = np.where(amax >= np.float32(1e-30), amax / np.float32(32767), np.float32(0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(b * inv[:, None]), -32767, 32767).astype(np.int16)
    s = (d * q.astype(np.int32).sum(axis=1).astype(np.float32)).astype(np.float32)
    return np.concatenate([d.view(np.uint8), s.view(np.uint8), q.reshape(-1).view(np.uint8)])


def test_q16_activations_match_the_numpy_transcription():
    rng = np.random.default_rng(14)
    x = (rng.standard_normal(32 * 16) * np.repeat(rng.choice([1e-4, 1, 300], 16), 32)).astype(np.float32)
    x[32:64] = 0  # all-zero block
    x[64:96] = np.arange(-16, 16) + 0.5  # with amax = 32767, d = 1 and every x/d is a tie
    x[64] = -32767.0
    x[96:128] *= np.float32(1e-33)  # below the 1e-30 floor: quantizes to zeros
    expect = _q16_numpy(x)
    for isa in ISAS:
        for wt in ("q4_0", "q5_1", "q4_K", "q6_K", "iq4_xs"):  # one Q16 format for every quantized type
            np.testing.assert_array_equal(_core.quantize_act(x, wt, isa=isa, act_bits=16), expect, err_msg=f"{isa} {wt}")
    np.testing.assert_array_equal(_core.quantize_act(x, "f16", act_bits=16), x.view(np.uint8))  # floats stay floats


def _ggml_base():
    try:
        import llama_cpp
    except ImportError:
        if os.environ.get("GAACRT_REQUIRE_LLAMA_CPP") == "1":
            pytest.fail("GAACRT_REQUIRE_LLAMA_CPP=1 but llama_cpp (llama-cpp-python) is not importable")
        pytest.skip("llama-cpp-python not installed: cannot call ggml's reference quantizers")
    libdir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    for name in ("libggml-base.so", "libggml-base.dylib"):
        if (libdir / name).exists():
            return ctypes.CDLL(str(libdir / name))
    pytest.fail(f"llama_cpp is installed but {libdir} has no libggml-base")


@pytest.mark.parametrize("weight_type,ref_fn,act_bytes,qk", [
    ("q8_0", "quantize_row_q8_0_ref", 34, 32),
    ("q5_1", "quantize_row_q8_1_ref", 36, 32),
    ("q6_K", "quantize_row_q8_K_ref", 292, 256),
])
def test_activation_quantizers_are_bit_identical_to_ggml_reference(weight_type, ref_fn, act_bytes, qk):
    lib = _ggml_base()
    fn = getattr(lib, ref_fn)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    rng = np.random.default_rng(13)
    n = qk * 12
    x = (rng.standard_normal(n) * np.repeat(rng.choice([1e-4, 0.1, 1, 1e3], n // qk), qk)).astype(np.float32)
    x[qk:2 * qk] = 0  # all-zero block (ggml leaves Q8_K bsums untouched there: buffer pre-zeroed)
    x[2 * qk:3 * qk] = np.round(x[2 * qk:3 * qk] * 4) / 4  # many ties
    expect = np.zeros(n // qk * act_bytes, np.uint8)
    fn(x.ctypes.data, expect.ctypes.data, n)
    for isa in ISAS:
        np.testing.assert_array_equal(_core.quantize_act(x, weight_type, isa=isa), expect, err_msg=isa)


# ---- real model rows ----------------------------------------------------------------------------

REAL_TENSORS = [
    ("smollm2-135m", "blk.0.attn_q.weight", None),    # Q4_1
    ("smollm2-135m", "blk.0.ffn_down.weight", None),  # Q4_1, 1536 columns
    ("smollm2-135m", "token_embd.weight", 384),       # Q8_0 (first rows only)
    ("gemma3-270m", "blk.0.attn_q.weight", None),     # Q5_0
    ("gemma3-270m", "blk.0.attn_output.weight", None),  # Q4_K
    ("gemma3-270m", "blk.0.ffn_down.weight", None),   # Q6_K
    ("gemma3-270m", "blk.0.attn_v.weight", None),     # Q8_0
]


@pytest.fixture(scope="module")
def gguf_files():
    files = {}

    def get(model):
        if model not in files:
            try:
                files[model] = gaacrt.GGUFFile(gaacrt.models.get(model))
            except Exception as e:  # offline and not cached
                pytest.skip(f"model {model} not available: {e}")
        return files[model]
    return get


@pytest.mark.parametrize("model,name,max_rows", REAL_TENSORS, ids=[f"{m}:{n}" for m, n, _ in REAL_TENSORS])
def test_real_model_rows_are_within_tolerance_of_float64_reference(gguf_files, model, name, max_rows):
    f = gguf_files(model)
    info = f.tensor_info(name)
    qt = T(int(_core.type_info(info.type)["id"]))
    n_cols, n_rows = info.shape[0], info.shape[1]
    raw = f.tensor_bytes(name).reshape(n_rows, -1)[: max_rows or n_rows]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, n_cols)).astype(np.float32)
    ref = reference(raw, qt, x)
    for isa in ISAS:
        for bits in ACT_BITS:
            err = rel_l2(_core.matvec(raw, qt.name, x, n_threads=2, isa=isa, act_bits=bits), ref)
            assert err < TOL[bits], f"{model}:{name} ({qt.name}) isa={isa} act_bits={bits}: relative L2 error {err:.3g}"


# ---- bad input ----------------------------------------------------------------------------------

def test_matvec_rejects_bad_inputs_naming_the_expected_form():
    raw = make_weights(T.Q4_0, 4, 64, np.random.default_rng(0))
    x = np.zeros(64, np.float32)
    with pytest.raises(TypeError, match="float32"):
        _core.matvec(raw, "q4_0", x.astype(np.float64))
    with pytest.raises(TypeError, match="uint8"):
        _core.matvec(raw.view(np.int8), "q4_0", x)
    with pytest.raises(TypeError, match=r"\(n_rows, row_bytes\)"):
        _core.matvec(raw.ravel(), "q4_0", x)
    with pytest.raises(TypeError, match="C-contiguous"):
        _core.matvec(np.asfortranarray(np.concatenate([raw, raw])), "q4_0", x)
    with pytest.raises(TypeError, match=r"\(n_tok, n_cols\)"):
        _core.matvec(raw, "q4_0", np.zeros((1, 1, 64), np.float32))
    with pytest.raises(ValueError, match="x has 32 columns"):
        _core.matvec(raw, "q4_0", np.zeros(32, np.float32))
    with pytest.raises(ValueError, match="row_bytes 35"):
        _core.matvec(np.zeros((4, 35), np.uint8), "q4_0", x)
    with pytest.raises(ValueError, match="unknown isa 'sse9'"):
        _core.matvec(raw, "q4_0", x, isa="sse9")
    with pytest.raises(ValueError, match="n_threads"):
        _core.matvec(raw, "q4_0", x, n_threads=0)
    with pytest.raises(ValueError, match="act_bits = 12"):
        _core.matvec(raw, "q4_0", x, act_bits=12)
    with pytest.raises(ValueError, match="act_bits = 4"):
        _core.quantize_act(x, "q4_0", act_bits=4)
    with pytest.raises(ValueError, match="not supported"):
        _core.matvec(np.zeros((4, 84), np.uint8), "q2_K", np.zeros(256, np.float32))
    with pytest.raises(ValueError, match="unknown ggml type"):
        _core.matvec(raw, "q4_7", x)
    missing = [i for i in ("avx2", "neon") if i not in ISAS]
    for isa in missing:
        with pytest.raises(ValueError, match="not available"):
            _core.matvec(raw, "q4_0", x, isa=isa)


# ---- the C++ kernel tests, built natively -------------------------------------------------------

def test_native_cpp_kernel_tests_pass(tmp_path):
    """tests/cpp/test_vec_dot*.cpp and test_attention_math.cpp on this machine: every SIMD vec_dot
    (8-bit and Q16 activations), quantizer and attention inner loop against the plain C++ one,
    and — on CPUs with AVX512-VNNI, where matvec uses the VNNI kernels — the plain AVX2 kernels
    too, which the Python tests above cannot reach there. Compiled directly, like the qemu build."""
    import platform
    import shutil
    import subprocess
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx}) to build the kernel tests")
    root = pathlib.Path(__file__).resolve().parents[1]
    plain = ["src/common/error.cpp", "src/quant/types.cpp", "backends/cpu/cpu_features.cpp",
             "backends/cpu/dequantize.cpp", "backends/cpu/quantize_act.cpp", "backends/cpu/vec_dot.cpp",
             "backends/cpu/vec_dot_scalar.cpp", "backends/cpu/vec_dot_q16_scalar.cpp", "backends/cpu/attention_math.cpp",
             "tests/cpp/test_main.cpp", "tests/cpp/test_vec_dot.cpp", "tests/cpp/test_vec_dot_q16.cpp",
             "tests/cpp/test_attention_math.cpp"]
    simd = []
    if platform.machine().lower() in ("x86_64", "amd64"):
        simd = [str(p.relative_to(root)) for p in sorted((root / "backends/cpu").glob("*_avx2.cpp"))]
    flags = ["-O2", "-std=c++17", "-ffp-contract=off", f"-I{root / 'src'}", f"-I{root / 'backends'}"]
    def finish(procs):
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out
        procs.clear()

    procs, objs = [], []
    for src in plain + simd:
        obj = tmp_path / (pathlib.Path(src).stem + ".o")
        extra = ["-mavx2", "-mfma", "-mf16c"] if src in simd else []  # as cmake/cpu_backend.cmake
        procs.append(subprocess.Popen([cxx, *flags, *extra, "-c", str(root / src), "-o", str(obj)],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        objs.append(str(obj))
        if len(procs) == 2:  # two compilers at a time: CI has 2 cores
            finish(procs)
    finish(procs)
    exe = tmp_path / "kernel_tests"
    subprocess.run([cxx, *objs, "-o", str(exe)], check=True, timeout=300)
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout
    for case in ("simd_vec_dot_matches_scalar_for_every_type", "simd_q16_vec_dot_matches_scalar_for_every_type",
                 "q16_kernels_stay_exact_at_every_formats_extreme_values", "simd_q16_quantizer_is_bit_identical_to_scalar",
                 "attention_exp_is_within_3e_7_of_std_exp_on_the_softmax_range",
                 "attention_acc_rows_of_a_block_equals_its_rows_one_at_a_time"):
        assert f"[ ok ] {case}" in r.stdout, r.stdout
    if "avx2" in ISAS:
        assert "tested isa: avx2" in r.stdout, r.stdout


# ---- the setting at model level (issue 4: gaacrt.Model(act_bits=...)) --------------------------

def test_model_act_bits_reaches_the_cpu_matmuls(tiny_model):
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from reference_model import ReferenceModel
    path = str(tiny_model("llama", weight_type="q4_1", n_layers=2))
    toks = [int(t) for t in np.random.default_rng(9).integers(3, 200, 24)]
    ref = ReferenceModel(path).forward(toks)
    err = {}
    for bits in ACT_BITS:
        m = gaacrt.Model(path, backend="cpu", n_threads=1, act_bits=bits)
        assert f"{bits}-bit activations" in m._m.device_name
        s = m.session(n_ctx=64)
        got = s.eval(toks, all_logits=True)
        err[bits] = float(np.max(np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)))
    print(f"max rel L2 of the logits: act_bits 16 {err[16]:.3g}, 8 {err[8]:.3g}")
    assert err[16] < err[8] / 4, f"act_bits 16 max rel L2 {err[16]:.3g}, 8: {err[8]:.3g}"
    assert gaacrt.Model(path, backend="cpu")._m.device_name.endswith("16-bit activations")  # the default
    for bad in (12, 0, True):
        with pytest.raises(ValueError, match="act_bits"):
            gaacrt.Model(path, backend="cpu", act_bits=bad)


def test_gaac_run_takes_act_bits():
    from gaacrt.cli import run
    assert run.build_parser().parse_args([]).act_bits == 16
    assert run.build_parser().parse_args(["--act-bits", "8"]).act_bits == 8
    with pytest.raises(SystemExit):
        run.build_parser().parse_args(["--act-bits", "4"])


# ---- the FFN gate (backends/cpu/elementwise*.cpp; vectorized exp on AVX2 CPUs) ------------------

@pytest.mark.parametrize("act", [0, 1], ids=["silu", "gelu_tanh"])
def test_act_mul_is_within_1e_6_of_float64_for_every_size_and_extreme(act):
    cpu = _core.open_backend("cpu", n_threads=2)
    rng = np.random.default_rng(31 + act)
    for n in (1, 7, 8, 13, 1000, 20001):  # tails of the 8-wide path, and the pool's split past 16384
        g = (rng.standard_normal(n) * 4).astype(np.float32)
        g[: min(n, 6)] = np.array([0.0, -0.0, 90.0, -90.0, 1e-30, -200.0], np.float32)[: min(n, 6)]
        u = rng.standard_normal(n).astype(np.float32)
        x = g.astype(np.float64)
        # exponent: -x (SiLU), -2z (GELU: 0.5x(1 + tanh z) as x / (1 + e^-2z), since even float64
        # cancels 1 + tanh z to 0 at x = -10)
        arg = -x if act == 0 else -2 * np.sqrt(2 / np.pi) * x * (1 + 0.044715 * x * x)
        with np.errstate(over="ignore"):
            ref = x / (1 + np.exp(arg)) * u
        got = _core.op_act_mul(cpu, g, u, act).astype(np.float64)
        assert np.all(np.isfinite(got))
        # float32 rounds the exponent itself by ~6e-8 relative, which e^arg turns into ~6e-8·|arg|
        tol = 1e-6 * (1 + np.minimum(np.abs(arg), 1e3)) * np.abs(ref) + 1e-37
        bad = np.abs(got - ref) > tol
        assert not bad.any(), f"n={n}: x {g[bad][:4]} gave {got[bad][:4]}, float64 {ref[bad][:4]}"
