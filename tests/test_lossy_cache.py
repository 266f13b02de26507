"""The lossy cache formats end to end (issue 6): E8 k2v2, q8 and kivi2 behind the same cache and
attention as BF16 — residual window, accounting, quality ordering, truncation, lossless check."""
import numpy as np
import pytest

import gaacrt
from gaacrt import _core

GPL = "/usr/share/common-licenses/GPL-3"


@pytest.fixture(scope="module")
def smollm(smollm2_path):
    return gaacrt.Model(smollm2_path, backend="cpu", n_threads=2)


def text(model, n, skip=0):
    return model.tokenize(open(GPL, encoding="utf-8").read(), add_special=False)[skip:skip + n]


def nll(logits, toks):
    lp = logits - logits.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    return -lp[np.arange(len(toks) - 1), toks[1:]]


def test_window_keeps_the_newest_tokens_raw_and_the_rest_compressed(smollm):
    s = smollm.session(n_ctx=512, cache="e8")
    s.eval(text(smollm, 300))
    st = s.kv_stats()
    # 300 tokens: blocks wholly older than the newest 128 (positions < 172 -> 10 blocks) compressed.
    per_block = 30 * 3  # layers x kv-heads, per K or V
    assert st["k"]["tiles_encoded"] == 10 * per_block and st["v"]["tiles_encoded"] == 10 * per_block
    assert st["tiles_raw"] == (19 - 10) * per_block * 2


def test_bytes_per_token_follow_the_spec_accounting(smollm):
    # SmolLM2 (d = 64): E8 k2v2 is 2*64/8 + 4 = 20 B of keys and 64/4 + 64/32*4 = 24 B of values
    # per token-head (+4 B of norm per half at d = 64: see src/codec/scalar/kv_codec_bytes.h).
    b = _core.kv_codec_bytes_per_token_head("e8", 64, 64)
    assert b["k"] + b["v"] == pytest.approx(44)
    b128 = _core.kv_codec_bytes_per_token_head("e8", 128, 128)
    assert b128["k"] + b128["v"] == pytest.approx(84)  # spec/e8.md §9
    s = smollm.session(n_ctx=2048, cache="e8")
    s.eval(text(smollm, 1024))
    st = s.kv_stats()
    compressed_tokens = (1024 - 128) // 16 * 16
    raw_tokens = 1024 - compressed_tokens
    expect = 30 * 3 * (compressed_tokens * 44 + raw_tokens * 256)
    assert st["resident_bytes"] - 4 * (st["tiles_raw"] + st["tiles_slot"]) == pytest.approx(expect, rel=0.02)


@pytest.mark.parametrize("fmt", ["e8", "q8", "kivi2"])
def test_lossy_format_runs_in_serving_state_and_stays_close_to_bf16(smollm, fmt):
    toks = text(smollm, 480)
    ref = smollm.session(n_ctx=512, n_ubatch=16)
    a = np.vstack([ref.eval(toks[c:c + 16], all_logits=True) for c in range(0, 480, 16)])
    s = smollm.session(n_ctx=512, cache=fmt, n_ubatch=16)
    b = np.vstack([s.eval(toks[c:c + 16], all_logits=True) for c in range(0, 480, 16)])
    agree = (a.argmax(1) == b.argmax(1))[200:].mean()
    ppl = np.exp(nll(b, toks)[200:].mean()) / np.exp(nll(a, toks)[200:].mean())
    print(f"{fmt}: top-1 agreement {agree:.3f}, perplexity ratio to bf16 {ppl:.4f}")
    assert agree > 0.75 and ppl < 1.3
    assert s.kv_stats()["k"]["tiles_encoded"] > 0


def test_e8_costs_less_perplexity_than_kivi2(smollm):
    toks = text(smollm, 768, skip=1000)
    ppl = {}
    for fmt in ("bf16", "e8", "kivi2"):
        s = smollm.session(n_ctx=800, cache=fmt, n_ubatch=16)
        L = np.vstack([s.eval(toks[c:c + 16], all_logits=True) for c in range(0, len(toks), 16)])
        ppl[fmt] = float(np.exp(nll(L, toks)[256:].mean()))
    print(ppl)
    assert ppl["e8"] - ppl["bf16"] < ppl["kivi2"] - ppl["bf16"]


