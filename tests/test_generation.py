"""Generation on the CPU backend (issue 4): greedy answers, batch/prefill invariance, sampling,
stop strings, limits and errors, cancellation, the Python API's input checks."""
import threading
import time

import numpy as np
import pytest

import gaacrt
from gaacrt import _core


@pytest.fixture(scope="module")
def smollm(smollm2_path):
    return gaacrt.Model(smollm2_path, backend="cpu", n_threads=2)


def test_smollm2_greedy_continues_the_capital_of_france_with_paris(smollm):
    out = smollm.generate("The capital of France is", max_tokens=4, temperature=0)
    assert out.text.startswith(" Paris"), out.text


def greedy(session, first_logits, n):
    toks = []
    logits = first_logits
    for _ in range(n):
        t = int(np.argmax(logits))
        toks.append(t)
        session.eval([t])
        logits = session.logits()
    return toks


def test_greedy_32_tokens_identical_for_batch_of_1_and_batch_of_4(smollm):
    prompts = ["The capital of France is", "Once upon a time, in a land far away,", "def fibonacci(n):",
               "1, 1, 2, 3, 5, 8,"]
    singles = []
    for p in prompts:
        s = smollm.session(n_ctx=256)
        s.eval(smollm.tokenize(p))
        singles.append(greedy(s, s.logits(), 32))
    sessions = smollm.batch(4, n_ctx=256)
    for s, p in zip(sessions, prompts):
        s.eval(smollm.tokenize(p))
    outs = [[] for _ in prompts]
    for _ in range(32):
        toks = [int(np.argmax(s.logits())) for s in sessions]
        for o, t in zip(outs, toks):
            o.append(t)
        gaacrt.Model.decode_batch(sessions, toks)
    assert outs == singles


def test_one_prefill_equals_token_by_token_bit_for_bit(smollm):
    toks = smollm.tokenize("The quick brown fox jumps over the lazy dog. " * 6)
    a = smollm.session(n_ctx=256)
    la = a.eval(toks, all_logits=True)
    b = smollm.session(n_ctx=256)
    lb = []
    for t in toks:
        b.eval([t])
        lb.append(b.logits())
    assert np.array_equal(la, np.stack(lb))
    assert greedy(a, la[-1], 32) == greedy(b, lb[-1], 32)


