"""Lossless check mode: a session in a lossless cache format (GAAC) shadowed by a BF16 session;
after every evaluation their logits must be equal bit for bit, else LosslessMismatch is raised
naming the first differing logit. Costs a second forward pass per step; a debugging aid that no
other runtime has.

    s = model.session(cache="gaac", check_lossless=True)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _core
from .model import Session


class LosslessMismatch(AssertionError):
    """The compressed cache produced different logits than the BF16 cache."""


class LosslessCheckedSession(Session):
    def __init__(self, model, core: _core.Session, shadow: _core.Session):
        super().__init__(model, core)
        self._shadow = shadow
        self.checked_tokens = 0

    def _compare(self, got: np.ndarray, want: np.ndarray, first_pos: int) -> None:
        a, b = np.atleast_2d(got).view(np.uint32), np.atleast_2d(want).view(np.uint32)
        bad = np.argwhere(a != b)
        if bad.size:
            r, i = (int(x) for x in bad[0])
            raise LosslessMismatch(
                f"lossless check failed: at position {first_pos + r} logit {i} is "
                f"{np.atleast_2d(got)[r, i]!r} (bits 0x{a[r, i]:08x}) with the "
                f"{self._s.context.cache_format} cache but {np.atleast_2d(want)[r, i]!r} (0x{b[r, i]:08x}) with bf16")

    def eval(self, tokens: Sequence[int] | np.ndarray, all_logits: bool = False):
        toks = [int(t) for t in tokens]
        first = self.n_past
        got = self._s.eval(toks, all_logits=all_logits)
        want = self._shadow.eval(toks, all_logits=all_logits)
        if all_logits:
            self._compare(got, want, first)
        self._compare(self._s.logits(), self._shadow.logits(), first + len(toks) - 1)
        self.checked_tokens += len(toks)
        return got

    def _eval_quiet(self, toks: list[int]) -> bool:
        try:
            self.eval(toks)
            return True
        except _core.GaacrtError as e:
            if getattr(e, "kind", "") == "aborted":
                return False
            raise

    def truncate(self, n: int) -> None:
        self._s.truncate(n)
        self._shadow.truncate(n)

    def reset(self) -> None:
        self._s.reset()
        self._shadow.reset()
