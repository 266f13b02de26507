"""The C API (include/gaacrt.h): examples/chat.c built against the installed library and run,
plus status codes, last-error messages and two-pass buffers checked through ctypes."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import gaacrt

PKG = Path(gaacrt._core.__file__).resolve().parent
INCLUDE = PKG / "include"
LIB = PKG / ("libgaacrt.dylib" if (PKG / "libgaacrt.dylib").exists() else "libgaacrt.so")
ROOT = Path(__file__).resolve().parents[1]

GAACRT_OK, ERR_INVALID, ERR_IO, ERR_BAD_FILE, ERR_TOO_SMALL, ERR_CONTEXT_FULL = 0, 1, 2, 3, 7, 6


@pytest.fixture(scope="module")
def chat_exe(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.fail("no C compiler found to build examples/chat.c")
    exe = tmp_path_factory.mktemp("capi") / "chat"
    cmd = [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", str(ROOT / "examples" / "chat.c"), f"-I{INCLUDE}",
           f"-L{PKG}", "-lgaacrt", f"-Wl,-rpath,{PKG}", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


@pytest.fixture(scope="module")
def lib():
    L = ctypes.CDLL(str(LIB))
    L.gaacrt_last_error.restype = ctypes.c_char_p
    L.gaacrt_version.restype = ctypes.c_char_p
    L.gaacrt_backends.restype = ctypes.c_char_p
    L.gaacrt_model_desc.restype = ctypes.c_char_p
    L.gaacrt_model_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    L.gaacrt_model_free.argtypes = [ctypes.c_void_p]
    L.gaacrt_model_desc.argtypes = [ctypes.c_void_p]
    L.gaacrt_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_bool,
                                  ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    L.gaacrt_session_new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    L.gaacrt_session_free.argtypes = [ctypes.c_void_p]
    L.gaacrt_session_eval.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return L


def test_chat_example_builds_against_the_installed_library_and_answers(chat_exe, smollm2_path):
    r = subprocess.run([str(chat_exe), smollm2_path, "-p", "What is the capital of France?", "-n", "12", "--seed", "-2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import re
    n = int(re.search(r"(\d+) tokens generated", r.stderr).group(1))
    assert 0 < n <= 12  # greedy: stops at 12, or earlier at an end-of-generation token
    assert len(r.stdout.strip()) > 0


def test_chat_example_reads_turns_from_stdin_and_keeps_the_conversation(chat_exe, smollm2_path):
    r = subprocess.run([str(chat_exe), smollm2_path, "-n", "6", "--seed", "-2"], input="Hi\nAnd again\n",
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    counts = [int(line.split()[-4]) for line in r.stderr.splitlines() if "in the session" in line]
    assert len(counts) == 2 and counts[1] > counts[0]  # the second turn continued the first


def test_version_and_backends(lib):
    assert lib.gaacrt_version().decode() == gaacrt.__version__
    assert "cpu" in lib.gaacrt_backends().decode().split(",")


def test_loading_a_corrupt_file_returns_bad_file_and_names_the_problem(lib, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUX" + b"\0" * 64)
    m = ctypes.c_void_p()
    assert lib.gaacrt_model_load(str(bad).encode(), None, ctypes.byref(m)) == ERR_BAD_FILE
    assert b"bad magic" in lib.gaacrt_last_error()
    assert m.value is None
    assert lib.gaacrt_model_load(str(tmp_path / "missing.gguf").encode(), None, ctypes.byref(m)) == ERR_IO
    assert b"missing.gguf" in lib.gaacrt_last_error()


def test_null_arguments_are_invalid_not_crashes(lib):
    m = ctypes.c_void_p()
    assert lib.gaacrt_model_load(None, None, ctypes.byref(m)) == ERR_INVALID
    assert lib.gaacrt_session_new(None, None, ctypes.byref(m)) == ERR_INVALID


def test_tokenize_two_pass_buffer_and_context_full(lib, smollm2_path):
    m = ctypes.c_void_p()
    assert lib.gaacrt_model_load(smollm2_path.encode(), None, ctypes.byref(m)) == GAACRT_OK, lib.gaacrt_last_error()
    try:
        assert lib.gaacrt_model_desc(m).decode().startswith("llama")
        text = b"The capital of France is"
        need = ctypes.c_size_t()
        assert lib.gaacrt_tokenize(m, text, len(text), True, False, None, 0, ctypes.byref(need)) == ERR_TOO_SMALL
        assert need.value == len(gaacrt.Tokenizer(smollm2_path).tokenize(text.decode()))
        buf = (ctypes.c_int32 * need.value)()
        got = ctypes.c_size_t()
        assert lib.gaacrt_tokenize(m, text, len(text), True, False, buf, need.value, ctypes.byref(got)) == GAACRT_OK
        assert list(buf) == gaacrt.Tokenizer(smollm2_path).tokenize(text.decode())
        assert lib.gaacrt_last_error() == b""  # a successful call clears it

        # A session of 8 tokens refuses a 9-token prompt before evaluating anything.
        class SessionParams(ctypes.Structure):
            _fields_ = [("size", ctypes.c_size_t), ("n_ctx", ctypes.c_int32), ("cache", ctypes.c_char_p),
                        ("kv_budget_bytes", ctypes.c_uint64), ("n_ubatch", ctypes.c_int32),
                        ("abort", ctypes.c_void_p), ("abort_user", ctypes.c_void_p),
                        ("calibration", ctypes.c_char_p), ("raw_sink", ctypes.c_int32), ("e8_center", ctypes.c_int32),
                        ("raw_window", ctypes.c_int32)]
        lib.gaacrt_session_default_params.restype = SessionParams
        sp = lib.gaacrt_session_default_params()
        assert sp.size == ctypes.sizeof(SessionParams) and sp.n_ctx == 4096 and sp.cache == b"bf16"
        assert sp.raw_sink == 0 and sp.e8_center == 0 and not sp.calibration and sp.raw_window == -1
        sp.n_ctx = 8
        s = ctypes.c_void_p()
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        toks = (ctypes.c_int32 * 9)(*range(100, 109))
        assert lib.gaacrt_session_eval(s, toks, 9) == ERR_CONTEXT_FULL
        assert b"context length 8" in lib.gaacrt_last_error()
        lib.gaacrt_session_n_past.argtypes = [ctypes.c_void_p]
        assert lib.gaacrt_session_n_past(s) == 0
        lib.gaacrt_session_free(s)
        sp.size = 3  # a size this library does not know
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == ERR_INVALID
        assert b"size" in lib.gaacrt_last_error() and s.value is None

        # The fields added later (calibration, raw_sink, e8_center) reach the cache; a caller built
        # against the older header passes the smaller size and gets their defaults.
        sp.size = ctypes.sizeof(SessionParams)
        sp.n_ctx, sp.cache, sp.raw_sink = 64, b"gaac", 16
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == ERR_INVALID
        assert b"raw_sink" in lib.gaacrt_last_error()
        sp.size = SessionParams.calibration.offset  # the older layout: raw_sink is not read
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        lib.gaacrt_session_free(s)
        sp.size = ctypes.sizeof(SessionParams)
        sp.cache, sp.raw_sink, sp.e8_center = b"e8", 16, 1
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        lib.gaacrt_session_free(s)
        sp.e8_center = 2  # block centering
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        lib.gaacrt_session_free(s)
        sp.e8_center = 3
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == ERR_INVALID
        assert b"e8_center = 3" in lib.gaacrt_last_error()
        # raw_window (added after e8_center): checked when given, the format's default when the
        # caller's struct ends before it.
        sp.e8_center, sp.raw_window = 0, -2
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == ERR_INVALID
        assert b"raw_window = -2" in lib.gaacrt_last_error()
        sp.size = SessionParams.raw_window.offset
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        lib.gaacrt_session_free(s)
        sp.size, sp.raw_window = ctypes.sizeof(SessionParams), 32
        assert lib.gaacrt_session_new(m, ctypes.byref(sp), ctypes.byref(s)) == GAACRT_OK, lib.gaacrt_last_error()
        lib.gaacrt_session_free(s)
    finally:
        lib.gaacrt_model_free(m)
