"""Quality and CPU cost of the lossy KV formats (E8 k2v2, kivi2, q8) against BF16.

    python bench/e8_quality.py [--models smollm2-135m gemma3-270m] [--ctx 512 2048] [--threads 2]

1. Perplexity on real English text (GPL-3), llama-perplexity style (windows scored on their second
   half), the cache in its serving state (16-token chunks: later chunks read compressed blocks),
   with mean KL and top-1 agreement against the BF16 cache in the same run.
2. Per layer: mean key cosine and attention-distribution KL against exact keys, from the float64
   reference forward's post-RoPE q/k (tests/reference_model.py) over 512 tokens, every key encoded
   (no raw window: the worst case a key meets once it ages out of the window).
3. Greedy continuations: tokens identical to the BF16 cache's, 48-token greedy runs from 3 prompts.
4. CPU decode cost over an 8K-token cache: the attention op per layer for each format, and E8
   scoring per kv-head and step through (B) decode-in-dot vs (A) the paper's per-query tables.
Writes bench/results/e8_quality.md.
"""
from __future__ import annotations

import argparse
import math
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402

import gaacrt  # noqa: E402
from gaacrt import _core  # noqa: E402
from gaacrt.perplexity import _log_softmax  # noqa: E402

FORMATS = ("bf16", "e8", "kivi2", "q8")
# Options after "+" (not the paper's method): "center" (e8_center: keys coded as (k - mean) / scale
# per channel, fitted on the first prefill), "block" (e8_center="block": each 16-token block's own
# mean stored and subtracted) and "sinkN" (raw_sink=N: the first N tokens stay BF16).
OPTION_FORMATS = ("bf16", "e8", "kivi2", "e8+center", "e8+block", "e8+sink16", "kivi2+sink16", "e8+center+sink16",
                  "e8+block+sink16")
TEXT = "/usr/share/common-licenses/GPL-3"
RESULTS = ROOT / "bench" / "results" / "e8_quality.md"
RESULTS_OPTIONS = ROOT / "bench" / "results" / "e8_quality_options.md"


def context_args(fmt):
    """'e8+center+sink16' -> Context keyword arguments."""
    base, *opts = fmt.split("+")
    kw = {"cache": base}
    for o in opts:
        if o == "center":
            kw["e8_center"] = True
        elif o == "block":
            kw["e8_center"] = "block"
        elif o.startswith("sink"):
            kw["raw_sink"] = int(o[4:])
        else:
            raise SystemExit(f"unknown format option '{o}' in '{fmt}'")
    return kw


def window_logprobs(model, window, fmt, ctx, ubatch=16):
    c = _core.Context(model._m, n_ctx=ctx, n_ubatch=ubatch, **context_args(fmt))
    s = gaacrt.Session(model, _core.Session(c))
    first = ctx // 2
    rows = []
    for c in range(0, ctx, ubatch):
        out = s.eval(window[c:c + ubatch], all_logits=True)
        if c + ubatch > first - 1:
            rows.append(out[max(0, first - 1 - c):])
    return _log_softmax(np.vstack(rows)[:ctx - first]), np.asarray(window[first:ctx])


