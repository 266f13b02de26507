"""bench/cuda_attention.py — decode attention on the GPU: our BF16 and GAAC kernels and torch's
scaled_dot_product_attention, 32 query heads / 8 kv-heads, d = 128, one query, per layer.

    python3 bench/cuda_attention.py [--ctx 8192,32768,65536,131072] [--prefill 2048] [--lossy e8,q8,kivi2]
                                    [--only-lossy]

--lossy adds a table for the fixed-slot lossy caches (attention_lossy.cu): us per layer, TB/s on
the compressed bytes (84 / 272 / 112 B per token-head at d = 128; the 128..143-token BF16 raw
window is counted at 512 B) and speed against our BF16 kernel on the same context, host-timed and
back to back (queued calls, as a decode graph replays them).

The cache of a one-layer seeded synthetic model of that attention shape (tests/fixtures/tiny_models.py)
is filled from one of `--kv` sources, then grown to each context by repeating its complete blocks
(raw pages and compressed slots alike: Context._extend_for_bench):
  * synthetic: the model's own prefill of `--prefill` random tokens (random weights do NOT give real
    models' exponent statistics);
  * smollm2, gemma3: 2,048 tokens of KV recorded from the real models on GPL-3 and regrouped into
    8 heads of 128 (bench/record_kv.py writes bench/kv_rec/; Context._import_kv_for_bench stores it
    as a prefill would, so GAAC calibrates and compresses it on the GPU).
GAAC's 3-bit/4-bit/raw group shares of each source (from the CPU encoder, which writes the same
bytes) are printed above its table. `--batch 1,4`: one decode query in each of 1 or 4 sequences of
the same context, in one attention call.
Our times: Context._time_attention (median of host-timed synchronous launches, launch overhead
included), and "b2b": the mean of `--reps` launches queued back to back with one wait at the end
(launch latency hidden, as torch's figure). torch: CUDA events around 50 back-to-back calls.
Below each table, with two or more contexts of at least 32K: each kernel's times fitted as a fixed
cost plus a per-token cost (fixed_and_stream), so the stream's own rate shows apart from what a
launch spends outside it (ramp, setup, merges, tail).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gaacrt  # noqa: E402
from gaacrt import _core  # noqa: E402
from fixtures.tiny_models import write_tiny_model  # noqa: E402

N_HEAD, N_KV, D = 32, 8, 128


def torch_sdpa_us(ctx: int, batch: int) -> float:
    import torch
    q = torch.randn(batch, N_HEAD, 1, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, N_KV, ctx, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(batch, N_KV, ctx, D, device="cuda", dtype=torch.bfloat16)
    f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # noqa: E731
    for _ in range(5):
        f()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(50):
        f()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / 50


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx", default="8192,32768,65536,131072")
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--lossy", default="e8,q8,kivi2", help="lossy caches to time ('' for none)")
    ap.add_argument("--only-lossy", action="store_true", help="skip the BF16/GAAC/torch table")
    ap.add_argument("--kv", default="synthetic,smollm2,gemma3",
                    help="KV sources: the random model's own (synthetic) and recorded ones (bench/record_kv.py)")
    ap.add_argument("--batch", default="1,4", help="sequences per attention call")
    ap.add_argument("--backend", default="cuda", help="cpu only to try the script itself (no torch column)")
    args = ap.parse_args()
    ctxs = [int(x) for x in args.ctx.split(",")]
    path = write_tiny_model(Path(tempfile.mkdtemp()) / "attn.gguf", "llama", seed=1, weight_type="q8_0", n_layers=1,
                            n_embd=1024, n_head=N_HEAD, n_head_kv=N_KV, head_dim=D, n_ff=512)
    m = gaacrt.Model(str(path), backend=args.backend)
    toks = [int(t) for t in np.random.default_rng(0).integers(3, m.n_vocab, args.prefill)]
    dev = gaacrt.cuda_devices()[0]["name"] if args.backend == "cuda" else args.backend
    print(f"device: {dev}; layer: {N_HEAD} q-heads / {N_KV} kv-heads, d = {D}, batch 1")
    if not args.only_lossy:
        main_table(m, toks, ctxs, args)
    if args.lossy:
        lossy_table(m, toks, ctxs, args)


def fixed_and_stream(ctxs, times_s, min_ctx=32768):
    """Least squares time = fixed + per_token · ctx over the contexts of at least min_ctx (shorter
    ones take another copy path): (fixed µs, µs per 64K tokens), or None below two contexts."""
    pts = [(c, t) for c, t in zip(ctxs, times_s) if c >= min_ctx]
    if len(pts) < 2 or len({c for c, _ in pts}) < 2:
        return None
    slope, fixed = np.polyfit([float(c) for c, _ in pts], [t * 1e6 for _, t in pts], 1)
    return float(fixed), float(slope * 65536)


def fit_note(name, ctxs, times_s, bytes_per_64k):
    """One kernel's fit as a phrase: fixed µs + µs per 64K tokens (the stream's TB/s on its bytes)."""
    fit = fixed_and_stream(ctxs, times_s)
    if fit is None:
        return None
    fixed, per = fit
    rate = bytes_per_64k / (per * 1e-6) / 1e12 if per > 0 else float("nan")
    return f"{name} {fixed:.1f} us + {per:.1f} us per 64K ({rate:.2f} TB/s)"


def time_cache(m, toks, ctx, cache, reps):
    """Seconds of one layer's attention: host-timed (median of synchronous calls), back to back
    (the mean of queued calls, as a graph replays them), and the cache's stats."""
    c = _core.Context(m._m, n_ctx=ctx + 64, cache=cache)
    s = _core.Session(c)
    s.eval(toks)
    c._extend_for_bench(s, ctx)
    t = float(np.median([c._time_attention(s, 0, reps) for _ in range(3)]))
    tb = float(np.median([c._time_attention(s, 0, 4 * reps, True) for _ in range(3)]))
    return t, tb, c.kv_stats()


