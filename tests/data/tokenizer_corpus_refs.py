"""tokenizer_corpus_refs.py — shared helpers of the tokenizer and chat-template tests: the corpus,
llama.cpp through llama-cpp-python as the reference, and GGUF files derived from the real models
with a few tokenizer keys changed (to reach the pre-tokenizers and flags the two models do not use).

llama-cpp-python missing: the reference tests skip with the reason, unless
GAACRT_REQUIRE_LLAMA_CPP=1 (CI), where its absence is a failure.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
from pathlib import Path

import pytest

CORPUS_PATH = Path(__file__).resolve().parent / "tokenizer_corpus.json"


@functools.lru_cache(maxsize=1)
def load_corpus() -> dict:
    """{"texts": [str], "malformed": [bytes], "beyond_unicode": [bytes]}"""
    raw = json.loads(CORPUS_PATH.read_text())
    return {"texts": raw["texts"],
            "malformed": [bytes.fromhex(h) for h in raw["malformed_hex"]],
            "beyond_unicode": [bytes.fromhex(h) for h in raw["malformed_beyond_unicode_hex"]]}


def llama_cpp_or_skip():
    try:
        import llama_cpp
    except ImportError as e:
        if os.environ.get("GAACRT_REQUIRE_LLAMA_CPP") == "1":
            pytest.fail(f"GAACRT_REQUIRE_LLAMA_CPP=1 but llama_cpp cannot be imported: {e}")
        pytest.skip(f"llama-cpp-python (the llama.cpp reference) is not installed: {e}")
    return llama_cpp


@functools.lru_cache(maxsize=16)
def llama_vocab(path: str):
    """llama.cpp's tokenizer of a GGUF (vocab_only model, loaded once per path)."""
    llama_cpp = llama_cpp_or_skip()
    return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)


def llama_tokenize(ll, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
    return ll.tokenize(text, add_bos=add_special, special=parse_special)


def llama_detokenize(ll, ids: list[int], remove_special: bool, unparse_special: bool) -> bytes:
    import llama_cpp
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 256 + 64 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(ll._model.vocab, arr, len(ids), buf, size, remove_special, unparse_special)
    assert n >= 0, f"llama_detokenize needs {-n} bytes"
    return buf.raw[:n]


def llama_token_to_piece(ll, token: int, special: bool) -> bytes:
    import llama_cpp
    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(ll._model.vocab, token, buf, 256, 0, special)
    assert n >= 0
    return buf.raw[:n]


def llama_chat_apply(template: str, messages: list[dict], add_assistant: bool) -> str:
    """llama.cpp's C-API built-in chat formatting (llama_chat_apply_template)."""
    llama_cpp = llama_cpp_or_skip()
    chat = (llama_cpp.llama_chat_message * max(1, len(messages)))()
    keep = []
    for i, m in enumerate(messages):
        role, content = m["role"].encode(), m["content"].encode()
        keep += [role, content]
        chat[i].role, chat[i].content = role, content
    size = 1 << 16
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_chat_apply_template(template.encode(), chat, len(messages), add_assistant, buf, size)
    assert n >= 0, f"llama_chat_apply_template('{template}') failed ({n})"
    return buf.raw[:n].decode()


def derive_gguf(src: str, dst: Path, overrides: dict) -> Path:
    """Copies every metadata key of `src` (no tensors) into `dst`, replacing or dropping the keys
    in `overrides` ({key: (value, GGUFValueType) or None to drop})."""
    import gguf
    from gguf import GGUFValueType as VT

    import gaacrt

    types = {"uint8": VT.UINT8, "int8": VT.INT8, "uint16": VT.UINT16, "int16": VT.INT16, "uint32": VT.UINT32,
             "int32": VT.INT32, "float32": VT.FLOAT32, "bool": VT.BOOL, "string": VT.STRING, "uint64": VT.UINT64,
             "int64": VT.INT64, "float64": VT.FLOAT64}
    f = gaacrt.GGUFFile(src)
    md = f.metadata
    w = gguf.GGUFWriter(str(dst), md["general.architecture"])
    for k, v in md.items():
        if k == "general.architecture" or k in overrides:
            continue
        t = f.metadata_type(k)
        if t.startswith("array["):
            w.add_key_value(k, v, VT.ARRAY, sub_type=types[t[6:-1]])
        else:
            w.add_key_value(k, v, types[t])
    for k, spec in overrides.items():
        if spec is not None:
            w.add_key_value(k, spec[0], spec[1])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst
