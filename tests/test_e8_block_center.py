"""E8 block centering, e8_center="block" (not in the paper; src/codec/e8/e8_layout.h, e8_keys.cpp
e8_fit_block_mean, src/kv/lossy_codecs.cpp): each 16-token key block's fp16 mean (rotated basis)
sits in the slot, the lattice codes k~ - m~ for every token it brings closer to zero, and outliers
(an attention sink) keep their own code, marked by the norm's sign bit.
"""
import numpy as np
import pytest

import gaacrt
import gaacrt._core as C
from gaacrt import _core


def drifting_keys(rng, n_blocks, d, outlier=True):
    """Keys sharing a large direction that drifts from block to block, plus an attention-sink-like
    outlier (small, elsewhere) at token 0."""
    common = 6.0 * rng.standard_normal(d) + np.cumsum(rng.standard_normal((n_blocks, 1, d)), 0)
    k = (common + rng.standard_normal((n_blocks, 16, d))).astype(np.float32)
    if outlier:
        k[0, 0] = 0.3 * rng.standard_normal(d)
    return k


def fp16_field(slots, T, off, n):
    return slots[..., off:off + 2 * n].copy().view(np.float16).astype(np.float64)


@pytest.mark.parametrize("d", [64, 128, 256])
def test_block_centered_slots_follow_the_documented_layout(d):
    rng = np.random.default_rng(d)
    c = C.E8LayerCodec(d, 1, block_mean=True)
    T = min(d, 128)
    assert c.block_mean and c.alpha == pytest.approx(C.e8_alpha(d) * 0.8, rel=1e-6)
    assert c.key_slot_bytes == 6 * T + 64 == C.e8_k_slot_bytes(T) + 2 * T
    k = drifting_keys(rng, 3, d)
    slots = c.encode_keys(k)
    assert slots.shape == (3, d // T, 6 * T + 64)
    R = np.asarray(c.rotation, np.float64)
    for b in range(3):
        kr = k[b].astype(np.float64) @ R.T
        m = np.concatenate([fp16_field(slots[b, h], T, 4 * T + 64, T) for h in range(d // T)])
        norm_bits = np.stack([slots[b, h, 4 * T:4 * T + 64].copy().view(np.uint32) for h in range(d // T)])
        assert (norm_bits == norm_bits[0]).all()  # every half holds the same norms
        raw = (norm_bits[0] >> 31).astype(bool)
        centered = ~raw
        # The stored mean is the fp16 mean of the centered tokens, and centering shrinks each of them.
        assert np.abs(m - kr[centered].mean(0)).max() <= 2e-3 * np.abs(m).max()
        assert (np.linalg.norm(kr[centered] - m, axis=1) < np.linalg.norm(kr[centered], axis=1)).all()
        assert (np.linalg.norm(kr[raw] - m, axis=1) >= np.linalg.norm(kr[raw], axis=1) * 0.999).all()
        if b == 0:
            assert raw[0] and raw.sum() == 1  # the outlier, alone
        # Norms are those of what was coded, and the codes decode (independently) to the keys.
        norms = (norm_bits[0] & 0x7FFFFFFF).view(np.float32).astype(np.float64)
        coded = np.where(centered[:, None], kr - m, kr)
        assert np.allclose(norms, np.linalg.norm(coded, axis=1), rtol=2e-3)
        codes = np.concatenate([slots[b, h, :4 * T].copy().view(np.uint32).reshape(16, T // 32, 2)
                                for h in range(d // T)], 1)
        g = np.zeros((16, d))
        for t in range(16):
            for q in range(d // 32):
                proto, signs = int(codes[t, q, 0]), int(codes[t, q, 1])
                for i in range(4):
                    s = 0
                    for j in range(8):
                        s |= ((signs >> (4 * j + i)) & 1) << j
                    code = (((proto >> (8 * i)) & 0xFF) << 8) | s
                    g[t, 32 * q + 8 * i:32 * q + 8 * i + 8] = C.e8_decode_codes(np.array([code], np.uint16))[0]
        k_hat = (norms[:, None] / c.alpha * g + np.where(centered[:, None], m, 0.0)) @ R
        assert np.allclose(k_hat, c.decode_keys(slots[b:b + 1])[0], atol=1e-4 * np.abs(k_hat).max())


@pytest.mark.parametrize("d", [64, 256])
def test_block_centering_removes_a_drifting_shared_direction(d):
    rng = np.random.default_rng(7)
    k = drifting_keys(rng, 16, d, outlier=False)
    sqnr = {}
    for bm in (False, True):
        c = C.E8LayerCodec(d, 0, block_mean=bm)
        err = c.decode_keys(c.encode_keys(k)) - k
        sqnr[bm] = 10 * np.log10((k.astype(np.float64) ** 2).sum() / (err.astype(np.float64) ** 2).sum())
    assert sqnr[False] == pytest.approx(10.4, abs=0.5)  # the paper's operating point
    assert sqnr[True] > sqnr[False] + 10  # the mean is exact (fp16); only the residual is coded


@pytest.mark.parametrize("d", [64, 128, 256])
def test_block_centered_scores_match_a_float64_reference_on_both_paths(d):
    rng = np.random.default_rng(d + 1)
    c = C.E8LayerCodec(d, 2, block_mean=True)
    k = drifting_keys(rng, 4, d)
    slots = c.encode_keys(k)
    k_hat = c.decode_keys(slots).reshape(-1, d).astype(np.float64)
    q = rng.standard_normal((3, d)).astype(np.float32)
    qr = C.e8_rotate(c.rotation, q)
    ref = q.astype(np.float64) @ k_hat.T
    tol = 1e-5 * np.abs(ref).max()
    assert np.abs(c.score(slots, qr) - ref).max() <= tol
    for h in range(3):
        tables = c.build_tables(qr[h])
        assert np.abs(c.score_table(slots, tables, qr[h]) - ref[h]).max() <= tol
        # The tables alone hold only the lattice part: the block's <q~, m~> is the rest.
        assert not np.allclose(c.score_table(slots, tables), ref[h], atol=tol)
    assert np.abs(c.block_mean_dot(slots, qr[0])).min() > 0
    assert (C.E8LayerCodec(d, 2).block_mean_dot(C.E8LayerCodec(d, 2).encode_keys(k), qr[0]) == 0).all()


def test_block_centering_bad_slots_are_clear_errors():
    c = C.E8LayerCodec(128, 0, block_mean=True)
    plain = C.E8LayerCodec(128, 0).encode_keys(np.ones((1, 16, 128), np.float32))
    with pytest.raises(ValueError, match="decode_keys: slots must have shape"):
        c.decode_keys(plain)  # a plain slot is 2T bytes short of a centered one
    with pytest.raises(ValueError, match="block_mean_dot: q_rot"):
        c.block_mean_dot(c.encode_keys(np.ones((1, 16, 128), np.float32)), np.ones(64, np.float32))


def bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def cache_reference(k, v, q, scale, out, k_slots, v_slots, window):
    """float64 attention over what the one-layer cache holds: blocks older than the window decoded
    from their slots (keys scaled back by the calibration's per-channel scale), the rest exact."""
    n, H, d = k.shape
    T, nh = min(d, 128), d // min(d, 128)
    ready = (n - window) // 16
    c = C.E8LayerCodec(d, 0, block_mean=True)
    kb, vb = bf16(k), bf16(v)  # the raw window holds BF16
    k_ref, v_ref = kb.astype(np.float64), vb.astype(np.float64)
    for h in range(H):
        kh = kb[:, h].astype(np.float64)
        blocks = kh[:n // 16 * 16].reshape(-1, 16, d)
        resid = kh[:n // 16 * 16] - np.repeat(blocks.mean(1), 16, 0)
        tail = kh[n // 16 * 16:]
        resid = np.concatenate([resid, tail - tail.mean(0)]) if len(tail) else resid
        s = (np.sqrt((resid ** 2).mean(0)) + 1e-6) ** 0.75
        ks = k_slots[h * nh * ready:(h + 1) * nh * ready].reshape(nh, ready, -1).transpose(1, 0, 2)
        vs = v_slots[h * nh * ready:(h + 1) * nh * ready].reshape(nh, ready, -1).transpose(1, 0, 2)
        k_ref[:ready * 16, h] = c.decode_keys(np.ascontiguousarray(ks)).reshape(-1, d) * s
        v_ref[:ready * 16, h] = C.e8_decode_values(np.ascontiguousarray(vs), d).reshape(-1, d)
    G = q.shape[1] // H
    n_q = q.shape[0]
    ref = np.zeros(q.shape)
    for i in range(n_q):
        p = n - n_q + i
        for hq in range(q.shape[1]):
            sc = k_ref[:p + 1, hq // G] @ q[i, hq].astype(np.float64) * scale
            w = np.exp(sc - sc.max())
            ref[i, hq] = w @ v_ref[:p + 1, hq // G] / w.sum()
    return ref


@pytest.mark.parametrize("d", [64, 256])
def test_block_centered_attention_matches_a_float64_reference(cpu, d):
    rng = np.random.default_rng(d + 2)
    n, H = 200, 2
    k = np.stack([drifting_keys(rng, (n + 15) // 16, d).reshape(-1, d)[:n] for _ in range(H)], 1) * 0.3
    v = rng.standard_normal((n, H, d)).astype(np.float32)
    q = rng.standard_normal((8, 2 * H, d)).astype(np.float32)
    out, ks, vs, fits = C.op_lossy_attention(cpu, k, v, q, 0.1, "e8", window=64, center="block")
    assert fits.all() and ks.shape[1] == 6 * min(d, 128) + 64
    ref = cache_reference(k, v, q, 0.1, out, ks, vs, 64)
    assert np.abs(out - ref).max() <= 2e-4 * np.abs(ref).max()


@pytest.fixture(scope="module")
def smollm(smollm2_path):
    return gaacrt.Model(smollm2_path, backend="cpu", n_threads=2)


def text(m, n):
    return m.tokenize(open("/usr/share/common-licenses/GPL-3").read(), add_special=False)[:n]


def test_block_centering_in_the_serving_state_costs_its_bytes_and_stays_close(smollm):
    toks = text(smollm, 308)
    runs = {}
    for scoring in ("decode", "table"):  # the paper's tables (decode steps only) against decode-in-dot
        c = _core.Context(smollm._m, n_ctx=400, cache="e8", n_ubatch=16, e8_center="block", e8_scoring=scoring)
        s = _core.Session(c)
        chunks = np.vstack([s.eval(toks[i:i + 16], all_logits=True) for i in range(0, 304, 16)])
        runs[scoring] = (c, s, chunks, np.vstack([s.eval([t], all_logits=True) for t in toks[304:]]))
    c, s, rows, steps = runs["decode"]
    assert np.abs(runs["table"][3] - steps).max() <= 2e-3 * np.abs(steps).max()
    ref = smollm.session(n_ctx=400, n_ubatch=16)
    base = np.vstack([ref.eval(toks[i:i + 16], all_logits=True) for i in range(0, 304, 16)])
    assert np.isfinite(rows).all() and (base[160:].argmax(1) == rows[160:].argmax(1)).mean() > 0.7
    st = c.kv_stats()
    assert st["k"]["tiles_encoded"] == (308 - 128) // 16 * 30 * 3
    # d = 64: 448-byte key slots (6T + 64) and 384-byte value slots: 28 + 24 = 52 B per token-head
    # (the paper's 44 + 8 of block means), against 256 B for a raw token-head.
    assert st["k"]["ratio_vs_bf16"] == pytest.approx(16 * 64 * 2 / 448)
    compressed = (308 - 128) // 16 * 16
    raw = -(-(308 - compressed) // 16) * 16  # whole 16-token pages
    expect = 30 * 3 * (compressed * 52 + raw * 256)
    assert st["resident_bytes"] - 4 * (st["tiles_raw"] + st["tiles_slot"]) == expect  # + the block-table entries


def test_block_centering_truncate_recomputes_like_a_fresh_run(smollm):
    toks = text(smollm, 300)
    s = smollm.session(n_ctx=400, cache="e8", n_ubatch=16, e8_center="block")
    s.eval(toks)
    s.truncate(200)  # into compressed history
    a = s.eval(toks[200:216], all_logits=True)
    f = smollm.session(n_ctx=400, cache="e8", n_ubatch=16, e8_center="block")
    f.eval(toks[:200])
    b = f.eval(toks[200:216], all_logits=True)
    assert np.isfinite(a).all() and (a.argmax(1) == b.argmax(1)).mean() > 0.9


def test_e8_center_modes_are_checked(smollm):
    with pytest.raises(gaacrt.GaacrtError, match="e8_center 'blocks'"):
        _core.Context(smollm._m, n_ctx=64, cache="e8", e8_center="blocks")
    with pytest.raises(TypeError, match="e8_center"):
        _core.Context(smollm._m, n_ctx=64, cache="e8", e8_center=2)
    # Other formats ignore the option (as they ignore e8_center=True).
    s = smollm.session(n_ctx=256, cache="kivi2", n_ubatch=16, e8_center="block")
    s.eval(text(smollm, 160))
    assert s.kv_stats()["k"]["tiles_encoded"] > 0
