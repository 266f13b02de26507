"""Detokenization and the Python API (no reference library needed).

- decode(encode(s)) == s on the whole corpus for both models, with and without special tokens;
- the streaming decoder never emits half a UTF-8 character, even when byte-fallback tokens
  (Gemma) or byte-level pieces (SmolLM2) split one, and its output adds up to detokenize();
- malformed UTF-8 is handled as documented in src/tokenizer/tokenizer.h: BPE reads each bad byte
  as U+FFFD, SentencePiece keeps the bytes as byte-fallback tokens; nothing crashes;
- the Tokenizer's properties, constructors and errors.
"""
from __future__ import annotations

import random

import pytest
from data.tokenizer_corpus_refs import load_corpus

import gaacrt

MODELS = ["smollm2", "gemma3"]


@pytest.fixture(scope="module")
def toks(smollm2_path, gemma3_path):
    return {"smollm2": gaacrt.Tokenizer(smollm2_path), "gemma3": gaacrt.Tokenizer(gemma3_path)}


@pytest.mark.parametrize("model", MODELS)
def test_decode_of_encode_is_identity_on_corpus(model, toks):
    tok = toks[model]
    bad = [t for t in load_corpus()["texts"] if tok.detokenize(tok.tokenize(t)) != t]
    assert not bad, bad[:5]


@pytest.mark.parametrize("model", MODELS)
def test_decode_of_encode_with_special_tokens_parsed_and_shown_is_identity(model, toks):
    tok = toks[model]
    bad = [t for t in load_corpus()["texts"]
           if tok.detokenize(tok.tokenize(t, add_special=False, parse_special=True), unparse_special=True) != t]
    assert not bad, bad[:5]


def test_special_tokens_are_parsed_only_when_asked(toks):
    tok = toks["smollm2"]
    im_start = tok.tokenize("<|im_start|>", add_special=False, parse_special=True)
    assert im_start == [1] and tok.token_text(1) == "<|im_start|>"
    as_text = tok.tokenize("<|im_start|>", add_special=False, parse_special=False)
    assert 1 not in as_text and len(as_text) > 1
    gemma = toks["gemma3"]
    assert gemma.tokenize("<start_of_turn>", False, True) == [105]
    assert 105 not in gemma.tokenize("<start_of_turn>", False, False)


def test_bos_and_eos_follow_the_vocabulary(toks):
    smol, gemma = toks["smollm2"], toks["gemma3"]
    assert (smol.add_bos, smol.add_eos, gemma.add_bos, gemma.add_eos) == (False, False, True, False)
    assert smol.tokenize("") == [] and gemma.tokenize("") == [gemma.bos_id]
    assert gemma.tokenize("hi")[0] == gemma.bos_id and gemma.tokenize("hi", add_special=False)[0] != gemma.bos_id


@pytest.mark.parametrize("model", MODELS)
def test_streaming_decoder_adds_up_to_detokenize(model, toks):
    tok = toks[model]
    for text in load_corpus()["texts"]:
        ids = tok.tokenize(text, add_special=False)
        dec = tok.decoder()
        parts = [dec.feed(i) for i in ids]
        assert "".join(parts) + dec.flush() == tok.detokenize(ids) == text


def _split_character_case(tok, candidates):
    """A text whose token pieces cut a character in two, and the ids."""
    for text in candidates:
        ids = tok.tokenize(text, add_special=False)
        pieces = [tok.token_to_piece(i) for i in ids]
        for p in pieces:
            try:
                p.decode("utf-8")
            except UnicodeDecodeError:
                return text, ids
    pytest.fail("no candidate splits a character across tokens")


@pytest.mark.parametrize("model", MODELS)
def test_streaming_decoder_never_emits_half_a_character(model, toks):
    tok = toks[model]
    # Rare characters: Gemma spells them with byte-fallback tokens <0xF0><0x93>..., SmolLM2's
    # byte-level pieces end mid-character.
    text, ids = _split_character_case(tok, ["\U00013000\U00013001 hieroglyphs", "\U0001fae0 melting",
                                            "\U0002ebf0 ext I", "\u0f56\u0f7c\u0f51"])
    dec = tok.decoder()
    held = False
    out = ""
    for i in ids:
        part = dec.feed(i)
        held |= dec.pending > 0
        part.encode("utf-8")  # a str holding only whole characters (never a surrogate escape)
        out += part
    assert held, "some token must have left an incomplete character pending"
    assert out + dec.flush() == text


def test_streaming_decoder_flush_replaces_an_unfinished_character(toks):
    gemma = toks["gemma3"]
    ids = gemma.tokenize("\U00013000", add_special=False)  # four byte tokens
    assert len(ids) == 4
    dec = gemma.decoder()
    assert [dec.feed(i) for i in ids[:2]] == ["", ""] and dec.pending == 2
    assert dec.flush() == "\ufffd" and dec.pending == 0


