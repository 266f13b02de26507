"""CPU prefill and decode speed on SmolLM2-135M (Q4_1), gaacrt beside llama.cpp in the same run.

    python bench/decode_cpu.py [--model PATH] [--threads 1 2] [--act-bits 16 8] [--reps 3]

Like llama-bench: pp512 = one 512-token prompt of random tokens evaluated in one call; tg128 =
128 single-token evals after it (no sampling), so decode attends over 512-640 tokens. Each figure
is the median of --reps runs after a warm-up; the engines alternate run by run so that load on
this shared machine hits all of them. gaacrt runs once per --act-bits setting (16: Q16 int16
activations, the default; 8: llama.cpp's 8-bit formats). Writes the table to
bench/results/decode_cpu.md.

--llama-plain: llama.cpp without its repacked weights ("extra buffer types"). llama-cpp-python
0.3.36 segfaults in its first decode with them on AMX CPUs (tests/fixtures/llama_reference.py), so
`auto` (the default) turns them off there and the table says so: llama.cpp's figures are then
those of its plain CPU path.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Not bench/ itself on the path: a bench script named like a stdlib module (the tokenizer bench
# was once bench/tokenize.py) would shadow it for numpy's imports.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import gaacrt  # noqa: E402
from gaacrt import _core  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "decode_cpu.md"


def cpu_has_amx() -> bool:
    try:
        return "amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def run_gaacrt(model, toks, n_gen):
    s = _core.Session(_core.Context(model, n_ctx=1024))
    t0 = time.perf_counter()
    s.eval(toks)
    t1 = time.perf_counter()
    for t in toks[:n_gen]:
        s.eval([int(t)])
    t2 = time.perf_counter()
    return len(toks) / (t1 - t0), n_gen / (t2 - t1)


def run_llama(llm, toks, n_gen):
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(toks)
    t1 = time.perf_counter()
    for t in toks[:n_gen]:
        llm.eval([int(t)])
    t2 = time.perf_counter()
    return len(toks) / (t1 - t0), n_gen / (t2 - t1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--act-bits", type=int, nargs="+", default=[16, 8], choices=(8, 16))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--llama-plain", choices=("auto", "on", "off"), default="auto",
                    help="llama.cpp without repacked weights (auto: on AMX CPUs, where they crash)")
    args = ap.parse_args()
    plain = args.llama_plain == "on" or (args.llama_plain == "auto" and cpu_has_amx())
    path = args.model or gaacrt.models.get("smollm2-135m")
    toks = [int(t) for t in np.random.default_rng(0).integers(100, 40000, args.n_prompt)]
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama-cpp-python is not installed: gaacrt figures only", file=sys.stderr)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for nt in args.threads:
        models = {bits: _core.Model(path, "cpu", nt, 0, bits) for bits in args.act_bits}
        llm = None
        if llama_cpp is not None:
            kw = dict(n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=nt, n_threads_batch=nt, verbose=False)
            if plain:
                sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
                from fixtures.llama_reference import llama_model
                llm = llama_model(llama_cpp, path, **kw)
            else:
                llm = llama_cpp.Llama(path, **kw)
        ours = {bits: [] for bits in args.act_bits}
        ref = []
        for m in models.values():  # warm-up
            run_gaacrt(m, toks[:64], 8)
        if llm:
            run_llama(llm, toks[:64], 8)
        for _ in range(args.reps):
            for bits, m in models.items():
                ours[bits].append(run_gaacrt(m, toks, args.n_gen))
            if llm:
                ref.append(run_llama(llm, toks, args.n_gen))
        r_pp = statistics.median(r[0] for r in ref) if ref else float("nan")
        r_tg = statistics.median(r[1] for r in ref) if ref else float("nan")
        for bits in args.act_bits:
            o_pp, o_tg = statistics.median(r[0] for r in ours[bits]), statistics.median(r[1] for r in ours[bits])
            rows.append((nt, bits, o_pp, r_pp, o_pp / r_pp, o_tg, r_tg, o_tg / r_tg))

    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    lines = [f"SmolLM2-135M Q4_1 on {platform.machine()} ({', '.join(gaacrt.cpu_isas())}), "
             f"pp{args.n_prompt} / tg{args.n_gen}, median of {args.reps}, 1-minute load average {load_before:.2f} before / "
             f"{load[0]:.2f} after the run (2-core machine shared with other work)"
             + (", llama.cpp without repacked weights (--llama-plain)" if plain and llama_cpp else ""), "",
             f"Command: `python bench/decode_cpu.py {' '.join(sys.argv[1:])}`".replace("py `", "py`"), "",
             "| threads | act bits | gaacrt pp t/s | llama.cpp pp t/s | pp ratio | gaacrt tg t/s | llama.cpp tg t/s | tg ratio |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.2f} | {r[5]:.1f} | {r[6]:.1f} | {r[7]:.2f} |")
    table = "\n".join(lines)
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
