"""The Python face of the runtime: Model, Session, generation and chat.

    model = gaacrt.Model()                                   # the default model, fetched once
    print(model.generate("The capital of France is", max_tokens=8, temperature=0))
    for chunk in model.chat([{"role": "user", "content": "hi"}], stream=True):
        print(chunk.text, end="")
    s = model.session(n_ctx=8192, cache="bf16")
    s.eval(model.tokenize("..."));  s.logits()               # numpy float32 (n_vocab,)

Every compute call releases the GIL; `Session.cancel()` from another thread stops a running
eval or generation within one token. Sampling follows llama.cpp (src/sampling/sampler.h).
"""
from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from . import _core, models
from .tokenizer import Tokenizer

__all__ = ["Model", "Session", "Chunk", "Completion", "SamplingParams"]


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


@dataclass
class SamplingParams:
    """llama.cpp's defaults (shared/spec/gguf.md §6.1); temperature <= 0 is greedy."""
    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None  # None: random

    def sampler(self, n_vocab: int) -> _core.Sampler:
        return _core.Sampler(n_vocab, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                             min_p=self.min_p, repeat_penalty=self.repeat_penalty, repeat_last_n=self.repeat_last_n,
                             frequency_penalty=self.frequency_penalty, presence_penalty=self.presence_penalty,
                             seed=-1 if self.seed is None else int(self.seed))


_SAMPLING_FIELDS = set(SamplingParams.__dataclass_fields__)


def _split_sampling(kw: dict) -> tuple[SamplingParams, dict]:
    s = {k: kw.pop(k) for k in list(kw) if k in _SAMPLING_FIELDS}
    return SamplingParams(**s), kw


@dataclass
class Chunk:
    """One streamed piece of a generation. The last chunk has finish_reason set and the timings."""
    text: str
    token: int | None
    finish_reason: str | None = None  # "stop" (eog or stop string), "length", "cancelled", "context_full"
    prompt_tokens: int = 0
    prompt_tps: float = 0.0
    decode_tokens: int = 0
    decode_tps: float = 0.0
    peak_memory: int = 0


@dataclass
class Completion:
    """What a non-streamed generate/chat returns (str() gives the text)."""
    text: str
    tokens: list[int] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    prompt_tps: float = 0.0
    decode_tokens: int = 0
    decode_tps: float = 0.0
    peak_memory: int = 0

    def __str__(self) -> str:
        return self.text


class _StopMatcher:
    """Streams text while holding back any tail that could still become a stop string."""

    def __init__(self, stops: Sequence[str]):
        self.stops = [s for s in stops if s]
        self.buf = ""

    def push(self, text: str) -> tuple[str, bool]:
        self.buf += text
        for s in self.stops:
            i = self.buf.find(s)
            if i >= 0:
                out, self.buf = self.buf[:i], ""
                return out, True
        hold = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.buf)), 0, -1):
                if self.buf.endswith(s[:k]):
                    hold = max(hold, k)
                    break
        out = self.buf[:len(self.buf) - hold]
        self.buf = self.buf[len(self.buf) - hold:]
        return out, False

    def flush(self) -> str:
        out, self.buf = self.buf, ""
        return out


