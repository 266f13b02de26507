"""Token ids, pieces, attributes and the end-of-generation set are those of the references:
llama.cpp (through llama-cpp-python) for SmolLM2 (byte-level BPE) and Gemma 3 (SentencePiece),
and HF `tokenizers` built from SmolLM2's own vocabulary and merges (shared/spec/gguf.md §4).

The corpus (tests/data/tokenizer_corpus.json, 400+ strings) is compared for every combination of
add_special and parse_special. GGUFs derived from the real models with another
`tokenizer.ggml.pre` (gpt-2, llama-bpe, qwen2, default) or add_space_prefix reach the
pre-tokenizers and flags the two models do not use themselves.
"""
from __future__ import annotations

import random

import pytest
from data.tokenizer_corpus_refs import (
    derive_gguf,
    llama_cpp_or_skip,
    llama_detokenize,
    llama_token_to_piece,
    llama_tokenize,
    llama_vocab,
    load_corpus,
)

import gaacrt

MODELS = ["smollm2", "gemma3"]
FLAGS = [(a, p) for a in (True, False) for p in (True, False)]


@pytest.fixture(scope="module")
def model_paths(smollm2_path, gemma3_path):
    return {"smollm2": smollm2_path, "gemma3": gemma3_path}


@pytest.fixture(scope="module")
def derived(tmp_path_factory, smollm2_path, gemma3_path):
    """GGUFs that differ from the real ones only in tokenizer keys."""
    from gguf import GGUFValueType as VT
    d = tmp_path_factory.mktemp("derived_vocabs")
    out = {}
    for pre in ["gpt-2", "llama-bpe", "qwen2", "default"]:
        out[pre] = derive_gguf(smollm2_path, d / f"smollm2-{pre}.gguf", {"tokenizer.ggml.pre": (pre, VT.STRING)})
    out["no-pre"] = derive_gguf(smollm2_path, d / "smollm2-no-pre.gguf", {"tokenizer.ggml.pre": None})
    out["spm-space-prefix"] = derive_gguf(gemma3_path, d / "gemma3-space-prefix.gguf",
                                          {"tokenizer.ggml.add_space_prefix": (True, VT.BOOL)})
    return out


def mismatches(path, items, flags=FLAGS):
    """[(text, add_special, parse_special, ours, llama.cpp's)] over items x flags."""
    tok = gaacrt.Tokenizer(path)
    ll = llama_vocab(str(path))
    bad = []
    for text in items:
        b = text if isinstance(text, bytes) else text.encode()
        for add, parse in flags:
            ours, ref = tok.tokenize(b, add, parse), llama_tokenize(ll, b, add, parse)
            if ours != ref:
                bad.append((text, add, parse, ours, ref))
    return bad


@pytest.mark.parametrize("add_special,parse_special", FLAGS)
@pytest.mark.parametrize("model", MODELS)
def test_token_ids_equal_llama_cpp_on_corpus(model, add_special, parse_special, model_paths):
    llama_cpp_or_skip()
    texts = load_corpus()["texts"]
    assert len(texts) >= 300
    bad = mismatches(model_paths[model], texts, [(add_special, parse_special)])
    assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. {bad[:3]}"


@pytest.mark.parametrize("model", MODELS)
def test_malformed_utf8_token_ids_equal_llama_cpp(model, model_paths):
    llama_cpp_or_skip()
    bad = mismatches(model_paths[model], load_corpus()["malformed"])
    assert not bad, bad[:3]


@pytest.mark.parametrize("pre", ["gpt-2", "llama-bpe", "qwen2", "default", "no-pre"])
def test_every_pre_tokenizer_family_equals_llama_cpp(pre, derived):
    llama_cpp_or_skip()
    tok = gaacrt.Tokenizer(derived[pre])
    assert tok.pre == {"gpt-2": "gpt2", "llama-bpe": "llama3", "qwen2": "qwen2"}.get(pre, "default")
    bad = mismatches(derived[pre], load_corpus()["texts"], [(True, True), (False, False)])
    assert not bad, f"{len(bad)} differ, e.g. {bad[:3]}"


def test_sentencepiece_add_space_prefix_equals_llama_cpp(derived):
    llama_cpp_or_skip()
    path = derived["spm-space-prefix"]
    assert gaacrt.Tokenizer(path).add_space_prefix
    bad = mismatches(path, load_corpus()["texts"])
    assert not bad, f"{len(bad)} differ, e.g. {bad[:3]}"


@pytest.mark.parametrize("which", ["smollm2", "gemma3", "gpt-2", "llama-bpe", "spm-space-prefix"])
def test_detokenize_equals_llama_detokenize(which, model_paths, derived):
    """All four remove_special / unparse_special modes, including the clean-up of spaces that
    gpt-2 and llama-bpe vocabularies apply and the prefix-space removal of SentencePiece."""
    llama_cpp_or_skip()
    path = model_paths.get(which) or derived[which]
    tok, ll = gaacrt.Tokenizer(path), llama_vocab(str(path))
    bad = []
    corpus = load_corpus()
    for text in corpus["texts"] + corpus["malformed"]:
        ids = llama_tokenize(ll, text if isinstance(text, bytes) else text.encode(), True, True)
        for rs in (True, False):
            for up in (True, False):
                ours, ref = tok.detokenize_bytes(ids, rs, up), llama_detokenize(ll, ids, rs, up)
                if ours != ref:
                    bad.append((text, rs, up, ours, ref))
    assert not bad, f"{len(bad)} differ, e.g. {bad[:3]}"


