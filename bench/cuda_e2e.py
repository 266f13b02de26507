"""bench/cuda_e2e.py — end-to-end speed on the GPU for the Llama-3.1-8B shape in Q4_0 (issue 7):
tg128 at depths 0 / 32K / 64K and pp512 for the BF16, GAAC and E8 caches, and the equal-memory
experiment (how many 64K sequences each format fits in a fixed KV budget, and their aggregate
batched decode speed). The model is bench/gen_8b.py's random-weight GGUF; llama-bench runs the
same file (bench/llama_bench_gpu.sh, bench/gpu_e2e_visit.sh).

    python3 bench/cuda_e2e.py MODEL [--caches bf16,gaac,e8] [--depths 0,32768,65536] [--n-gen 128]
                              [--pp 512] [--pp-depths 0,32768] [--prefill 512] [--kv-budget-gib 20]
                              [--budget-depth 65536]
                              [--json OUT.json] [--backend cuda]
    python3 bench/cuda_e2e.py --report OURS.json [--llama-json LLAMA.json]   # the comparison table

How the depth is reached — NOT by a real prefill: a real prompt of --prefill tokens (random ids)
is evaluated (GAAC calibrates online on it; E8 compresses all but its raw window), then the cache
is grown to the depth by repeating its complete blocks, byte copies of every layer's tiles
(Context._extend_for_bench, src/kv/kv_cache.cpp). The cache then holds exactly as many bytes per
format as a real run of that length, in the same layout (the depths are multiples of --prefill, so
even E8's raw window sits where a real run has it); only the values repeat. Decode then runs the
normal path: one Session.eval per token (batched: one decode_batch per step), the step replayed
as a CUDA graph after two warm-up tokens (the graph counters are printed), host-synchronous per
token as llama-bench's tg test is. tok/s = n_gen / wall time of the n_gen tokens after WARM
warm-up tokens. At depth 0 the cache format was calibrated by an earlier prompt in the same
context (a throwaway session), so no calibration falls inside the timing.

pp512: one 512-token eval on an empty sequence (one ubatch), median of 3 after a warm-up, on a
format already calibrated; GAAC/E8 block encoding is included, as in any real prefill. With
--pp-depths, also after a cache filled to each depth as for tg (llama-bench's -p 512 -d N): there
the prefill's attention over the depth's history dominates.

GAAC's compression ratio, and so its speed, depends on the KV's exponent statistics; this KV comes
from random weights, not a real model (GAAC attention on KV recorded from SmolLM2 and Gemma-3 is
bench/cuda_attention.py --kv). The codec ratio and raw-tile share are printed beside each timing.

Equal memory: per format, the bytes one sequence holds at --budget-depth (+ the generated tokens)
come from kv_stats of the single-sequence run at that depth; "fits (bytes)" = floor(budget / that).
Then a context whose arena is exactly the budget is filled with sequences (each prefilled and
extended as above) until the arena refuses one (at most fits + 1, so the count is measured, not
predicted), and they decode n_gen tokens together in batched steps (decode_batch, one forward per
step); if a step finds no room for the new tokens, the last sequence is dropped and the timing
starts again. Aggregate tok/s = sequences x n_gen / wall time.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

WARM = 8            # warm-up decode steps before timing (the first is eager, the second records the graph)
GIB = 1 << 30
# llama.cpp on the H200 (issue 7), f16 KV, -fa 1: tg128 tok/s by depth. Replaced by --llama-json.
LLAMA_ISSUE_TG = {0: 345.0, 32768: 212.0, 65536: 150.0}
TARGETS = {("bf16", 0): 1.3, ("gaac", 65536): 1.6, ("e8", 65536): 2.2}  # x llama.cpp tg128 (issue 7)


def _core():
    from gaacrt import _core as c
    return c


def tokens(rng, n_vocab: int, n: int) -> list[int]:
    return [int(t) for t in rng.integers(3, min(n_vocab, 128000), n)]


RAW_WINDOW = -1  # --raw-window: compressing caches' newest tokens kept raw (-1: the format's own)


def make_context(m, cache: str, n_ctx: int, n_seq_max: int = 1, budget: int = 0):
    kw = {"raw_window": RAW_WINDOW} if cache != "bf16" else {}
    return _core().Context(m._m, n_ctx=n_ctx, n_seq_max=n_seq_max, cache=cache, budget_bytes=budget, **kw)


def fill(c, prompt: list[int], depth: int):
    """A session of c holding `depth` tokens: the prompt (or its first `depth` tokens) evaluated,
    then the cache grown by repeating blocks."""
    s = _core().Session(c)
    p = prompt[:depth] if depth < len(prompt) else prompt
    if p:
        s.eval(p)
    if depth > len(p):
        c._extend_for_bench(s, depth)
    return s


def calibrate(c, prompt: list[int]) -> None:
    """Lets the format calibrate on a real prompt in a throwaway session of c (depth-0 runs)."""
    s = _core().Session(c)
    s.eval(prompt)
    del s
    gc.collect()


def decode_steps(sessions, n: int, rng, n_vocab: int) -> float:
    """Wall seconds of n decode steps (one token per session per step)."""
    core = _core()
    toks = [tokens(rng, n_vocab, len(sessions)) for _ in range(n)]
    t0 = time.perf_counter()
    if len(sessions) == 1:
        s = sessions[0]
        for t in toks:
            s.eval(t)
    else:
        for t in toks:
            core.decode_batch(sessions, t)
    return time.perf_counter() - t0


def kv_summary(st: dict) -> dict:
    out = {"tokens": st["tokens"], "resident_bytes": st["resident_bytes"], "arena_bytes": st["arena_bytes"],
           "ratio_vs_bf16": st["resident_ratio"], "bytes_per_token": st["bytes_per_token"]}
    for kv in ("k", "v"):
        if kv in st:
            out[f"{kv}_codec_ratio"] = st[kv]["codec_ratio"]
            out[f"{kv}_raw_tile_share"] = st[kv]["raw_tile_share"]
    return out


def codec_note(kv: dict) -> str:
    if "k_codec_ratio" not in kv:
        return ""
    return (f"K ratio {kv['k_codec_ratio']:.3f} (raw tiles {100 * kv['k_raw_tile_share']:.1f}%), "
            f"V ratio {kv['v_codec_ratio']:.3f} (raw tiles {100 * kv['v_raw_tile_share']:.1f}%)")


def run_pp(m, cache: str, n_pp: int, prompt: list[int], rng, depth: int = 0) -> dict:
    """n_pp tokens in one eval after `depth` tokens (llama-bench's -p n_pp -d depth): at depth 0 on
    an empty sequence of a calibrated context; deeper, on a fresh session filled as run_tg's (the
    fill not timed). Median of 3 after a warm-up."""
    c = make_context(m, cache, max(depth + n_pp, len(prompt)) + 16)
    if depth == 0:
        calibrate(c, prompt)
    toks = tokens(rng, m.n_vocab, n_pp)
    times = []
    s = _core().Session(c) if depth == 0 else None
    for i in range(4):
        if depth == 0:
            s.reset()
        else:
            s = None
            gc.collect()  # the previous session's blocks back to the arena
            s = fill(c, prompt, depth)
        t0 = time.perf_counter()
        s.eval(toks)
        if i:
            times.append(time.perf_counter() - t0)
    t = float(np.median(times))
    return {"cache": cache, "n_pp": n_pp, "depth": depth, "tok_s": n_pp / t, "ms": t * 1e3}


def run_tg(m, cache: str, depth: int, n_gen: int, prompt: list[int], rng) -> dict:
    c = make_context(m, cache, max(depth, len(prompt)) + WARM + n_gen + 16)
    t0 = time.perf_counter()
    if depth == 0:
        calibrate(c, prompt)
    s = fill(c, prompt, depth)
    t_fill = time.perf_counter() - t0
    kv = kv_summary(c.kv_stats())
    decode_steps([s], WARM, rng, m.n_vocab)
    dt = decode_steps([s], n_gen, rng, m.n_vocab)
    g = c._graph_stats()
    return {"cache": cache, "depth": depth, "n_gen": n_gen, "tok_s": n_gen / dt, "ms_per_token": dt / n_gen * 1e3,
            "graph_replays": g["replays"], "graph_captures": g["captures"], "fill_s": t_fill, "kv": kv}


def run_equal_memory(m, cache: str, budget: int, depth: int, n_gen: int, prompt: list[int], rng,
                     bytes_per_token: float, max_seqs: int) -> dict:
    """Sequences of `depth` tokens in an arena of `budget` bytes, decoded together. One more than the
    byte count predicts is tried, so the count decoded is what the arena really holds (with room
    for the generated tokens: a step the arena refuses drops the last sequence and starts again)."""
    per_seq = bytes_per_token * (depth + WARM + n_gen)
    fits = int(budget // per_seq) if per_seq > 0 else 0
    want = min(fits + 1, max_seqs)
    res = {"cache": cache, "budget_bytes": budget, "depth": depth, "bytes_per_seq": per_seq, "fits_by_bytes": fits,
           "fits_in_arena": 0, "n_seqs": 0, "note": ""}
    if fits + 1 > max_seqs:
        res["note"] = f"capped at --max-seqs {max_seqs}."
    core = _core()
    c = make_context(m, cache, depth + WARM + n_gen + 16, n_seq_max=want, budget=budget)
    sessions = []
    t0 = time.perf_counter()
    for _ in range(want):
        try:
            sessions.append(fill(c, prompt, depth))
        except core.GaacrtError as e:
            if e.kind != "arena_full":
                raise
            res["note"] += f" sequence {len(sessions) + 1} refused by the arena at depth {depth}."
            break
    gc.collect()  # a refused sequence's prompt pages go back to the arena
    res["fill_s"] = time.perf_counter() - t0
    res["fits_in_arena"] = len(sessions)
    while sessions:
        try:
            decode_steps(sessions, WARM, rng, m.n_vocab)
            dt = decode_steps(sessions, n_gen, rng, m.n_vocab)
            break
        except core.GaacrtError as e:
            if e.kind != "arena_full":
                raise
            sessions.pop()
            gc.collect()
            res["note"] += f" {len(sessions) + 1} had no room to generate {n_gen} tokens; {len(sessions)} did."
    if not sessions:
        return res
    st = c.kv_stats()
    g = c._graph_stats()
    res.update(n_seqs=len(sessions), step_ms=dt / n_gen * 1e3, agg_tok_s=len(sessions) * n_gen / dt,
               per_seq_tok_s=n_gen / dt, arena_bytes=st["arena_bytes"], resident_bytes=st["resident_bytes"],
               graph_replays=g["replays"], graph_captures=g["captures"])
    res["note"] = res["note"].strip()
    return res


# ---- printing ------------------------------------------------------------------------------------

def print_tg(rows: list[dict], llama_tg: dict, source: str) -> None:
    print(f"\n### tg{rows[0]['n_gen']} (batch 1), tok/s — llama.cpp figures: {source}\n")
    print("| depth | cache | tok/s | ms/token | vs llama.cpp | target | KV GiB | vs BF16 bytes | codec (GAAC/E8) | "
          "graph replays/captures | fill s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ref = llama_tg.get(r["depth"])
        vs = f"{r['tok_s'] / ref:.2f}x of {ref:.0f}" if ref else "n/a"
        tgt = TARGETS.get((r["cache"], r["depth"]))
        kv = r["kv"]
        ratio = f"{kv['ratio_vs_bf16']:.3f}" if kv["tokens"] else "-"
        print(f"| {r['depth']} | {r['cache']} | {r['tok_s']:.1f} | {r['ms_per_token']:.3f} | {vs} | "
              f"{f'>= {tgt}x' if tgt else ''} | {kv['resident_bytes'] / GIB:.2f} | {ratio} | "
              f"{codec_note(kv)} | {r['graph_replays']}/{r['graph_captures']} | {r['fill_s']:.1f} |")


def print_pp(rows: list[dict], llama_pp: dict) -> None:
    print(f"\n### pp{rows[0]['n_pp']}, tok/s\n")
    print("| depth | cache | tok/s | ms | vs llama.cpp (target >= 1.0x at depth 0) |")
    print("|---|---|---|---|---|")
    for r in rows:
        d = r.get("depth", 0)
        ref = llama_pp.get(d)
        vs = f"{r['tok_s'] / ref:.2f}x of {ref:.0f}" if ref else "n/a"
        print(f"| {d} | {r['cache']} | {r['tok_s']:.0f} | {r['ms']:.1f} | {vs} |")


def print_equal_memory(rows: list[dict]) -> None:
    r0 = rows[0]
    print(f"\n### Equal memory: KV budget {r0['budget_bytes'] / GIB:.4g} GiB, sequences at depth {r0['depth']}, "
          "batched decode\n")
    print("| cache | GiB per sequence | fits (bytes) | fit in the arena | decoded together | step ms | "
          "aggregate tok/s | vs BF16 aggregate | note |")
    print("|---|---|---|---|---|---|---|---|---|")
    base = next((r.get("agg_tok_s") for r in rows if r["cache"] == "bf16"), None)
    for r in rows:
        agg = r.get("agg_tok_s")
        print(f"| {r['cache']} | {r['bytes_per_seq'] / GIB:.4g} | {r['fits_by_bytes']} | {r['fits_in_arena']} | {r['n_seqs']} | "
              f"{r.get('step_ms', float('nan')):.2f} | {agg or float('nan'):.1f} | "
              f"{f'{agg / base:.2f}x' if agg and base else 'n/a'} | {r['note']} |")


def llama_from_json(path: str) -> tuple[dict, dict, list[dict]]:
    """llama-bench's JSON output (-o json, or -oe json: stderr, where other lines may surround the
    array): tg tok/s by depth, and pp tok/s by depth."""
    text = Path(path).read_text()
    rows = json.loads(text[text.index("[\n"):text.rindex("]") + 1])
    tg = {r["n_depth"]: r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0}
    pp = {r["n_depth"]: r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0}
    return tg, pp, rows


def print_llama(rows: list[dict]) -> None:
    r0 = rows[0]
    print(f"\n### llama.cpp llama-bench ({r0.get('build_commit', '?')}, {r0.get('backends', '?')}, "
          f"{r0.get('gpu_info', '?')}), -fa {r0.get('flash_attn')}, KV {r0.get('type_k')}/{r0.get('type_v')}\n")
    print("| test | depth | tok/s | stddev |")
    print("|---|---|---|---|")
    for r in rows:
        test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        print(f"| {test} | {r['n_depth']} | {r['avg_ts']:.2f} | {r['stddev_ts']:.2f} |")


def report(ours: dict, llama_json: str | None) -> None:
    if llama_json:
        tg, pp, rows = llama_from_json(llama_json)
        print_llama(rows)
        source = f"measured in this run ({llama_json})"
    else:
        tg, pp, source = LLAMA_ISSUE_TG, {}, "issue 7's H200 figures (f16 KV)"
    if ours.get("tg"):
        print_tg(ours["tg"], tg, source)
    if ours.get("pp"):
        print_pp(ours["pp"], pp)
    if ours.get("equal_memory"):
        print_equal_memory(ours["equal_memory"])


# ---- main ----------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--act-bits", type=int, default=16, help="activation precision of the integer matmuls (16 or 8)")
    ap.add_argument("--caches", default="bf16,gaac,e8")
    ap.add_argument("--depths", default="0,32768,65536")
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--pp", type=int, default=512, help="prefill test length (0: skip)")
    ap.add_argument("--pp-depths", default="0", help="depths of the prefill test (llama-bench -d)")
    # 512 (one ubatch: GAAC calibrates online on the first ubatch whatever the prompt's length):
    # with the reference prefill matmul a 2,048-token fill took ~58 s on the 8B shape, per depth.
    ap.add_argument("--prefill", type=int, default=512, help="real prompt before the cache is grown by repetition")
    ap.add_argument("--kv-budget-gib", type=float, default=20.0, help="equal-memory budget (0: skip)")
    ap.add_argument("--budget-depth", type=int, default=65536)
    ap.add_argument("--max-seqs", type=int, default=16)
    ap.add_argument("--raw-window", type=int, default=-1,
                    help="compressing caches: newest tokens kept raw BF16 (-1: each format's own)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--report", metavar="OURS_JSON", help="only print the tables of an earlier run")
    ap.add_argument("--llama-json", help="llama-bench -o json output to compare against")
    args = ap.parse_args()
    global RAW_WINDOW
    RAW_WINDOW = args.raw_window
    if args.report:
        report(json.loads(Path(args.report).read_text()), args.llama_json)
        return
    if not args.model:
        ap.error("MODEL is required (bench/gen_8b.py writes one)")

    import gaacrt
    caches = [x for x in args.caches.split(",") if x]
    depths = [int(d) for d in args.depths.split(",") if d]
    if args.kv_budget_gib > 0 and args.budget_depth not in depths:
        depths.append(args.budget_depth)  # the equal-memory sizing reads this depth's bytes per token
    t0 = time.perf_counter()
    m = gaacrt.Model(args.model, backend=args.backend, act_bits=args.act_bits)
    dev = gaacrt.cuda_devices()[0]["name"] if args.backend == "cuda" else args.backend
    print(f"# gaacrt end to end: {m.description}\ndevice: {dev}; {args.act_bits}-bit activations; weights {m._m.weight_bytes / 1e9:.2f} GB, "
          f"loaded in {time.perf_counter() - t0:.1f} s; depths reached by a {args.prefill}-token prompt then block "
          "repetition (Context._extend_for_bench), see the docstring", flush=True)
    rng = np.random.default_rng(0)
    prompt = tokens(rng, m.n_vocab, args.prefill)
    out: dict = {"model": args.model, "device": dev, "prefill": args.prefill, "tg": [], "pp": [], "equal_memory": []}

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))

    for cache in caches:
        for pp_depth in ([int(d) for d in args.pp_depths.split(",") if d] if args.pp else []):
            r = run_pp(m, cache, args.pp, prompt, rng, pp_depth)
            gc.collect()
            print(f"pp{args.pp} {cache} depth {pp_depth}: {r['tok_s']:.0f} tok/s ({r['ms']:.1f} ms)", flush=True)
            out["pp"].append(r)
        for depth in depths:
            r = run_tg(m, cache, depth, args.n_gen, prompt, rng)
            gc.collect()
            print(f"tg{args.n_gen} {cache} depth {depth}: {r['tok_s']:.1f} tok/s ({r['ms_per_token']:.3f} ms/token; "
                  f"graph {r['graph_replays']} replays / {r['graph_captures']} captures; KV "
                  f"{r['kv']['resident_bytes'] / GIB:.2f} GiB, {r['kv']['ratio_vs_bf16']:.3f}x fewer bytes than BF16; "
                  f"filled in {r['fill_s']:.1f} s) {codec_note(r['kv'])}", flush=True)
            out["tg"].append(r)
        save()
    if args.kv_budget_gib > 0:
        budget = int(args.kv_budget_gib * GIB)
        for cache in caches:
            at = next(r for r in out["tg"] if r["cache"] == cache and r["depth"] == args.budget_depth)
            r = run_equal_memory(m, cache, budget, args.budget_depth, args.n_gen, prompt, rng,
                                 at["kv"]["resident_bytes"] / at["kv"]["tokens"], args.max_seqs)
            gc.collect()
            print(f"equal memory {cache}: {r['n_seqs']} x depth {args.budget_depth} in {args.kv_budget_gib} GiB "
                  f"(fits by bytes: {r['fits_by_bytes']}): {r.get('agg_tok_s', float('nan')):.1f} tok/s aggregate "
                  f"{r['note']}", flush=True)
            out["equal_memory"].append(r)
            save()
    save()
    report(out, None)


if __name__ == "__main__":
    main()
