"""Perplexity of a model over a text with a given KV cache format, like llama-perplexity, and its
distance from the BF16 cache (mean KL divergence, top-1 agreement).

The text is cut into windows of `ctx` tokens (the first token of each window is BOS when the
vocabulary adds one); each window is evaluated in chunks of `ubatch` tokens and scored on its second
half, as llama-perplexity does. Chunks are small (16 tokens by default) so that every position
attends to the cache in its serving state: blocks older than the format's raw window are already
compressed when a later chunk reads them (a one-shot BF16 prefill would hide the quantization).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import _core
from .model import Model

__all__ = ["perplexity", "PerplexityResult"]


@dataclass
class PerplexityResult:
    cache: str
    ctx: int
    windows: int
    tokens_scored: int
    perplexity: float
    nll: float                        # mean negative log-likelihood (nats)
    kl_vs_bf16: float | None = None   # mean KL(bf16 || cache) over the scored positions
    top1_vs_bf16: float | None = None  # share of positions whose argmax equals bf16's
    per_window: list = field(default_factory=list)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def perplexity(model: Model, text: str, cache: str = "bf16", ctx: int = 512, ubatch: int = 16,
               max_windows: int | None = None, compare_bf16: bool = True, calibration: str | None = None,
               progress=None, e8_center: bool | str = False, raw_sink: int = 0,
               raw_window: int | None = None) -> PerplexityResult:
    toks = model.tokenize(text, add_special=False)
    bos = model.tokenizer.bos_id if model.tokenizer.add_bos else None
    step = ctx - (1 if bos is not None else 0)
    n_windows = len(toks) // step
    if max_windows is not None:
        n_windows = min(n_windows, max_windows)
    if n_windows == 0:
        raise ValueError(f"text of {len(toks)} tokens is shorter than one window of {ctx}")
    nll_sum, n_scored, kl_sum, top1 = 0.0, 0, 0.0, 0
    per_window = []
    for w in range(n_windows):
        window = ([bos] if bos is not None else []) + toks[w * step:(w + 1) * step]
        first = ctx // 2  # score the second half, as llama-perplexity does
        runs = {cache: None} if (cache == "bf16" or not compare_bf16) else {cache: None, "bf16": None}
        for fmt in runs:
            # The cache's own options on its run (a bf16 cache given raw_sink or raw_window is refused
            # by name); the BF16 comparison run takes none.
            opts = {} if fmt != cache else {"calibration": calibration, "e8_center": e8_center, "raw_sink": raw_sink,
                                            "raw_window": raw_window}
            s = model.session(n_ctx=ctx, cache=fmt, n_ubatch=ubatch, **opts)
            rows = []
            for c in range(0, ctx, ubatch):
                out = s.eval(window[c:c + ubatch], all_logits=True)
                if c + ubatch > first - 1:  # this chunk holds position first-1 or later
                    rows.append(out[max(0, first - 1 - c):])
            runs[fmt] = _log_softmax(np.vstack(rows)[:ctx - first])  # predictions of tokens first..ctx-1
        lp = runs[cache]
        targets = np.asarray(window[first:ctx])
        nll = -lp[np.arange(len(targets)), targets]
        nll_sum += float(nll.sum())
        n_scored += len(targets)
        if "bf16" in runs and cache != "bf16":
            ref = runs["bf16"]
            kl_sum += float((np.exp(ref) * (ref - lp)).sum())
            top1 += int((ref.argmax(1) == lp.argmax(1)).sum())
        per_window.append(math.exp(nll_sum / n_scored))
        if progress:
            progress(w + 1, n_windows, per_window[-1])
    nll_mean = nll_sum / n_scored
    res = PerplexityResult(cache, ctx, n_windows, n_scored, math.exp(nll_mean), nll_mean, per_window=per_window)
    if cache != "bf16" and compare_bf16:
        res.kl_vs_bf16 = kl_sum / n_scored
        res.top1_vs_bf16 = top1 / n_scored
    return res
