"""The tiny synthetic models (tests/fixtures/tiny_models.py) are real models of their
architecture: gaacrt's reader and llama.cpp (through llama-cpp-python) both load them, llama.cpp
evaluates them to finite, peaked logits, and the features each fixture exists for (Llama-3.1
rope factors, gemma3's sliding window, Q4_K weights) demonstrably change llama.cpp's output.
"""
from __future__ import annotations

import numpy as np
import pytest

import gaacrt
from fixtures.llama_reference import llama_model
from fixtures.tiny_models import ARCHS, default_config, llama31_rope_factors
from fixtures.tiny_vocab import CORPUS

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is the reference that proves the fixtures")

TEXT = ("The capital of France is Paris. Once upon a time there was a little model that wanted to "
        "learn how to speak. def hello(name): return 42")


def llama_logits(path, text: str = TEXT, n_ctx: int = 128) -> tuple[list[int], np.ndarray]:
    llm = llama_model(llama_cpp, path, vocab_only=False, n_ctx=n_ctx, logits_all=True, verbose=False)
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    llm.eval(toks)
    return toks, np.array(llm.scores[:len(toks)], dtype=np.float32)


REQUIRED_KEYS = ["context_length", "embedding_length", "block_count", "feed_forward_length",
                 "attention.head_count", "attention.head_count_kv", "attention.key_length",
                 "attention.value_length", "rope.dimension_count", "rope.freq_base",
                 "attention.layer_norm_rms_epsilon"]


@pytest.mark.parametrize("arch", ARCHS)
def test_fixture_loads_in_gaacrt_and_llama_cpp_with_peaked_logits(tiny_model, arch):
    path = tiny_model(arch)
    f = gaacrt.GGUFFile(str(path))
    md = f.metadata
    a = md["general.architecture"]
    assert a == ("llama" if arch == "llama31" else arch)
    for key in REQUIRED_KEYS:
        assert f"{a}.{key}" in md, key
    n_vocab = len(md["tokenizer.ggml.tokens"])
    assert f.tensor_info("token_embd.weight").shape == (md[f"{a}.embedding_length"], n_vocab)
    assert md["general.quantization_version"] == 2
    assert {t.type for t in f.tensors} == {"q8_0", "f32"}

    toks, logits = llama_logits(path)
    assert logits.shape == (len(toks), n_vocab)
    assert np.isfinite(logits).all()
    top2 = np.sort(logits, axis=1)[:, -2:]
    margin = top2[:, 1] - top2[:, 0]
    assert logits.std() > 4.0                       # peaked, not flat
    assert (margin > 0.5).mean() > 0.75
    # The layers, not just the tied embedding, decide the next token.
    assert (logits.argmax(axis=1) == np.array(toks)).mean() < 0.6


@pytest.mark.parametrize("arch", ARCHS)
def test_fixture_tokenizer_round_trips_and_uses_its_merges(tiny_model, arch):
    llm = llama_cpp.Llama(str(tiny_model(arch)), vocab_only=True, verbose=False)
    for text in (TEXT, CORPUS[:400], "ünïcode ✓ 中文 \t tabs\n\nnewlines 12345"):
        toks = llm.tokenize(text.encode(), add_bos=False, special=False)
        assert llm.detokenize(toks).decode() == text
    toks = llm.tokenize(CORPUS.encode(), add_bos=False, special=False)
    assert len(toks) < 0.6 * len(CORPUS.encode())   # learned tokens, not byte-by-byte


@pytest.mark.parametrize("arch", ARCHS)
def test_fixture_hyperparameters_are_what_llama_cpp_reads(tiny_model, arch):
    cfg = default_config(arch)
    path = tiny_model(arch)
    f = gaacrt.GGUFFile(str(path))
    llm = llama_model(llama_cpp, path, n_ctx=64, verbose=False)
    assert llm.n_embd() == cfg.n_embd
    assert llm.n_vocab() == len(f.metadata["tokenizer.ggml.tokens"])
    assert llm._model.n_ctx_train() == cfg.context_length
    assert llm._model.n_params() == sum(t.n_elements for t in f.tensors)   # every tensor was used
    meta = llm.metadata
    a = cfg.arch
    assert int(meta[f"{a}.block_count"]) == cfg.n_layers
    assert int(meta[f"{a}.attention.key_length"]) == cfg.head_dim
    if arch in ("qwen3", "gemma3"):
        assert cfg.head_dim != cfg.n_embd // cfg.n_head   # the point of these two fixtures