@pytest.mark.parametrize("model", MODELS)
def test_token_to_piece_equals_llama_cpp_for_every_token(model, model_paths):
    llama_cpp_or_skip()
    tok, ll = gaacrt.Tokenizer(model_paths[model]), llama_vocab(model_paths[model])
    bad = [(i, s) for i in range(tok.vocab_size) for s in (False, True)
           if tok.token_to_piece(i, s) != llama_token_to_piece(ll, i, s)]
    assert not bad, f"{len(bad)} differ, e.g. {bad[:5]}"


@pytest.mark.parametrize("model", MODELS)
def test_eog_set_attributes_and_specials_equal_llama_cpp(model, model_paths):
    llama_cpp = llama_cpp_or_skip()
    tok, ll = gaacrt.Tokenizer(model_paths[model]), llama_vocab(model_paths[model])
    v = ll._model.vocab
    assert tok.eog_ids == [i for i in range(tok.vocab_size) if llama_cpp.llama_vocab_is_eog(v, i)]
    attr_bad = [i for i in range(tok.vocab_size) if tok.token_attr(i) != llama_cpp.llama_vocab_get_attr(v, i)]
    assert not attr_bad, [(i, tok.token_text(i), tok.token_attr(i)) for i in attr_bad[:5]]
    assert tok.bos_id == llama_cpp.llama_vocab_bos(v)
    assert tok.eos_id == llama_cpp.llama_vocab_eos(v)
    assert tok.add_bos == llama_cpp.llama_vocab_get_add_bos(v)
    assert tok.add_eos == llama_cpp.llama_vocab_get_add_eos(v)
    assert tok.vocab_size == llama_cpp.llama_vocab_n_tokens(v)


def test_code_point_classes_agree_with_llama_cpp_across_all_planes(model_paths):
    """A sample of every plane (every 17th code point, surrogates excluded) placed between a
    letter, a digit and a space: any disagreement in the letter / number / whitespace / other
    class of a code point (Unicode version of the tables included) changes the pre-tokens."""
    llama_cpp_or_skip()
    cps = [cp for cp in range(0x80, 0x110000, 17) if not 0xD800 <= cp <= 0xDFFF]
    rng = random.Random(7)
    rng.shuffle(cps)
    path = model_paths["smollm2"]
    tok, ll = gaacrt.Tokenizer(path), llama_vocab(path)
    for k in range(0, len(cps), 4000):
        text = "".join(f"a{chr(cp)}1{chr(cp)} {chr(cp)}\t" for cp in cps[k:k + 4000]).encode()
        assert tok.tokenize(text, False, False) == llama_tokenize(ll, text, False, False), f"chunk {k}"


def _hf_smollm2(path: str, with_specials: bool):
    """HF tokenizers configured like SmolLM2's tokenizer.json, from the GGUF alone: byte-level
    BPE with the smollm pre-tokenization (each digit isolated, then the GPT-2 regex)."""
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is not installed")
    from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
    md = gaacrt.GGUFFile(path).metadata
    toks, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    hf = tokenizers.Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges, fuse_unk=False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    hf.decoder = decoders.ByteLevel()
    if with_specials:
        hf.add_special_tokens([AddedToken(t, special=True, normalized=False)
                               for t, ty in zip(toks, types) if ty == 3])
    return hf


def test_hf_tokenizers_configuration_reproduces_llama_cpp_on_smollm2(model_paths):
    """The HF reference is only a reference if it agrees with llama.cpp first."""
    llama_cpp_or_skip()
    path = model_paths["smollm2"]
    hf, ll = _hf_smollm2(path, with_specials=True), llama_vocab(path)
    bad = [t for t in load_corpus()["texts"]
           if hf.encode(t, add_special_tokens=False).ids != llama_tokenize(ll, t.encode(), False, True)]
    assert not bad, bad[:3]


@pytest.mark.parametrize("parse_special", [True, False])
def test_smollm2_token_ids_equal_hf_tokenizers_on_corpus(parse_special, model_paths):
    path = model_paths["smollm2"]
    # HF always splits added special tokens out; without them it treats "<|im_start|>" as text,
    # which is what parse_special=False means.
    hf, tok = _hf_smollm2(path, with_specials=parse_special), gaacrt.Tokenizer(path)
    texts = load_corpus()["texts"]
    bad = [(t, tok.tokenize(t, False, parse_special), hf.encode(t, add_special_tokens=False).ids)
           for t in texts if tok.tokenize(t, False, parse_special) != hf.encode(t, add_special_tokens=False).ids]
    assert not bad, f"{len(bad)} of {len(texts)} differ, e.g. {bad[:3]}"
    # and both decode the ids to the same text
    ids = [tok.tokenize(t, False, False) for t in texts]
    assert [tok.detokenize(i) for i in ids] == [hf.decode(i) for i in ids]


@pytest.mark.parametrize("model", MODELS)
def test_long_text_token_ids_equal_llama_cpp(model, model_paths):
    """64 KB of license text in one call: long fragments, many special whitespace tokens (Gemma's
    newline and space-run tokens are user-defined), SentencePiece segments cut where no token
    can span."""
    llama_cpp_or_skip()
    from pathlib import Path
    licenses = sorted(p for p in Path("/usr/share/common-licenses").iterdir() if p.is_file() and not p.is_symlink())
    text = b"\n\n".join(p.read_bytes() for p in licenses)[:65536] if licenses else b""
    if len(text) < 65536:
        text = (" ".join(load_corpus()["texts"]).encode() * 20)[:65536]
    text = text.decode("utf-8", errors="ignore").encode()
    bad = mismatches(model_paths[model], [text], [(True, False), (False, True)])
    assert not bad, "long text differs"
