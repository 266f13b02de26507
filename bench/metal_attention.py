"""bench/metal_attention.py — decode attention on an Apple GPU: the GAAC cache against the BF16 cache
in the same Metal kernel (the comparison of the GAAC paper's M4 measurement: 1.02-1.25x, growing with
context and batch), contexts 4K-64K, 1/4/8 sequences.

    python3 bench/metal_attention.py                      # on a Mac with Apple silicon (backend "metal")
    python3 bench/metal_attention.py --ctx 4096,16384,65536 --batch 1,4,8 --model path/to/model.gguf
    python3 bench/metal_attention.py --backend metal-emulated --ctx 1024 --batch 1,2 --reps 2   # smoke test anywhere

The cache comes from a real forward pass: a one-layer seeded synthetic model of a Llama-3-8B
attention layer (32 query heads / 8 kv-heads, d = 128; tests/fixtures/tiny_models.py), or the
model given with --model, prefills --prefill tokens (GAAC calibrates online on them), then each
sequence's cache is grown to the context by repeating its complete blocks (raw pages and slots
alike: Context._extend_for_bench). Random weights do not give real models' exponent statistics:
with --model the KV (and so the GAAC mode shares and ratio, printed per row) is a real model's.
Batch 1 times the attention op alone (Context._time_attention: median of synchronous calls). Batches
4 and 8 time one batched decode step (Model.decode_batch) of the same sequences; with the one-layer
model and long contexts that step is dominated by attention, and the "step, ctx 64" column gives the
non-attention remainder to subtract. Writes the table to bench/results/metal_attention.md as well.
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gaacrt  # noqa: E402
from gaacrt import _core  # noqa: E402

N_HEAD, N_KV, D = 32, 8, 128


def synthetic_model() -> str:
    from fixtures.tiny_models import write_tiny_model
    path = Path(tempfile.mkdtemp()) / "attn.gguf"
    write_tiny_model(path, "llama", seed=1, weight_type="q8_0", n_layers=1, n_embd=1024, n_head=N_HEAD,
                     n_head_kv=N_KV, head_dim=D, n_ff=512)
    return str(path)


def sessions(m, cache: str, n: int, ctx: int, toks: list[int]):
    """n sequences of one context, each prefilled with toks and grown to ctx tokens."""
    c = _core.Context(m._m, n_ctx=ctx + 64, n_seq_max=n, cache=cache)
    ss = [_core.Session(c) for _ in range(n)]
    for s in ss:
        s.eval(toks)
        c._extend_for_bench(s, ctx)
    return c, ss


def step_seconds(ss, reps: int) -> float:
    times = []
    for r in range(reps + 1):
        t0 = time.perf_counter()
        _core.decode_batch(ss, [100 + r] * len(ss))
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="metal")
    ap.add_argument("--model", default="", help="a GGUF whose real KV to use (default: synthetic Llama-3-8B layer)")
    ap.add_argument("--ctx", default="4096,8192,16384,32768,65536")
    ap.add_argument("--batch", default="1,4,8")
    ap.add_argument("--prefill", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "metal_attention.md"))
    args = ap.parse_args()
    ctxs = [int(x) for x in args.ctx.split(",")]
    batches = [int(x) for x in args.batch.split(",")]
    path = args.model or synthetic_model()
    m = gaacrt.Model(path, backend=args.backend)
    toks = [int(t) for t in np.random.default_rng(0).integers(3, m.n_vocab, min(args.prefill, min(ctxs)))]
    lines = [f"device: {m.description} on {args.backend} ({platform.platform()}); model: "
             f"{Path(args.model).name if args.model else f'synthetic 1 layer, {N_HEAD}/{N_KV} heads, d = {D}'}",
             "", "| ctx | batch | BF16 ms | GAAC ms | GAAC/BF16 speed | step at ctx 64, ms | GAAC resident ratio | "
             "K shares 3b/4b/raw, raw tiles |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for ctx in ctxs:
        for n in batches:
            res = {}
            for cache in ("bf16", "gaac"):
                c, ss = sessions(m, cache, n, ctx, toks)
                if n == 1:
                    t = float(np.median([c._time_attention(ss[0], 0, args.reps) for _ in range(3)]))
                else:
                    t = step_seconds(ss, args.reps)
                res[cache] = (t, c.kv_stats())
                del ss, c
            base = ""
            if n > 1:
                c, ss = sessions(m, "bf16", n, 64, toks[:64])
                base = f"{step_seconds(ss, args.reps) * 1e3:.3f}"
                del ss, c
            (bt, _), (gt, gs) = res["bf16"], res["gaac"]
            k = gs["k"]
            row = (f"| {ctx} | {n} | {bt * 1e3:.3f} | {gt * 1e3:.3f} | {bt / gt:.3f} | {base} | "
                   f"{gs.get('resident_ratio', 0):.3f} | {100 * k['share_3bit']:.1f}/{100 * k['share_4bit']:.1f}/"
                   f"{100 * k['share_raw_groups']:.2f}%, {100 * k['raw_tile_share']:.1f}% |")
            print(row, flush=True)
            lines.append(row)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("# bench/metal_attention.py\n\n" + "\n".join(lines) + "\n")
    print(f"(written to {args.out})")


if __name__ == "__main__":
    main()
