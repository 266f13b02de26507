"""Chat templates rendered from the GGUF's own Jinja source (shared/spec/gguf.md §5.1, path 2).

The source in `tokenizer.chat_template` is written for HF transformers, so it is rendered the
way transformers renders it: jinja2's immutable sandbox with trim_blocks and lstrip_blocks, the
loop-controls extension, `{% generation %}` blocks accepted, and the globals templates call
(`raise_exception`, `strftime_now`, the `tojson` filter that keeps non-ASCII text as is).
The variables are `messages`, `add_generation_prompt`, `bos_token`, `eos_token`, `tools` and any
extra keyword the caller passes (e.g. `enable_thinking`).

After rendering, llama.cpp's common layer removes a leading BOS text when the tokenizer adds BOS
itself (and a trailing EOS text when it adds EOS), so that templates that write
`{{ bos_token }}` (Llama 3, Gemma) do not produce a double BOS; `strip_added_specials` does that.

The C++ built-in formats (no Jinja) are on `Tokenizer.apply_chat_template(..., jinja=False)`.
"""
from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any, Iterable, Mapping

__all__ = ["render", "compile_template", "strip_added_specials"]


def _import_jinja2():
    try:
        import jinja2  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "rendering a model's Jinja chat template needs jinja2 (pip install jinja2); "
            "or use apply_chat_template(..., jinja=False) for the built-in format"
        ) from e
    import jinja2

    return jinja2


def _raise_exception(message: str):
    jinja2 = _import_jinja2()
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators=None,
            sort_keys: bool = False) -> str:
    # jinja2's own tojson escapes HTML characters and non-ASCII text; chat templates want JSON
    # as json.dumps writes it (transformers overrides the filter the same way).
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=32)
def compile_template(source: str):
    """The compiled jinja2 template for a chat-template source (cached per source)."""
    jinja2 = _import_jinja2()
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(Extension):
        # `{% generation %}...{% endgeneration %}` marks assistant text for training masks in
        # transformers; for prompting it renders its body unchanged.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def render(source: str, messages: Iterable[Mapping[str, Any]], *, add_generation_prompt: bool = True,
           bos_token: str = "", eos_token: str = "", tools: list | None = None, **kwargs: Any) -> str:
    """Renders a Jinja chat template exactly as the template is written (no BOS stripping)."""
    return compile_template(source).render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                           bos_token=bos_token, eos_token=eos_token, tools=tools, **kwargs)


def strip_added_specials(text: str, *, bos_token: str, eos_token: str, add_bos: bool, add_eos: bool) -> str:
    """Removes a leading BOS text / trailing EOS text that the tokenizer will add as tokens."""
    if add_bos and bos_token and text.startswith(bos_token):
        text = text[len(bos_token):]
    if add_eos and eos_token and text.endswith(eos_token):
        text = text[: -len(eos_token)]
    return text
