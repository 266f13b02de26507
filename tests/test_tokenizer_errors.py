"""A tokenizer the runtime cannot read is a clear error naming the problem, written with tiny
GGUFs (gguf package): unknown `tokenizer.ggml.model`, unknown `tokenizer.ggml.pre`, no tokenizer
at all, duplicate token texts, BPE without merges. A missing `pre` falls back to "default" as
llama.cpp does. Tiny vocabularies also reach what the real ones never do: merge rules naming a
non-token and merges whose result is not a token (compared with llama.cpp when it is installed).
"""
from __future__ import annotations

import pytest
from data.tokenizer_corpus_refs import derive_gguf, llama_cpp_or_skip, llama_tokenize, llama_vocab

import gaacrt


def _byte_chars() -> list[str]:
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(0x100 + extra))
            extra += 1
    return out


def write_vocab(path, model="gpt2", pre="gpt-2", tokens=None, merges=None, types=None, extra=None):
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    if model is not None:
        w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    if tokens is None:
        tokens = ["<|endoftext|>"] + _byte_chars() + ["Ġt", "he", "Ġthe"]
    w.add_token_list(tokens)
    w.add_token_types(types if types is not None else [3] + [1] * (len(tokens) - 1))
    if merges is None and model == "gpt2":
        merges = ["Ġ t", "h e", "Ġt he"]
    if merges is not None:
        w.add_token_merges(merges)
    for k, (v, t) in (extra or {}).items():
        w.add_key_value(k, v, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_tiny_bpe_vocabulary_tokenizes(tmp_path):
    tok = gaacrt.Tokenizer(write_vocab(tmp_path / "ok.gguf"))
    ids = tok.tokenize(" the the", add_special=False)
    assert [tok.token_text(i) for i in ids] == ["Ġthe", "Ġthe"]
    assert tok.detokenize(ids) == " the the"


@pytest.mark.parametrize("model", ["bert", "t5", "my-own-tokenizer"])
def test_unknown_tokenizer_model_is_a_clear_error(tmp_path, model):
    path = write_vocab(tmp_path / "m.gguf", model=model, merges=[])
    with pytest.raises(gaacrt.GaacrtError, match=f"tokenizer.ggml.model = '{model}'") as e:
        gaacrt.Tokenizer(path)
    assert e.value.kind == "unknown_tokenizer" and e.value.area == "tokenizer"
    assert path in str(e.value)


def test_unknown_pre_tokenizer_is_a_clear_error(tmp_path):
    path = write_vocab(tmp_path / "p.gguf", pre="klingon-bpe")
    with pytest.raises(gaacrt.GaacrtError, match="unknown pre-tokenizer tokenizer.ggml.pre = 'klingon-bpe'") as e:
        gaacrt.Tokenizer(path)
    assert e.value.kind == "unknown_tokenizer"


def test_missing_pre_tokenizer_falls_back_to_default(tmp_path):
    tok = gaacrt.Tokenizer(write_vocab(tmp_path / "n.gguf", pre=None))
    assert tok.pre == "default"
    assert tok.detokenize(tok.tokenize("the 1234")) == "the 1234"


def test_file_without_a_tokenizer_is_a_clear_error(tmp_path):
    path = write_vocab(tmp_path / "none.gguf", model=None)
    with pytest.raises(gaacrt.GaacrtError, match="no 'tokenizer.ggml.model'") as e:
        gaacrt.Tokenizer(path)
    assert e.value.kind == "missing_key"


def test_duplicate_token_text_is_a_clear_error(tmp_path):
    tokens = ["<|endoftext|>"] + _byte_chars() + ["he", "he"]
    with pytest.raises(gaacrt.GaacrtError, match="token text 'he' appears twice, as ids 257 and 258") as e:
        gaacrt.Tokenizer(write_vocab(tmp_path / "dup.gguf", tokens=tokens, merges=["h e"]))
    assert e.value.kind == "duplicate_token"


def test_bpe_without_merges_is_a_clear_error(tmp_path):
    import gguf
    path = tmp_path / "nomerges.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(_byte_chars())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(gaacrt.GaacrtError, match="tokenizer.ggml.merges") as e:
        gaacrt.Tokenizer(str(path))
    assert e.value.kind == "missing_key"


def test_merges_naming_non_tokens_behave_as_llama_cpp(tmp_path, smollm2_path):
    """Merge rules are legal when a side or the result is not a token. Here "he", "xy" and
    "qab" are not tokens: "h e" and "x y" produce non-token symbols, "Ġt he" and "q ab" /
    "qab c" then name a non-token side (looked up by text), and a final non-token symbol is
    spelled byte by byte. The ids must be llama.cpp's."""
    llama_cpp_or_skip()
    from gguf import GGUFValueType as VT
    byte_chars = _byte_chars()
    tokens = ["<|endoftext|>"] + byte_chars + ["Ġt", "Ġthe", "ab", "abc"]
    merges = ["Ġ t", "h e", "Ġt he", "x y", "a b", "ab c", "q ab", "qab c"]
    base = tmp_path / "odd-base.gguf"
    # llama.cpp needs the model hyper-parameters even for vocab_only: take SmolLM2's and replace
    # the whole tokenizer.
    path = derive_gguf(smollm2_path, base, {
        "tokenizer.ggml.pre": ("gpt-2", VT.STRING),
        "tokenizer.ggml.tokens": (tokens, VT.ARRAY),
        "tokenizer.ggml.token_type": ([3] + [1] * (len(tokens) - 1), VT.ARRAY),
        "tokenizer.ggml.merges": (merges, VT.ARRAY),
        "tokenizer.ggml.bos_token_id": (0, VT.UINT32), "tokenizer.ggml.eos_token_id": (0, VT.UINT32),
        "tokenizer.ggml.unknown_token_id": None, "tokenizer.ggml.padding_token_id": None,
        "tokenizer.chat_template": None,
    })
    tok, ll = gaacrt.Tokenizer(path), llama_vocab(str(path))
    for text in ["the", " the", " the xy abc qabc", "hexy", "tthe  he", "xyz abcabc"]:
        assert tok.tokenize(text, False, False) == llama_tokenize(ll, text.encode(), False, False), text