class Session:
    """One sequence with its own KV cache (or a share of a batch's): eval, logits, generate."""

    def __init__(self, model: "Model", core: _core.Session):
        self.model = model
        self._s = core

    # -- state ---------------------------------------------------------------------------------
    def eval(self, tokens: Sequence[int] | np.ndarray, all_logits: bool = False):
        """Append tokens (prefill). With all_logits=True returns every token's logits (n, n_vocab)."""
        return self._s.eval(tokens, all_logits=all_logits)

    def logits(self) -> np.ndarray:
        """The last evaluated token's logits, float32 (n_vocab,)."""
        return self._s.logits()

    def sample(self, sampler: _core.Sampler | None = None, **sampling) -> int:
        """A token from the current logits (greedy unless sampling params or a Sampler are given)."""
        if sampler is None:
            sampler = SamplingParams(**({"temperature": 0.0} | sampling)).sampler(self.model.n_vocab)
        return sampler.sample(self._s.logits())

    def truncate(self, n: int) -> None:
        self._s.truncate(n)

    def reset(self) -> None:
        self._s.reset()

    def cancel(self) -> None:
        """Stop the running eval/generation at the next token. Safe from any thread."""
        self._s.cancel()

    @property
    def n_past(self) -> int:
        return self._s.n_past

    @property
    def history(self) -> list[int]:
        return self._s.history

    @property
    def n_ctx(self) -> int:
        return self._s.context.n_ctx

    def kv_stats(self) -> dict:
        return self._s.context.kv_stats()

    # -- generation ----------------------------------------------------------------------------
    def generate_tokens(self, prompt_tokens: Sequence[int], max_tokens: int = 256, stop: Sequence[str] = (),
                        sampling: SamplingParams | None = None) -> Iterator[Chunk]:
        """Evaluate prompt_tokens after what the session holds, then stream the reply."""
        sampling = sampling or SamplingParams()
        tk = self.model.tokenizer
        sampler = sampling.sampler(self.model.n_vocab)
        for t in self.history:
            sampler.accept(t)
        for t in prompt_tokens:
            sampler.accept(t)
        self._s.clear_cancel()
        t0 = time.perf_counter()
        finish = None
        try:
            self.eval(list(prompt_tokens))
        except _core.GaacrtError as e:
            if getattr(e, "kind", "") == "aborted":
                finish = "cancelled"
            else:
                raise
        t1 = time.perf_counter()
        dec = tk.decoder()
        stopper = _StopMatcher(stop)
        n_gen = 0
        if finish is None:
            finish = "length"
            while n_gen < max_tokens:
                if self._s.cancelled:
                    finish = "cancelled"
                    break
                tok = sampler.sample(self._s.logits())
                sampler.accept(tok)
                if tk.is_eog(tok):
                    finish = "stop"
                    break
                n_gen += 1
                text, stopped = stopper.push(dec.feed(tok))
                if stopped:
                    if text:
                        yield Chunk(text, tok)
                    finish = "stop"
                    self._eval_quiet([tok])
                    break
                yield Chunk(text, tok)
                if self.n_past + 1 > self.n_ctx:
                    finish = "context_full"
                    break
                if not self._eval_quiet([tok]):
                    finish = "cancelled"
                    break
        tail = stopper.flush() if finish != "stop" else ""
        tail += dec.flush() if finish != "stop" else ""
        t2 = time.perf_counter()
        n_prompt = len(prompt_tokens)
        yield Chunk(tail, None, finish_reason=finish, prompt_tokens=n_prompt,
                    prompt_tps=n_prompt / (t1 - t0) if t1 > t0 and n_prompt else 0.0,
                    decode_tokens=n_gen, decode_tps=n_gen / (t2 - t1) if t2 > t1 and n_gen else 0.0,
                    peak_memory=peak_memory_bytes())

    def _eval_quiet(self, toks: list[int]) -> bool:
        """eval that reports cancellation as False instead of raising."""
        try:
            self._s.eval(toks)
            return True
        except _core.GaacrtError as e:
            if getattr(e, "kind", "") == "aborted":
                return False
            raise


def _collect(chunks: Iterable[Chunk]) -> Completion:
    text, toks, last = [], [], None
    for c in chunks:
        text.append(c.text)
        if c.token is not None:
            toks.append(c.token)
        last = c
    return Completion("".join(text), toks, last.finish_reason, last.prompt_tokens, last.prompt_tps,
                      last.decode_tokens, last.decode_tps, last.peak_memory)