LOSSY_BYTES = {"e8": 84, "q8": 272, "kivi2": 112}  # per token-head at d = 128 (kv_codec_bytes.h)


def lossy_table(m, toks, ctxs, args) -> None:
    fmts = [f for f in args.lossy.split(",") if f]
    print("\n| ctx | cache | us per layer | TB/s (compressed bytes) | speed vs our BF16 | BF16 us | "
          "b2b us | b2b vs BF16 b2b | BF16 b2b us | tiles encoded |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    seen = {f: [] for f in ["bf16"] + fmts}  # (ctx, seconds, b2b seconds) per cache, for the fits
    for ctx in ctxs:
        bf_t, bf_b, _ = time_cache(m, toks, ctx, "bf16", args.reps)
        seen["bf16"].append((ctx, bf_t, bf_b))
        for f in fmts:
            t, tb, st = time_cache(m, toks, ctx, f, args.reps)
            seen[f].append((ctx, t, tb))
            window = 128 if f != "q8" else 0
            raw = ctx - max(0, (ctx - window) // 16) * 16
            nbytes = ((ctx - raw) * LOSSY_BYTES[f] + raw * 512) * N_KV
            print(f"| {ctx} | {f} | {t * 1e6:.1f} | {nbytes / t / 1e12:.2f} | {bf_t / t:.2f} | {bf_t * 1e6:.1f} | "
                  f"{tb * 1e6:.1f} | {bf_b / tb:.2f} | {bf_b * 1e6:.1f} | {st['k']['tiles_encoded']} |", flush=True)
    per_tok = {"bf16": 512, **LOSSY_BYTES}  # bytes per token-head (the BF16 window left out)
    for name, col in (("host-timed", 1), ("back to back", 2)):
        notes = [fit_note(f, [r[0] for r in v], [r[col] for r in v], per_tok[f] * 65536 * N_KV)
                 for f, v in seen.items()]
        if all(notes):
            print(f"\nFixed + per-token fit ({name}, contexts >= 32K): " + "; ".join(notes))


KV_REC = Path(__file__).resolve().parent / "kv_rec"  # bench/record_kv.py writes it


def kv_source(name: str, toks):
    """A function filling a session's cache: the random model's own prefill ("synthetic") or
    recorded real KV (bench/record_kv.py) imported as a prefill would store it."""
    if name == "synthetic":
        return lambda c, s: s.eval(toks)
    f = KV_REC / f"{name}.npz"
    if not f.exists():
        return None
    rec = np.load(f)
    k, v = np.ascontiguousarray(rec["k"]), np.ascontiguousarray(rec["v"])
    return lambda c, s: c._import_kv_for_bench(s, k, v)


def filled(m, fill, ctx, cache, n_seq):
    # n_ctx at least 8K: the recorded 2,048 tokens are imported as one prefill chunk, and a GAAC
    # arena sized for barely that many tokens has no free slots left while the chunk's raw pages
    # are still held, so most tiles would stay raw (seen with n_ctx 2,112: 96% raw tiles).
    c = _core.Context(m._m, n_ctx=max(ctx + 64, 8192), n_seq_max=n_seq, cache=cache)
    ss = [_core.Session(c) for _ in range(n_seq)]
    for s in ss:
        fill(c, s)
        c._extend_for_bench(s, ctx)
    return c, ss


def shares(cpu_m, fill) -> str:
    """GAAC's 3-bit / 4-bit / raw group shares and raw-tile share of this KV, K then V, from the CPU
    backend's encoder (the GPU's writes the same bytes; its kv_stats does not count modes)."""
    c, _ = filled(cpu_m, fill, 2048, "gaac", 1)
    st = c.kv_stats()
    return " / ".join(f"{n} {100 * x['share_3bit']:.1f}/{100 * x['share_4bit']:.1f}/{100 * x['share_raw_groups']:.2f}% "
                      f"raw tiles {100 * x['raw_tile_share']:.1f}% ratio {x['codec_ratio']:.3f}"
                      for n, x in (("K", st["k"]), ("V", st["v"])))


def main_table(m, toks, ctxs, args) -> None:
    cpu_m = gaacrt.Model(m.path, backend="cpu")
    batches = [int(b) for b in args.batch.split(",")]
    for src in args.kv.split(","):
        fill = kv_source(src, toks)
        if fill is None:
            print(f"\n(no recorded KV for {src}: run bench/record_kv.py first)")
            continue
        print(f"\nKV: {src}; GAAC modes (K / V: 3-bit/4-bit/raw groups): {shares(cpu_m, fill)}\n")
        print("| ctx | batch | BF16 us | BF16 TB/s | GAAC us | GAAC TB/s (compressed) | GAAC/BF16 | torch SDPA us | "
              "BF16 b2b us | BF16 b2b TB/s | GAAC b2b us | GAAC/BF16 b2b | GAAC/torch b2b |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        seen = {nb: [] for nb in batches}  # (ctx, BF16 s, BF16 b2b s, GAAC s, GAAC b2b s, GAAC ratio)
        for ctx in ctxs:
            for nb in batches:
                res = {}
                for cache in ("bf16", "gaac"):
                    c, ss = filled(m, fill, ctx, cache, nb)
                    t = float(np.median([c._time_attention_batch(ss, 0, args.reps) for _ in range(3)]))
                    tb = float(np.median([c._time_attention_batch(ss, 0, 4 * args.reps, True) for _ in range(3)]))
                    res[cache] = (t, c.kv_stats(), tb)
                    del c, ss
                bf_t, _, bf_b = res["bf16"]
                ga_t, gs, ga_b = res["gaac"]
                kv_bytes = nb * ctx * N_KV * D * 2 * 2
                ratio = gs["resident_ratio"]
                tt = torch_sdpa_us(ctx, nb) if args.backend == "cuda" else float("nan")
                print(f"| {ctx} | {nb} | {bf_t * 1e6:.1f} | {kv_bytes / bf_t / 1e12:.2f} | {ga_t * 1e6:.1f} | "
                      f"{kv_bytes / ratio / ga_t / 1e12:.2f} | {bf_t / ga_t:.2f} | {tt:.1f} | {bf_b * 1e6:.1f} | "
                      f"{kv_bytes / bf_b / 1e12:.2f} | {ga_b * 1e6:.1f} | {bf_b / ga_b:.2f} | {tt / (ga_b * 1e6):.2f} |",
                      flush=True)
                seen[nb].append((ctx, bf_t, bf_b, ga_t, ga_b, ratio))
        for nb, v in seen.items():
            cs = [r[0] for r in v]
            b64 = nb * 65536 * N_KV * D * 2 * 2
            ratio = v[-1][5] if v else 1.0
            notes = [fit_note(name, cs, [r[i] for r in v], b64 / (ratio if "GAAC" in name else 1.0))
                     for name, i in (("BF16 b2b", 2), ("GAAC b2b", 4), ("BF16", 1), ("GAAC", 3))]
            if all(notes):
                print(f"\nBatch {nb}, fixed + per-token fit (contexts >= 32K): " + "; ".join(notes))


if __name__ == "__main__":
    main()