def test_fixture_tensors_per_architecture(tiny_model):
    names = {arch: {t.name for t in gaacrt.GGUFFile(str(tiny_model(arch))).tensors} for arch in ARCHS}
    assert "rope_freqs.weight" in names["llama31"] and "rope_freqs.weight" not in names["llama"]
    assert {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"} <= names["qwen2"]
    assert {"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight"} <= names["qwen3"]
    assert {"blk.5.post_attention_norm.weight", "blk.5.post_ffw_norm.weight",
            "blk.5.attn_q_norm.weight"} <= names["gemma3"]
    assert all("output.weight" not in n for n in names.values())             # tied embeddings


def test_llama31_rope_factors_are_nontrivial_and_change_llama_cpp_output(tiny_model):
    cfg = default_config("llama31")
    ff = llama31_rope_factors(cfg.head_dim, cfg.rope_base)
    assert ff[0] == 1.0 and ff[-1] == 8.0
    assert ((ff > 1.0) & (ff < 8.0)).any()          # the smooth band is represented too
    path = tiny_model("llama31")
    f = gaacrt.GGUFFile(str(path))
    info = f.tensor_info("rope_freqs.weight")
    assert np.array_equal(f.tensor_bytes("rope_freqs.weight").view(np.float32), ff)
    # The same file with the factors set to 1: llama.cpp must produce different logits
    # (position 0 has no rotation, so it stays equal).
    plain = path.with_name("plain.gguf")
    raw = bytearray(path.read_bytes())
    start = f.data_offset + info.offset
    raw[start:start + info.nbytes] = np.ones(len(ff), np.float32).tobytes()
    plain.write_bytes(raw)
    _, a = llama_logits(path)
    _, b = llama_logits(plain)
    assert np.allclose(a[0], b[0], atol=1e-4)
    assert np.abs(a[5:] - b[5:]).max() > 0.1


def test_gemma3_sliding_window_is_honoured_by_llama_cpp(tiny_model):
    window = default_config("gemma3").sliding_window
    _, a = llama_logits(tiny_model("gemma3", name="w.gguf"))
    _, b = llama_logits(tiny_model("gemma3", name="wide.gguf", sliding_window=1000))
    assert len(a) > window + 8
    assert np.allclose(a[:window], b[:window], atol=1e-3)     # all keys inside the window
    assert np.abs(a[window + 4:] - b[window + 4:]).max() > 0.1


@pytest.mark.parametrize("weight_type", ["f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_K"])
def test_every_weight_type_gives_a_model_llama_cpp_runs(tiny_model, weight_type):
    # n_embd 256 lets the q4_K fixture hold real Q4_K rows; shorter rows fall back as llama.cpp's
    # quantizer does (q4_K -> q5_0).
    path = tiny_model("qwen3", weight_type=weight_type, n_embd=256)
    types = {t.type for t in gaacrt.GGUFFile(str(path)).tensors}
    want = {"q4_K": {"q4_K", "q5_0", "f32"}}.get(weight_type, {weight_type, "f32"})
    assert types == want
    _, logits = llama_logits(path, TEXT[:60])
    assert np.isfinite(logits).all() and logits.std() > 1.0


def test_fixtures_are_deterministic_in_their_seed(tiny_model):
    a = tiny_model("qwen2", name="a.gguf", seed=3).read_bytes()
    b = tiny_model("qwen2", name="b.gguf", seed=3).read_bytes()
    c = tiny_model("qwen2", name="c.gguf", seed=4).read_bytes()
    assert a == b and a != c


def test_unknown_architecture_or_weight_type_is_refused(tiny_model):
    with pytest.raises(ValueError, match="unknown architecture 'mamba'"):
        tiny_model("mamba")
    with pytest.raises(ValueError, match="weight_type 'q3_K'"):
        tiny_model("llama", weight_type="q3_K")


def test_llama31_8b_fixture_small_variant_runs_alike_in_gaacrt_and_llama_cpp(tmp_path):
    # The 8B-shaped benchmark model (bench/gen_8b.py) through the same code path at tiny dims:
    # both runtimes read the same shapes and vocabulary, tokenize alike and agree on the logits.
    from fixtures.backend_compare import rel
    from fixtures.llama31_8b import N_SPECIAL, SMALL, write_llama31_8b
    path = write_llama31_8b(tmp_path / "small8b.gguf", small=True)
    types = {t.name: t.type for t in gaacrt.GGUFFile(str(path)).tensors}
    assert types["blk.0.ffn_down.weight"] == "q4_0" and types["token_embd.weight"] == "q4_0"
    assert types["output.weight"] == "q6_K" and types["rope_freqs.weight"] == "f32"
    m = gaacrt.Model(str(path), backend="cpu")
    c = m.config
    assert (c["n_vocab"], c["n_embd"], c["n_layer"], c["n_head"], c["n_head_kv"], c["head_dim_k"], c["n_ff"]) == \
        (SMALL.n_vocab, SMALL.n_embd, SMALL.n_layers, SMALL.n_head, SMALL.n_head_kv, SMALL.head_dim, SMALL.n_ff)
    text = TEXT + " <|eot_id|>"
    ours = m.tokenize(text, parse_special=True)
    llm = llama_model(llama_cpp, path, n_ctx=128, logits_all=True, verbose=False)
    theirs = llm.tokenize(text.encode(), add_bos=True, special=True)
    assert ours == theirs and ours[0] == SMALL.n_vocab - N_SPECIAL and ours[-1] == SMALL.n_vocab - N_SPECIAL + 9
    llm.eval(theirs)
    s = m.session(n_ctx=128)
    s.eval(ours)
    want = np.array(llm.scores[len(theirs) - 1], dtype=np.float32)
    assert np.isfinite(want).all() and want.std() > 0.3
    assert rel(s.logits(), want) < 3e-2 and s.logits().argmax() == want.argmax()


def test_llama31_8b_vocab_has_llama3_ids():
    from fixtures.llama31_8b import LLAMA31_8B, llama3_vocab
    v = llama3_vocab(LLAMA31_8B.n_vocab)
    assert len(v) == 128256 and len(set(v.tokens)) == 128256
    assert v.tokens[128000] == "<|begin_of_text|>" and v.tokens[128009] == "<|eot_id|>"
    assert v.special == {"bos": 128000, "eos": 128001}
