"""gaacrt — a native LLM inference runtime with lossless (GAAC) and E8 compressed KV caches.

    import gaacrt
    f = gaacrt.GGUFFile(gaacrt.models.default())   # validated, memory-mapped GGUF
    f.metadata["general.architecture"], f.tensors[0]
"""
from . import models
from ._core import (
    GaacrtError,
    GGUFError,
    GGUFFile,
    TensorInfo,
    __version__,
    compiled_backends,
    cpu_isas,
    cuda_devices,
    cuda_unavailable_reason,
)
from .tokenizer import Tokenizer
from .model import Chunk, Completion, Model, SamplingParams, Session
from .calibrate import calibrate
from .lossless import LosslessMismatch

__all__ = [
    "Model",
    "calibrate",
    "LosslessMismatch",
    "Session",
    "Chunk",
    "Completion",
    "SamplingParams",
    "GGUFFile",
    "GGUFError",
    "GaacrtError",
    "TensorInfo",
    "Tokenizer",
    "compiled_backends",
    "cpu_isas",
    "cuda_devices",
    "cuda_unavailable_reason",
    "models",
    "__version__",
]