class Model:
    """A GGUF model loaded on a backend. `path=None` is the default model (SmolLM2-135M)."""

    def __init__(self, path: str | os.PathLike | None = None, backend: str = "auto", n_threads: int | None = None,
                 device: int = 0, act_bits: int = 16):
        """act_bits: precision of the activations in the integer matmuls of the CPU and CUDA
        backends — 16 (default, int16 with a scale per 32 values: logits within ~2% of exact math)
        or 8 (llama.cpp's 8-bit formats; on the CPU bit for bit its integers; faster decode on
        CUDA). Metal ignores it."""
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 0):
            raise ValueError(f"n_threads must be a non-negative int or None, got {n_threads!r}")
        if act_bits not in (8, 16) or isinstance(act_bits, bool):
            raise ValueError(f"act_bits must be 8 or 16, got {act_bits!r}")
        self.path = str(path) if path is not None else models.default()
        self._m = _core.Model(self.path, backend, n_threads or 0, device, act_bits)
        self._tok: Tokenizer | None = None

    @classmethod
    def default(cls, **kw) -> "Model":
        return cls(None, **kw)

    # -- facts -----------------------------------------------------------------------------------
    @property
    def config(self) -> dict:
        return self._m.config

    @property
    def description(self) -> str:
        return self._m.description

    @property
    def n_vocab(self) -> int:
        return self._m.n_vocab

    @property
    def backend(self) -> str:
        return self._m.backend

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tok is None:
            self._tok = Tokenizer(self.path)
        return self._tok

    def __repr__(self) -> str:
        return f"gaacrt.Model({self.path!r}, {self.description}, backend={self.backend!r})"

    # -- text ------------------------------------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        return self.tokenizer.tokenize(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.detokenize(ids)

    def apply_chat_template(self, messages: Iterable[Mapping[str, Any]], add_generation_prompt: bool = True,
                            **kw) -> str:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, **kw)

    # -- sessions --------------------------------------------------------------------------------
    def session(self, n_ctx: int = 4096, cache: str = "bf16", kv_budget_bytes: int = 0, n_ubatch: int = 512,
                calibration: str | os.PathLike | None = None, check_lossless: bool = False,
                e8_scoring: str = "decode", e8_center: bool | str = False, raw_sink: int = 0,
                raw_window: int | None = None) -> Session:
        """A new sequence with its own KV cache. cache: "bf16", "gaac", ... calibration: a GAAC
        sidecar (default: "model.gaac" beside the model if present, else calibrate online).
        check_lossless: run a BF16 session beside this one and raise at the first logit that
        differs by one bit (for lossless formats such as "gaac"). e8_scoring: "decode" (decode each
        key in the dot product, default) or "table" (the E8 paper's per-query lookup tables).
        e8_center (not in the paper): True or "global": E8 codes each key as (k - mean) / scale per
        channel (scale = sqrt of the channel's std), both fitted on the first prefill; "block": each
        16-token block's own mean is stored (fp16 per channel) and subtracted, channels scaled by their
        within-block std^0.75 (CPU only; 100 B per token-head at d = 128). raw_sink: lossy formats keep the
        first raw_sink tokens (rounded up to 16) in BF16 for good: the attention sink. raw_window:
        compressing formats keep the newest raw_window tokens (and up to 15 more) raw BF16; None =
        the format's own (e8, kivi2: 128; gaac, q8: 0)."""
        ctx = _core.Context(self._m, n_ctx=n_ctx, n_seq_max=1, cache=cache, budget_bytes=kv_budget_bytes,
                            n_ubatch=n_ubatch, calibration=str(calibration or ""), e8_scoring=e8_scoring,
                            e8_center=e8_center, raw_sink=raw_sink,
                            raw_window=-1 if raw_window is None else raw_window)
        s = Session(self, _core.Session(ctx))
        if check_lossless:
            from .lossless import LosslessCheckedSession
            shadow = _core.Session(_core.Context(self._m, n_ctx=n_ctx, n_seq_max=1, cache="bf16",
                                                 n_ubatch=n_ubatch))
            return LosslessCheckedSession(self, s._s, shadow)
        return s

    def batch(self, n_seq: int, n_ctx: int = 4096, cache: str = "bf16", kv_budget_bytes: int = 0,
              n_ubatch: int = 512) -> list[Session]:
        """n_seq sessions sharing one KV arena; decode them together with `decode_batch`."""
        if n_seq <= 0:
            raise ValueError(f"n_seq must be positive, got {n_seq}")
        ctx = _core.Context(self._m, n_ctx=n_ctx, n_seq_max=n_seq, cache=cache, budget_bytes=kv_budget_bytes,
                            n_ubatch=n_ubatch)
        return [Session(self, _core.Session(ctx)) for _ in range(n_seq)]

    @staticmethod
    def decode_batch(sessions: Sequence[Session], tokens: Sequence[int]) -> None:
        """One forward for several sessions of one batch: tokens[i] is appended to sessions[i]."""
        _core.decode_batch([s._s for s in sessions], list(tokens))

    # -- generation ------------------------------------------------------------------------------
    def generate(self, prompt: str | Sequence[int], max_tokens: int = 256, *, stream: bool = False,
                 stop: Sequence[str] = (), session: Session | None = None, cache: str = "bf16",
                 n_ctx: int | None = None, add_special: bool = True, parse_special: bool = False, **sampling):
        """Complete a prompt (text or token ids). stream=True yields Chunks; else a Completion."""
        params, rest = _split_sampling(dict(sampling))
        if rest:
            raise TypeError(f"generate() got unexpected keyword arguments: {', '.join(sorted(rest))}")
        if isinstance(prompt, str):
            toks = self.tokenize(prompt, add_special=add_special, parse_special=parse_special)
        else:
            toks = [int(t) for t in prompt]
        if session is None:
            session = self.session(n_ctx=n_ctx or min(self.config["n_ctx_train"], max(2048, len(toks) + max_tokens)),
                                   cache=cache)
        it = session.generate_tokens(toks, max_tokens, stop, params)
        return it if stream else _collect(it)

    def chat(self, messages: Iterable[Mapping[str, Any]], max_tokens: int = 512, *, stream: bool = False,
             jinja: bool = True, **kw):
        """Reply to a conversation (a list of {"role", "content"}), formatted with the model's template."""
        prompt = self.apply_chat_template(list(messages), add_generation_prompt=True, jinja=jinja)
        return self.generate(prompt, max_tokens, stream=stream, add_special=True, parse_special=True, **kw)

    def generate_batch(self, prompts: Sequence[str], max_tokens: int = 128, *, stop: Sequence[str] = (),
                       cache: str = "bf16", n_ctx: int | None = None, **sampling) -> list[Completion]:
        """Complete several prompts together: one forward pass per step for all live sequences."""
        params, rest = _split_sampling(dict(sampling))
        if rest:
            raise TypeError(f"generate_batch() got unexpected keyword arguments: {', '.join(sorted(rest))}")
        if isinstance(prompts, str):
            raise TypeError("generate_batch() takes a list of prompts; use generate() for one")
        toks = [self.tokenize(p) for p in prompts]
        n_ctx = n_ctx or max(len(t) for t in toks) + max_tokens
        sessions = self.batch(len(prompts), n_ctx=n_ctx, cache=cache)
        tk = self.tokenizer
        samplers = []
        for i, (s, t) in enumerate(zip(sessions, toks)):
            p = SamplingParams(**{**params.__dict__, "seed": None if params.seed is None else params.seed + i})
            smp = p.sampler(self.n_vocab)
            for x in t:
                smp.accept(x)
            samplers.append(smp)
            s.eval(t)
        decs = [tk.decoder() for _ in prompts]
        stops = [_StopMatcher(stop) for _ in prompts]
        texts = [[] for _ in prompts]
        gen = [[] for _ in prompts]
        finish = ["length"] * len(prompts)
        live = list(range(len(prompts)))
        t0 = time.perf_counter()
        for _ in range(max_tokens):
            step_s, step_t = [], []
            for i in list(live):
                tok = samplers[i].sample(sessions[i].logits())
                samplers[i].accept(tok)
                if tk.is_eog(tok):
                    finish[i] = "stop"
                    live.remove(i)
                    continue
                gen[i].append(tok)
                text, stopped = stops[i].push(decs[i].feed(tok))
                texts[i].append(text)
                if stopped:
                    finish[i] = "stop"
                    live.remove(i)
                    continue
                step_s.append(sessions[i])
                step_t.append(tok)
            if not step_s:
                break
            if len(gen[live[0]]) >= max_tokens:
                break
            self.decode_batch(step_s, step_t)
        dt = time.perf_counter() - t0
        out = []
        for i in range(len(prompts)):
            if finish[i] == "length":
                texts[i].append(stops[i].flush() + decs[i].flush())
            out.append(Completion("".join(texts[i]), gen[i], finish[i], len(toks[i]), 0.0, len(gen[i]),
                                  len(gen[i]) / dt if dt > 0 else 0.0, peak_memory_bytes()))
        return out