def test_malformed_utf8_in_bpe_reads_as_replacement_characters(toks):
    smol = toks["smollm2"]
    assert smol.tokenize(b"ab\xffcd") == smol.tokenize("ab\ufffdcd")
    assert smol.detokenize(smol.tokenize(b"ab\xffcd")) == "ab\ufffdcd"
    # a truncated sequence is one bad byte per byte, like llama.cpp
    assert smol.detokenize(smol.tokenize(b"\xe2\x82")) == "\ufffd\ufffd"


def test_malformed_utf8_in_sentencepiece_keeps_the_bytes(toks):
    gemma = toks["gemma3"]
    for raw in load_corpus()["malformed"]:
        if b" " in raw:
            continue
        ids = gemma.tokenize(raw, add_special=False)
        assert gemma.detokenize_bytes(ids) == raw
        assert gemma.detokenize(ids) == raw.decode("utf-8", errors="replace")
    # A bad lead byte announces a length (0xFF: 4) and takes the next bytes into its symbol, so an
    # escaped space inside comes back as U+2581 (same ids as llama.cpp).
    ids = gemma.tokenize(b"Hello\xff world", add_special=False)
    assert gemma.detokenize_bytes(ids) == b"Hello\xff\xe2\x96\x81world"


@pytest.mark.parametrize("model", MODELS)
def test_random_bytes_never_crash_and_stay_in_the_vocabulary(model, toks):
    tok = toks[model]
    rng = random.Random(1234)
    inputs = load_corpus()["malformed"] + load_corpus()["beyond_unicode"]
    inputs += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(300)]
    for raw in inputs:
        for parse in (False, True):
            ids = tok.tokenize(raw, add_special=True, parse_special=parse)
            assert all(0 <= i < tok.vocab_size for i in ids)
            dec = tok.decoder()
            assert "".join(dec.feed(i) for i in ids) + dec.flush() == tok.detokenize(ids)


def test_code_points_beyond_unicode_are_replacement_characters(toks):
    """llama.cpp aborts on these (it decodes F4 90 80 80 to 0x110000 and cannot re-encode it);
    gaacrt reads each such byte as U+FFFD instead (BPE)."""
    smol = toks["smollm2"]
    assert smol.detokenize(smol.tokenize(b"a\xf4\x90\x80\x80b")) == "a" + "\ufffd" * 4 + "b"


def test_tokenizer_properties(toks, smollm2_path):
    smol, gemma = toks["smollm2"], toks["gemma3"]
    assert (smol.vocab_size, smol.model_type, smol.pre) == (49152, "gpt2", "smollm")
    assert (gemma.vocab_size, gemma.model_type) == (262144, "llama")
    assert (smol.bos_id, smol.eos_id, gemma.bos_id, gemma.eos_id) == (1, 2, 2, 1)
    assert smol.token_text(smol.eos_id) == "<|im_end|>" and smol.is_eog(2) and not smol.is_eog(1)
    assert gemma.is_eog(gemma.tokenize("<end_of_turn>", False, True)[0])
    assert set(smol.eog_ids) >= {0, 2} and set(gemma.eog_ids) >= {1, 106}
    assert gaacrt.Tokenizer.from_gguf(smollm2_path).tokenize("same") == smol.tokenize("same")
    assert isinstance(smol, gaacrt._core.Tokenizer)
    assert smol.token_to_piece(smol.tokenize(" hello", False)[0]) == b" hello"
    assert smol.token_to_piece(1) == b"" and smol.token_to_piece(1, special=True) == b"<|im_start|>"


def test_bad_arguments_are_clear_errors(toks):
    smol = toks["smollm2"]
    with pytest.raises(gaacrt.GaacrtError, match="token id 49152 out of range") as e:
        smol.detokenize([49152])
    assert e.value.kind == "bad_token"
    with pytest.raises(gaacrt.GaacrtError) as e:
        smol.token_to_piece(-1)
    assert e.value.kind == "bad_token"
    with pytest.raises(TypeError):
        smol.tokenize(123)
    with pytest.raises(UnicodeEncodeError):
        smol.tokenize("lone surrogate \ud800")


def test_sentencepiece_merges_across_a_space_when_a_token_spans_it(toks):
    """SentencePiece runs independent merges between points no token can span; Gemma's one token
    with an inner space ('>▁</') must still be found."""
    gemma = toks["gemma3"]
    assert [gemma.token_text(i) for i in gemma.tokenize("x> </y", add_special=False)] == ["x", ">\u2581</", "y"]