def perplexity_rows(model, name, ctx, n_windows, formats=FORMATS):
    toks = model.tokenize(open(TEXT).read(), add_special=False)
    bos = model.tokenizer.bos_id if model.tokenizer.add_bos else None
    step = ctx - (bos is not None)
    acc = {f: [0.0, 0, 0.0, 0] for f in formats}  # nll sum, count, kl sum, top1
    for w in range(min(n_windows, len(toks) // step)):
        window = ([bos] if bos is not None else []) + toks[w * step:(w + 1) * step]
        ref, tgt = window_logprobs(model, window, "bf16", ctx)
        for f in formats:
            lp = ref if f == "bf16" else window_logprobs(model, window, f, ctx)[0]
            a = acc[f]
            a[0] += float(-lp[np.arange(len(tgt)), tgt].sum())
            a[1] += len(tgt)
            a[2] += float((np.exp(ref) * (ref - lp)).sum())
            a[3] += int((ref.argmax(1) == lp.argmax(1)).sum())
    rows = []
    base = math.exp(acc["bf16"][0] / acc["bf16"][1])
    for f in formats:
        a = acc[f]
        ppl = math.exp(a[0] / a[1])
        rows.append(f"| {name} | {ctx} | {f} | {ppl:.4f} | {ppl - base:+.4f} | {a[2] / a[1]:.5f} | {100 * a[3] / a[1]:.2f}% |")
    return rows


def tiles(x, T):
    """(n_tok, d) -> (n_blocks, n_half, 16, T) complete blocks."""
    n = x.shape[0] // 16 * 16
    d = x.shape[1]
    return x[:n].reshape(n // 16, 16, d // T, T).transpose(0, 2, 1, 3)


def reconstruct_keys(fmt, k, layer):
    """k (n_tok, d) float64 -> the format's reconstruction of its complete blocks (n, d)."""
    n, d = k.shape[0] // 16 * 16, k.shape[1]
    T = min(d, 128)
    kf = k[:n].astype(np.float32)
    if fmt == "e8":
        c = _core.E8LayerCodec(d, layer)
        return c.decode_keys(c.encode_keys(kf.reshape(-1, 16, d))).reshape(n, d)
    tl = np.ascontiguousarray(tiles(kf, T)).reshape(-1, 16, T)
    enc, dec = {"kivi2": (_core.kivi2_k_encode_tiles, _core.kivi2_k_decode_tiles),
                "q8": (_core.q8_encode_tiles, _core.q8_decode_tiles)}[fmt]
    out = dec(enc(tl), T).reshape(n // 16, d // T, 16, T).transpose(0, 2, 1, 3)
    return out.reshape(n, d)


def layer_rows(path, name, n_tok=512):
    from reference_model import ReferenceModel
    ref = ReferenceModel(path)
    toks = gaacrt.Tokenizer(path).tokenize(open(TEXT).read(), add_special=True)[:n_tok]
    rec = {}
    ref.forward(toks, record=rec)
    scale = 1.0 / math.sqrt(ref.dk)
    G = ref.n_head // ref.n_head_kv
    T = len(toks) // 16 * 16
    causal = np.tril(np.ones((T, T), bool))
    stats = {f: ([], []) for f in FORMATS[1:4]}
    for il in range(ref.n_layer):
        q, k, _ = rec[il]
        for f in FORMATS[1:4]:
            cos, kl = [], []
            for h in range(ref.n_head_kv):
                kh = k[:T, h, :]
                kr = reconstruct_keys(f, kh, il).astype(np.float64)
                cos.append(float(np.mean((kh * kr).sum(1) / (np.linalg.norm(kh, axis=1) * np.linalg.norm(kr, axis=1) + 1e-30))))
                for g in range(G):
                    qh = q[:T, h * G + g, :]
                    s0 = np.where(causal, qh @ kh.T * scale, -np.inf)
                    s1 = np.where(causal, qh @ kr.T * scale, -np.inf)
                    p0, p1 = _log_softmax(s0), _log_softmax(s1)
                    kl.append(float(np.nansum(np.exp(p0) * (p0 - p1), axis=1).mean()))
            stats[f][0].append(np.mean(cos))
            stats[f][1].append(np.mean(kl))
    rows = []
    for f in FORMATS[1:4]:
        c, k = stats[f]
        per = " ".join(f"{x:.3f}" for x in c)
        rows.append(f"| {name} | {f} | {np.mean(c):.4f} | {min(c):.4f} (layer {int(np.argmin(c))}) | {np.mean(k):.5f} | "
                    f"{max(k):.5f} (layer {int(np.argmax(k))}) |")
        rows.append(f"|  |  | per layer cos: {per} | | | |")
    return rows


def greedy_rows(model, name):
    # Prompts of 320 real tokens, so the continuation attends to history older than the window.
    text = model.tokenize(open(TEXT).read(), add_special=False)
    prompts = [text[o:o + 320] for o in (0, 2000, 4000)]
    rows = []
    base = {}
    for i, p in enumerate(prompts):
        base[i] = model.generate(p, max_tokens=48, temperature=0, session=model.session(n_ctx=400, n_ubatch=16)).tokens
    for f in FORMATS[1:4]:
        same = []
        for i, p in enumerate(prompts):
            s = model.session(n_ctx=400, cache=f, n_ubatch=16)
            toks = model.generate(p, max_tokens=48, temperature=0, session=s).tokens
            k = 0
            while k < min(len(toks), len(base[i])) and toks[k] == base[i][k]:
                k += 1
            same.append(k)
        rows.append(f"| {name} | {f} | {' / '.join(str(x) for x in same)} of 48 |")
    return rows


def timing_rows(model, name, ctx=8192, reps=5):
    toks = model.tokenize(open(TEXT).read())[:1024]
    rows, t_bf16 = [], None
    for f in FORMATS[:4] + ("e8+block", "e8 (table)"):
        c = _core.Context(model._m, n_ctx=ctx + 64, **context_args(f.split()[0]),
                          e8_scoring="table" if "table" in f else "decode")
        s = _core.Session(c)
        s.eval(toks)
        c._extend_for_bench(s, ctx)
        t = statistics.median(c._time_attention(s, il, 3) for il in (1, 7, 13) for _ in range(reps))
        t_bf16 = t_bf16 or t
        rows.append(f"| {name} | {f} | {ctx} | {t * 1e3:.2f} | {t_bf16 / t:.2f} | {c.kv_stats()['resident_ratio']:.2f} |")
    return rows


def scoring_rows(d, n_keys=8192, G=4, reps=3):
    rng = np.random.default_rng(0)
    c = _core.E8LayerCodec(d, 0)
    slots = c.encode_keys(rng.standard_normal((n_keys // 16, 16, d)).astype(np.float32))
    q = rng.standard_normal((G, d)).astype(np.float32)
    qr = _core.e8_rotate(c.rotation, q)

    def best(fn):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    tb = best(lambda: c.score(slots, qr))
    ta = best(lambda: [c.score_table(slots, c.build_tables(qr[g])) for g in range(G)])
    kb = rng.standard_normal((n_keys, d)).astype(np.float32)
    tf = best(lambda: q @ kb.T)
    return [f"| {d} | {n_keys} | {G} | {tf * 1e3:.2f} | {tb * 1e3:.2f} | {ta * 1e3:.2f} | {ta / tb:.1f}x |"]


OPTIONS_HEAD = ("| model | ctx | cache | perplexity | vs bf16 | mean KL | top-1 agreement |", "|---|---:|---|---:|---:|---:|---:|")


def options_table(args) -> int:
    """Measures args.formats and merges the rows into e8_quality_options.md: a row of the same model,
    context and cache is replaced, the others are kept (each run's command and load are noted)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    measured = {}
    for n in args.models:
        m = gaacrt.Model(gaacrt.models.get(n), backend="cpu", n_threads=args.threads)
        for ctx in args.ctx:
            new = perplexity_rows(m, n, ctx, args.windows if ctx <= 512 else 1, args.formats)
            measured.update({(n, ctx, f): line for f, line in zip(args.formats, new)})
            print("\n".join(new), flush=True)
    rows, notes = {}, []
    if RESULTS_OPTIONS.exists():  # read last, so that runs in parallel keep each other's rows
        for line in RESULTS_OPTIONS.read_text().splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if line.startswith("| ") and line not in OPTIONS_HEAD and len(cells) == 7:
                rows[(cells[0], int(cells[1]), cells[2])] = line
            elif line.startswith("Run: "):
                notes.append(line)
    rows.update(measured)
    cmd = " ".join(["python bench/e8_quality.py"] + sys.argv[1:])
    notes.append(f"Run: `{cmd}` (load average {load:.2f}, {args.threads} threads).")
    order = {f: i for i, f in enumerate(OPTION_FORMATS)}
    keys = sorted(rows, key=lambda k: (k[0] != "smollm2-135m", k[0], k[1], order.get(k[2], len(order)), k[2]))
    text = "\n".join([
        "E8 options beside the paper's method: center = keys coded as (k - mean) / sqrt(std) per channel "
        "(e8_center=True); block = each 16-token block's own fp16 mean (rotated basis) stored and subtracted from "
        "the keys it brings closer to zero, channels scaled by their within-block std^0.75, alpha x 0.8 "
        "(e8_center=\"block\"); sink16 = the first 16 tokens kept BF16 (raw_sink=16). Perplexity on GPL-3, "
        "serving-state cache, as in e8_quality.md.", "",
        "Bytes per token-head at d = 128 (64 / 256), compressed steady state: e8 84 (44 / 168), e8+block 100 "
        "(52 / 200), kivi2 112 (56 / 224).", "", *OPTIONS_HEAD, *(rows[k] for k in keys), "", *notes]) + "\n"
    RESULTS_OPTIONS.write_text(text)
    print(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--ctx", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--windows", type=int, default=2, help="windows per perplexity figure")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--options", action="store_true",
                    help="perplexity only, for the options beside the paper's formats " + " ".join(OPTION_FORMATS)
                    + f"; writes {RESULTS_OPTIONS.name}")
    ap.add_argument("--formats", nargs="+", default=list(OPTION_FORMATS),
                    help="with --options: the formats to compare (bf16 first: the baseline)")
    args = ap.parse_args()
    if args.options:
        return options_table(args)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    out = [f"Lossy KV formats vs BF16 (load average {load:.2f}, {args.threads} threads).", "",
           "Perplexity on GPL-3, serving-state cache (16-token chunks), KL and top-1 against the BF16 cache:", "",
           "| model | ctx | cache | perplexity | vs bf16 | mean KL | top-1 agreement |", "|---|---:|---|---:|---:|---:|---:|"]
    models = {n: gaacrt.Model(gaacrt.models.get(n), backend="cpu", n_threads=args.threads) for n in args.models}
    for n, m in models.items():
        for ctx in args.ctx:
            out += perplexity_rows(m, n, ctx, args.windows if ctx <= 512 else 1)
            print("\n".join(out[-4:]), flush=True)
    out += ["", "Keys against exact post-RoPE keys (float64 reference forward, 512 tokens, every key encoded):", "",
            "| model | cache | mean key cosine | worst layer | mean attention KL | worst layer |", "|---|---|---:|---:|---:|---:|"]
    for n, m in models.items():
        out += layer_rows(m.path, n)
        print("\n".join(out[-6:]), flush=True)
    out += ["", "Greedy continuations identical to the BF16 cache's (3 prompts of 320 text tokens, 48 generated):", "",
            "| model | cache | identical tokens |",
            "|---|---|---|"]
    for n, m in models.items():
        out += greedy_rows(m, n)
    out += ["", "CPU attention op per layer over an 8K-token cache (real KV repeated), one decode query:", "",
            "| model | cache | ctx | ms / layer | speed vs bf16 | resident ratio |", "|---|---|---:|---:|---:|---:|"]
    for n, m in models.items():
        if m.config["sliding_window"]:
            continue  # the repeat hook needs a model without sliding-window layers
        out += timing_rows(m, n)
    out += ["", "E8 scoring per kv-head and decode step, one thread: (B) decode-in-dot vs (A) per-query tables:", "",
            "| d | keys | query heads | fp32 dense q·K ms | (B) ms | (A) build+gather ms | (A)/(B) |",
            "|---:|---:|---:|---:|---:|---:|---:|"]
    for d in (64, 128):
        out += scoring_rows(d)
    text = "\n".join(out)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
