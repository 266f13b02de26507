"""Shared pytest fixtures: the two real models and a factory of tiny synthetic ones.

    def test_x(smollm2_path, gemma3_path, tiny_model):
        path = tiny_model("qwen3", weight_type="q4_0")   # written into this test's tmp_path

The real models come through gaacrt.models.get, the same path users take (cached in
~/.cache/gaacrt after the first download). Tiny models: tests/fixtures/tiny_models.py.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import gaacrt
from fixtures.cuda_target import CUDA
from fixtures.tiny_models import ARCHS, write_tiny_model

TESTS_DIR = Path(__file__).resolve().parent
FIXTURES_DIR = TESTS_DIR / "fixtures"


@pytest.fixture(scope="session")
def smollm2_path() -> str:
    return gaacrt.models.get("smollm2-135m")


@pytest.fixture(scope="session")
def gemma3_path() -> str:
    return gaacrt.models.get("gemma3-270m")


@pytest.fixture
def tiny_model(tmp_path):
    """Factory: tiny_model(arch, **write_tiny_model options) -> Path of a fresh tiny GGUF."""
    def make(arch: str, name: str | None = None, **kw) -> Path:
        if arch not in ARCHS:
            raise ValueError(f"tiny_model: unknown architecture '{arch}' (known: {', '.join(ARCHS)})")
        return write_tiny_model(tmp_path / (name or f"tiny-{arch}.gguf"), arch, **kw)
    return make


@pytest.fixture(scope="module")
def cpu():
    """The CPU backend, the reference the CUDA and Metal op tests compare against."""
    return gaacrt._core.open_backend("cpu", n_threads=2)


@pytest.fixture(scope="module")
def cuda():
    """The CUDA backend (only requested by tests skipped where it cannot run): the GPU, or the CUDA
    emulation when GAACRT_TEST_CUDA_BACKEND=cuda-emulated (fixtures/cuda_target.py)."""
    return gaacrt._core.open_backend(CUDA)