def test_truncate_inside_the_raw_window_is_exact_and_into_compressed_history_recomputes(smollm):
    toks = text(smollm, 420)

    def run(upto):
        f = smollm.session(n_ctx=512, cache="e8", n_ubatch=16)
        for c in range(0, upto, 16):
            f.eval(toks[c:min(c + 16, upto)])
        return f

    # 410 -> 405: no block was compressed in between (block 16 went at 400, block 17 goes at 416),
    # so only raw tokens are dropped and the state is exactly a fresh run's.
    s = run(410)
    s.truncate(405)
    s.eval(toks[405:406])
    f = run(405)
    f.eval(toks[405:406])
    assert np.array_equal(s.logits(), f.logits())
    # Back to 250: blocks compressed since would be raw again at 250; the cache drops them and the
    # session recomputes them from its history. (Bit-exact reproduction of a fresh lossy run is
    # not promised: the recomputed tokens attend to older blocks the fresh run still held raw.)
    s.truncate(250)
    assert s.n_past == 250 and s.history == toks[:250]
    st = s.kv_stats()
    assert st["tokens"] == 250 and st["k"]["tiles_encoded"] > 0
    s.eval(toks[250:251])
    g = run(250)
    g.eval(toks[250:251])
    assert int(np.argmax(s.logits())) == int(np.argmax(g.logits()))


def test_gaac_truncate_equals_a_fresh_run(smollm):
    toks = text(smollm, 300)
    s = smollm.session(n_ctx=512, cache="gaac")
    s.eval(toks)
    s.truncate(200)  # inside a finalized block: the block is recomputed from the history
    s.eval(toks[200:201])
    f = smollm.session(n_ctx=512, cache="gaac")
    f.eval(toks[:201])
    assert np.array_equal(s.logits(), f.logits())


def test_check_lossless_catches_a_lossy_format(smollm):
    s = smollm.session(n_ctx=512, cache="e8", check_lossless=True, n_ubatch=16)
    with pytest.raises(gaacrt.LosslessMismatch, match="logit"):
        for c in range(0, 300, 16):
            s.eval(text(smollm, 300)[c:c + 16])


def test_e8_table_scoring_option_agrees_with_the_decode_path(smollm):
    toks = text(smollm, 300)
    out = {}
    for mode in ("decode", "table"):
        c = _core.Context(smollm._m, n_ctx=400, cache="e8", n_ubatch=16, e8_scoring=mode)
        s = _core.Session(c)
        for i in range(0, 288, 16):
            s.eval(toks[i:i + 16])
        rows = []
        for t in toks[288:292]:  # decode steps: the table path is taken
            s.eval([t])
            rows.append(s.logits())
        out[mode] = np.stack(rows)
    d, t = out["decode"], out["table"]
    assert np.abs(d - t).max() <= 2e-3 * np.abs(d).max() and (d.argmax(1) == t.argmax(1)).all()
    with pytest.raises(gaacrt.GaacrtError, match="e8_scoring"):
        _core.Context(smollm._m, n_ctx=64, cache="e8", e8_scoring="nope")


def test_e8_key_centering_option_fits_its_means_online_and_stays_close(smollm):
    # Not in the paper: a per-head mean key, fitted on the first prefill, is subtracted before the
    # lattice coding and added back on decode (it helps models whose keys share a large common
    # direction, e.g. Gemma-3's global layers; see bench/results/e8_quality.md).
    toks = text(smollm, 320)
    c = _core.Context(smollm._m, n_ctx=400, cache="e8", n_ubatch=16, e8_center=True)
    s = _core.Session(c)
    rows = [s.eval(toks[i:i + 16], all_logits=True) for i in range(0, 320, 16)]
    ref = smollm.session(n_ctx=400, n_ubatch=16)
    base = [ref.eval(toks[i:i + 16], all_logits=True) for i in range(0, 320, 16)]
    a, b = np.vstack(base)[160:], np.vstack(rows)[160:]
    assert c.kv_stats()["k"]["tiles_encoded"] > 0
    assert np.isfinite(b).all() and (a.argmax(1) == b.argmax(1)).mean() > 0.7


def test_e8_centering_scales_channels_and_metal_refuses_it(smollm):
    # The scale (sqrt of each channel's std) is fitted with the mean: a centered cache's logits
    # differ from the plain E8 cache's, and stay finite.
    toks = text(smollm, 200)
    outs = []
    for center in (False, True):
        s = smollm.session(n_ctx=256, cache="e8", n_ubatch=16, e8_center=center)
        outs.append(np.vstack([s.eval(toks[i:i + 16], all_logits=True) for i in range(0, 192, 16)]))
    assert np.isfinite(outs[1]).all() and not np.array_equal(outs[0][-16:], outs[1][-16:])


