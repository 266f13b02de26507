#!/usr/bin/env python3
"""bench/tokenize_speed.py — tokenization throughput (MB/s of UTF-8 input) of gaacrt's tokenizer beside
llama.cpp's (llama-cpp-python, same process) and HF `tokenizers` (BPE model only; Gemma's
SentencePiece vocabulary has scores, not merges, so there is no HF model to build from it).

    python bench/tokenize_speed.py [--mb 1.0] [--repeat 5] [--out bench/results/tokenize.md]

Text: the license texts in /usr/share/common-licenses, sorted by name, concatenated and repeated
up to --mb MiB (English prose with section numbers, URLs and indentation). Each tokenizer runs
--repeat times on the whole text in one call; the best run counts. The ids of all tokenizers are
checked equal before timing. One thread: no tokenizer here parallelises a single call.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import gaacrt

LICENSES = Path("/usr/share/common-licenses")


def corpus(mib: float) -> bytes:
    parts = [p.read_bytes() for p in sorted(LICENSES.iterdir()) if p.is_file() and not p.is_symlink()]
    base = b"\n\n".join(parts)
    target = int(mib * (1 << 20))
    text = (base * (target // len(base) + 1))[:target]
    return text.decode("utf-8", errors="ignore").encode()  # cut on a character boundary


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def hf_bpe(path: str):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    md = gaacrt.GGUFFile(path).metadata
    toks = md["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in md["tokenizer.ggml.merges"]]
    hf = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges, fuse_unk=False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return hf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "tokenize.md"))
    args = ap.parse_args()

    text = corpus(args.mb)
    mb = len(text) / 1e6
    rows = []
    for name, tokenizer_kind in (("smollm2-135m", "BPE (smollm)"), ("gemma3-270m", "SentencePiece")):
        path = gaacrt.models.get(name)
        ours = gaacrt.Tokenizer(path)
        ids = ours.tokenize(text, add_special=False)
        impls = {"gaacrt": lambda: ours.tokenize(text, add_special=False)}
        try:
            import llama_cpp
            ll = llama_cpp.Llama(path, vocab_only=True, verbose=False)
            assert ll.tokenize(text, add_bos=False, special=False) == ids, f"{name}: llama.cpp ids differ"
            impls["llama.cpp"] = lambda: ll.tokenize(text, add_bos=False, special=False)
        except ImportError:
            print("llama-cpp-python not installed: no llama.cpp column")
        if tokenizer_kind.startswith("BPE"):
            try:
                hf = hf_bpe(path)
                assert hf.encode(text.decode(), add_special_tokens=False).ids == ids, f"{name}: HF ids differ"
                impls["HF tokenizers"] = lambda: hf.encode(text.decode(), add_special_tokens=False)
            except ImportError:
                print("HF tokenizers not installed: no HF column")
        for impl, fn in impls.items():
            sec = best_of(fn, args.repeat)
            rows.append((name, tokenizer_kind, impl, len(ids), sec, mb / sec))
            print(f"{name:14s} {impl:14s} {mb / sec:7.2f} MB/s  ({len(ids)} tokens in {sec * 1e3:.1f} ms)")

    lines = [
        "# Tokenization throughput",
        "",
        f"`python bench/tokenize_speed.py --mb {args.mb} --repeat {args.repeat}` on {platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}. Input: {len(text):,} bytes of /usr/share/common-licenses text, one call per run, "
        f"best of {args.repeat}, one thread, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the "
        f"columns of one run share the machine's state). Token ids identical across implementations (checked in the run).",
        "",
        "| model | tokenizer | implementation | tokens | ms | MB/s | vs llama.cpp |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    ref = {r[0]: r[4] for r in rows if r[2] == "llama.cpp"}
    for name, kind, impl, ntok, sec, rate in rows:
        rel = f"{ref[name] / sec:.2f}x" if name in ref else "-"
        lines.append(f"| {name} | {kind} | {impl} | {ntok:,} | {sec * 1e3:.1f} | {rate:.2f} | {rel} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
