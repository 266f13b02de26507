"""gaacrt.Tokenizer — the tokenizer stored in a GGUF file, token for token llama.cpp's.

    tok = gaacrt.Tokenizer(gaacrt.models.get("smollm2-135m"))      # or Tokenizer.from_gguf(path)
    ids = tok.tokenize("Hello!", add_special=True, parse_special=False)
    tok.detokenize(ids)                                            # 'Hello!'
    dec = tok.decoder(); "".join(dec.feed(i) for i in ids) + dec.flush()
    tok.apply_chat_template([{"role": "user", "content": "Hi"}])  # the GGUF's Jinja template

Everything but Jinja rendering is the C++ core (gaacrt._core.Tokenizer: BPE and SentencePiece,
special tokens, BOS/EOS, the end-of-generation set, built-in chat formats); this subclass adds
`apply_chat_template(jinja=True)`, which renders `tokenizer.chat_template` with jinja2 as
transformers does (see gaacrt.chat). A model class can expose the same methods by delegating to
an instance of this class.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from . import chat as _chat
from ._core import Tokenizer as _CoreTokenizer

__all__ = ["Tokenizer"]


class Tokenizer(_CoreTokenizer):
    """Tokenizer of a GGUF model (see the module docstring). Constructed from the file alone."""

    def __init__(self, path: str | os.PathLike):
        super().__init__(os.fspath(path))

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> "Tokenizer":
        return cls(path)

    @property
    def bos_text(self) -> str:
        """Text of the BOS token ('' when the vocabulary has none): Jinja's `bos_token`."""
        return self.token_text(self.bos_id) if self.bos_id is not None else ""

    @property
    def eos_text(self) -> str:
        """Text of the EOS token: Jinja's `eos_token`."""
        return self.token_text(self.eos_id) if self.eos_id is not None else ""

    def apply_chat_template(self, messages: Iterable[Mapping[str, Any]], add_generation_prompt: bool = True,
                            jinja: bool = True, template: str | None = None, **kwargs: Any) -> str:
        """The prompt text for a conversation (tokenize it with parse_special=True).

        jinja=True renders the GGUF's Jinja template (or `template`, a Jinja source) with jinja2,
        then drops a leading BOS text when the tokenizer adds BOS itself, as llama.cpp does;
        extra keywords become template variables. A file without a template falls back to the
        built-in format. jinja=False uses the C++ built-in format detected from the GGUF's
        template or architecture (`template` may name one: "chatml", "llama3", "gemma", ...).
        """
        messages = list(messages)
        if jinja:
            source = template if template is not None else self.chat_template
            if source is not None:
                text = _chat.render(source, messages, add_generation_prompt=add_generation_prompt,
                                    bos_token=self.bos_text, eos_token=self.eos_text, **kwargs)
                return _chat.strip_added_specials(text, bos_token=self.bos_text, eos_token=self.eos_text,
                                                  add_bos=self.add_bos, add_eos=self.add_eos)
            template = None  # nothing to render: the built-in format for this architecture
        return self.apply_chat_template_builtin(messages, add_generation_prompt, template)

    def __repr__(self) -> str:
        return (f"Tokenizer({self.path!r}, {self.model_type}/{self.pre}, vocab_size={self.vocab_size}, "
                f"bos={self.bos_id}, eos={self.eos_id}, eog={self.eog_ids})")
