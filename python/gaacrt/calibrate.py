"""GAAC calibration from real text (shared/spec/gaac.md "Calibration").

    gaacrt.calibrate("model.gguf", files=["corpus.txt"], ctx=4096)   # writes model.gaac beside it

The model runs over the text with a BF16 cache in windows of `ctx` tokens (calibrate at the
context length you deploy: RoPE moves key exponents with position); per (layer, K|V, kv-head,
channel) the 8- and 16-wide exponent windows that cover the most values become the bases, and the
escape capacity minimizing expected resident bytes is measured on the same text. The sidecar
carries the model's identity and is refused for another model. Sessions with cache="gaac" find
"model.gaac" beside the model automatically.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from . import _core
from .model import Model

__all__ = ["calibrate", "sidecar_path"]


def sidecar_path(model_path: str | os.PathLike) -> str:
    """Where a model's calibration lives: "dir/model.gguf" -> "dir/model.gaac"."""
    p = Path(model_path)
    return str(p.with_suffix(".gaac"))


def calibrate(model: Model | str | os.PathLike, texts: Iterable[str] = (), files: Iterable[str | os.PathLike] = (),
              ctx: int = 4096, out: str | os.PathLike | None = None, n_threads: int | None = None) -> dict:
    """Calibrate GAAC for `model` on `texts` and the contents of `files`; write the sidecar to
    `out` (default: beside the model). Returns the figures measured on the calibration text."""
    if not isinstance(model, Model):
        model = Model(model, n_threads=n_threads)
    corpus = list(texts)
    for f in files:
        corpus.append(Path(f).read_text(encoding="utf-8", errors="replace"))
    if not corpus:
        raise ValueError("calibrate: give at least one text or file")
    token_lists = [model.tokenize(t, add_special=True) for t in corpus]
    out = str(out) if out is not None else sidecar_path(model.path)
    report = _core.gaac_calibrate(model._m, token_lists, int(ctx), out)
    report["out"] = out
    return report