def test_same_seed_same_tokens_and_different_seed_differs(smollm):
    kw = dict(max_tokens=24, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    a = smollm.generate("Once upon a time, there was", seed=7, **kw).tokens
    b = smollm.generate("Once upon a time, there was", seed=7, **kw).tokens
    c = smollm.generate("Once upon a time, there was", seed=8, **kw).tokens
    assert len(a) > 4 and a == b and a != c


def test_stop_strings_end_the_text_before_the_stop(smollm):
    out = smollm.generate("1, 2, 3, 4,", max_tokens=32, temperature=0, stop=[" 7"])
    assert out.finish_reason == "stop" and out.text.rstrip().endswith("6,") and " 7" not in out.text


def test_streaming_yields_typed_chunks_ending_with_timings(smollm):
    chunks = list(smollm.generate("Hello", max_tokens=6, temperature=0, stream=True))
    assert all(isinstance(c, gaacrt.Chunk) for c in chunks)
    last = chunks[-1]
    assert last.finish_reason in ("length", "stop") and last.decode_tokens <= 6
    assert last.prompt_tokens > 0 and last.peak_memory > 0
    assert all(c.finish_reason is None for c in chunks[:-1])


def test_chat_answers_through_the_template(smollm):
    q = "What is the capital of France? Answer in one word."
    out = smollm.chat([{"role": "user", "content": q}], max_tokens=24, temperature=0)
    assert "Paris" in out.text


def test_prompt_longer_than_the_context_is_an_error_and_nothing_is_evaluated(smollm):
    s = smollm.session(n_ctx=16)
    with pytest.raises(gaacrt.GaacrtError, match="context length 16") as e:
        s.eval(list(range(100, 117)))
    assert e.value.kind == "context_full" and s.n_past == 0
    s.eval(list(range(100, 116)))  # exactly full is fine
    with pytest.raises(gaacrt.GaacrtError) as e:
        s.eval([5])
    assert e.value.kind == "context_full" and s.n_past == 16


def test_arena_full_is_an_error_and_other_sequences_are_untouched(smollm):
    # An arena of two 16-token blocks (x layers x heads x K/V pages) for two sequences of 32.
    page = 16 * 64 * 2
    per_block = 30 * 3 * 2 * page
    a, b = smollm.batch(2, n_ctx=64, kv_budget_bytes=3 * per_block)
    a.eval(list(range(100, 132)))  # two blocks
    before = a.logits()
    with pytest.raises(gaacrt.GaacrtError, match="arena full") as e:
        b.eval(list(range(100, 132)))
    assert e.value.kind == "arena_full" and a.n_past == 32
    assert np.array_equal(a.logits(), before)
    b.eval(list(range(100, 116)))  # one block still fits


def test_truncate_then_continue_equals_a_fresh_run(smollm):
    toks = smollm.tokenize("The capital of France is Paris. The capital of Italy is")
    s = smollm.session(n_ctx=128)
    s.eval(toks + smollm.tokenize(" Rome. And Spain"))
    s.truncate(len(toks) - 1)
    s.eval(toks[-1:])
    f = smollm.session(n_ctx=128)
    f.eval(toks)
    assert np.array_equal(s.logits(), f.logits())


def test_gemma_truncate_past_released_window_blocks_reprefills(gemma3_path):
    m = gaacrt.Model(gemma3_path, backend="cpu", n_threads=2)
    rng = np.random.default_rng(0)
    toks = [int(t) for t in rng.integers(1000, 20000, 700)]  # past the 512-token window
    s = m.session(n_ctx=1024)
    s.eval(toks)
    s.truncate(100)  # local layers released these blocks long ago: must re-prefill
    assert s.n_past == 100 and s.history == toks[:100]
    s.eval(toks[100:101])
    f = m.session(n_ctx=1024)
    f.eval(toks[:101])
    assert np.array_equal(s.logits(), f.logits())


def test_cancel_from_another_thread_stops_within_a_token(smollm):
    s = smollm.session(n_ctx=2048)
    gen = s.generate_tokens(smollm.tokenize("Write a long essay."), 1000, (), gaacrt.SamplingParams(temperature=0))
    seen = []

    def cancel_soon():
        while len(seen) < 3:
            time.sleep(0.01)
        s.cancel()

    t = threading.Thread(target=cancel_soon)
    t.start()
    for c in gen:
        seen.append(c)
    t.join()
    assert seen[-1].finish_reason == "cancelled"
    assert len(seen) < 3 + 4  # stopped within a token or two of the request


def test_wrong_types_and_shapes_from_python_are_clear_errors(smollm):
    s = smollm.session(n_ctx=64)
    with pytest.raises(TypeError, match="token ids"):
        s.eval("hello")
    with pytest.raises(TypeError, match="token ids"):
        s.eval(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="1-D"):
        s.eval(np.zeros((2, 2), np.int32))
    with pytest.raises(gaacrt.GaacrtError, match="out of range"):
        s.eval([smollm.n_vocab])
    smp = _core.Sampler(smollm.n_vocab)
    with pytest.raises(ValueError, match="float32"):
        smp.sample(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="float32"):
        smp.sample(np.zeros(smollm.n_vocab, np.float64))
    with pytest.raises(gaacrt.GaacrtError, match="unknown cache format"):
        smollm.session(cache="nope")
    with pytest.raises(TypeError, match="unexpected keyword"):
        smollm.generate("x", temprature=0)
    with pytest.raises(ValueError):
        gaacrt.Model(smollm.path, n_threads=-1)


def test_unknown_architecture_is_a_clear_error(tmp_path):
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "mamba")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(gaacrt.GaacrtError, match="architecture 'mamba' is not supported"):
        gaacrt.Model(str(tmp_path / "x.gguf"))
