"""gaac-inspect (python/gaacrt/cli/inspect.py): on both real models it prints the architecture,
the hyperparameters, a tensor-type histogram and the KV-cache bytes per token for each cache
format; a broken file gives a one-line error and exit status 1.
"""
from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gaacrt
from gaacrt.cache_formats import FORMATS
from gaacrt.cli import inspect as gaac_inspect


def run_inspect(capsys, *argv) -> tuple[int, str, str]:
    rc = gaac_inspect.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# (fixture, architecture, layers x kv-heads x (d_k + d_v) x 2 bytes = BF16 bytes per token)
MODELS = [("smollm2_path", "llama", 30 * 3 * (64 + 64) * 2), ("gemma3_path", "gemma3", 18 * 1 * (256 + 256) * 2)]


@pytest.mark.parametrize("fixture,arch,bf16_bytes", MODELS)
def test_inspect_prints_architecture_histogram_and_kv_bytes(request, capsys, fixture, arch, bf16_bytes):
    path = request.getfixturevalue(fixture)
    rc, out, err = run_inspect(capsys, path)
    assert rc == 0, err
    assert re.search(rf"^\s+architecture\s+{arch}$", out, re.M), out
    # Histogram: one line per tensor type with its count, matching the file's table.
    counts = collections.Counter(t.type for t in gaacrt.GGUFFile(path).tensors)
    for ty, n in counts.items():
        assert re.search(rf"^\s+{re.escape(ty)}\s+{n} tensors", out, re.M), (ty, n, out)
    # KV table: every format, BF16 at the size the hyperparameters imply.
    assert "KV cache per token" in out
    assert re.search(rf"^\s+bf16\s+{bf16_bytes}\.0 B/token\s+1\.00x", out, re.M), out
    for fmt in FORMATS:
        assert re.search(rf"^\s+{re.escape(fmt)}\s+[0-9.]+ B/token", out, re.M), (fmt, out)


def test_inspect_of_smollm2_shows_its_tensor_types(capsys, smollm2_path):
    _, out, _ = run_inspect(capsys, smollm2_path)
    assert re.search(r"^\s+q4_1\s+210 tensors", out, re.M)
    assert re.search(r"^\s+f32\s+61 tensors", out, re.M)
    assert re.search(r"^\s+q8_0\s+1 tensors", out, re.M)
    assert re.search(r"^\s+head_count_kv\s+3$", out, re.M)


def test_inspect_lists_tensors_and_metadata_on_request(capsys, smollm2_path):
    rc, out, _ = run_inspect(capsys, smollm2_path, "--tensors", "--metadata")
    assert rc == 0
    assert re.search(r"^\s+token_embd\.weight\s+q8_0\s+\(576, 49152\)", out, re.M)
    assert "tokenizer.ggml.pre = 'smollm'" in out


def test_inspect_of_a_broken_file_fails_with_the_reader_error(capsys, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(60))
    rc, out, err = run_inspect(capsys, str(bad))
    assert rc == 1 and out == ""
    assert err.startswith("gaac-inspect: [gguf]") and "bad magic" in err


def test_gaac_inspect_console_script_runs(smollm2_path):
    script = Path(sys.executable).with_name("gaac-inspect")
    # The installed entry point beside this interpreter; without one, the module it runs.
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "gaacrt.cli.inspect"]
    r = subprocess.run(cmd + [smollm2_path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\s+architecture\s+llama$", r.stdout, re.M)
    assert "KV cache per token" in r.stdout