@pytest.mark.parametrize("fmt", ["e8", "kivi2", "q8"])
def test_raw_sink_keeps_the_first_blocks_bf16_for_good(smollm, fmt):
    toks = text(smollm, 300)
    s = smollm.session(n_ctx=512, cache=fmt, raw_sink=20)  # rounded up to 2 blocks
    s.eval(toks)
    st = s.kv_stats()
    per_block = 30 * 3
    ready = (300 - (0 if fmt == "q8" else 128)) // 16  # blocks wholly older than the raw window
    assert st["k"]["tiles_encoded"] == (ready - 2) * per_block
    assert st["tiles_raw"] == (19 - (ready - 2)) * per_block * 2
    # A sink longer than the sequence compresses nothing: the logits are the BF16 cache's, bit for bit.
    ref = smollm.session(n_ctx=512, n_ubatch=16)
    s = smollm.session(n_ctx=512, cache=fmt, n_ubatch=16, raw_sink=512)
    for i in range(0, 300, 16):
        assert np.array_equal(ref.eval(toks[i:i + 16], all_logits=True), s.eval(toks[i:i + 16], all_logits=True))
    assert s.kv_stats()["k"]["tiles_encoded"] == 0


def test_raw_sink_truncate_recomputes_blocks_a_fresh_run_would_hold_raw(smollm):
    toks = text(smollm, 320)
    s = smollm.session(n_ctx=400, cache="e8", n_ubatch=16, raw_sink=32)
    for i in range(0, 320, 16):
        s.eval(toks[i:i + 16])
    assert s.kv_stats()["k"]["tiles_encoded"] > 0
    # Back to 40 tokens: block 2 (tokens 32-47) was compressed, but a fresh run of 40 tokens holds
    # every block raw (the sink, then the window): the cache gives it back and the session
    # recomputes it, so nothing compressed is left.
    s.truncate(40)
    assert s.n_past == 40 and s.kv_stats()["tiles_slot"] == 0
    s.eval(toks[40:41])
    fresh = smollm.session(n_ctx=400, cache="e8", n_ubatch=16, raw_sink=32)
    fresh.eval(toks[:40])
    fresh.eval(toks[40:41])
    assert int(np.argmax(s.logits())) == int(np.argmax(fresh.logits()))


def test_raw_sink_is_checked(smollm):
    with pytest.raises(gaacrt.GaacrtError, match="raw_sink"):
        smollm.session(n_ctx=64, cache="gaac", raw_sink=16)
    with pytest.raises(gaacrt.GaacrtError, match="raw_sink"):
        smollm.session(n_ctx=64, cache="e8", raw_sink=-1)


@pytest.mark.parametrize("fmt,window", [("e8", 0), ("e8", 64), ("q8", 32)])
def test_raw_window_keeps_the_newest_blocks_raw(smollm, fmt, window):
    # A block is compressed once all of it is older than the window: 300 tokens and a window of
    # 128 leave blocks 0-9 compressed (160 tokens) and 10-18 raw.
    toks = text(smollm, 300)
    s = smollm.session(n_ctx=512, cache=fmt, raw_window=window)
    s.eval(toks)
    st = s.kv_stats()
    per_block = 30 * 3
    ready = (300 - window) // 16
    assert st["k"]["tiles_encoded"] == ready * per_block
    assert st["tiles_raw"] == (19 - ready) * per_block * 2


def test_gaac_raw_window_keeps_the_logits_and_compresses_past_it(smollm):
    # GAAC is lossless: with its newest 128 tokens raw (CPU tg at a short context ~+10%, bench
    # notes in the README) every logit is the BF16 cache's, bit for bit, in prefill chunks and in
    # decode steps across the block boundaries where tiles leave the window.
    toks = text(smollm, 300)
    ref = smollm.session(n_ctx=512, n_ubatch=64)
    s = smollm.session(n_ctx=512, cache="gaac", n_ubatch=64, raw_window=128)
    assert np.array_equal(ref.eval(toks[:256], all_logits=True), s.eval(toks[:256], all_logits=True))
    for t in toks[256:300]:
        assert np.array_equal(ref.eval([t]), s.eval([t]))
    k = s.kv_stats()["k"]  # (a tile that does not fit its slot stays raw: a fallback)
    assert k["tiles_encoded"] + k["tiles_raw_fallback"] == (300 - 128) // 16 * 30 * 3
    assert k["tiles_encoded"] > 0


def test_raw_window_is_checked(smollm):
    with pytest.raises(gaacrt.GaacrtError, match="raw_window"):
        smollm.session(n_ctx=64, cache="bf16", raw_window=16)
    from gaacrt.perplexity import perplexity  # (the cache's options reach its run, bf16 too)
    with pytest.raises(gaacrt.GaacrtError, match="raw_window"):
        perplexity(smollm, "hello world " * 100, cache="bf16", ctx=64, raw_window=16)
    with pytest.raises(gaacrt.GaacrtError, match="raw_window"):
        smollm.session(n_ctx=64, cache="gaac", raw_window=-2)
