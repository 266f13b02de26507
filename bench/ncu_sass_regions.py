"""bench/ncu_sass_regions.py — where a kernel's instructions and stall samples fall in its SASS,
from Nsight Compute's source page: a table of address ranges (the kernel's code in order, so a
range is a phase: prologue, copy issue, decode, mma, softmax, merge), each with its share of the
warp-stall samples and of the executed warp instructions, the instructions executed per work
unit, and its most executed opcodes.

    ncu --warp-sampling-interval 0 --section SourceCounters -k regex:KERNEL -o rep python3 ...
    ncu --import rep.ncu-rep --page source --print-source sass --csv > sass.csv
    python3 bench/ncu_sass_regions.py sass.csv --units 32768 [--bin 0x800] [--top 12]

--units: work units the launch did (e.g. 16-token blocks x kv-heads: 65536 / 16 x 8 = 32768 at
64K), so a range's "per unit" column reads as instructions per block·kv-head. --top lists the
single instructions holding the most samples. bench/gpu_check_visit.sh's sass stage runs the
three steps for one kernel. (How the GAAC and short-context attention figures of
bench/results/cuda_h200.md, 2026-12-04 third session, were read.)
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import Counter
from dataclasses import dataclass

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


@dataclass
class Instr:
    offset: int     # bytes from the kernel's first instruction
    executed: float  # warp instructions executed
    samples: float  # warp-stall samples (all)
    text: str


def read_sass(path: str) -> list[Instr]:
    """The kernel's instructions from ncu's --page source --csv output (the first kernel in it)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for i, r in enumerate(rows):
        if r and r[0] == "Address":
            head, body = r, rows[i + 1:]
            break
    else:
        raise SystemExit(f"{path}: no 'Address' header: not ncu's --page source --csv output")
    for col in (SAMPLES, EXECUTED):
        if col not in head:
            raise SystemExit(f"{path}: no '{col}' column (profile with --section SourceCounters)")
    ia, ie, isrc = head.index(SAMPLES), head.index(EXECUTED), head.index("Source")
    out: list[Instr] = []
    for r in body:
        if len(r) <= max(ia, ie) or not r[0].startswith("0x"):
            if out:
                break  # the next kernel's table, or the end
            continue
        out.append(Instr(int(r[0], 16), float(r[ie] or 0), float(r[ia] or 0), r[isrc].strip()))
    if not out:
        raise SystemExit(f"{path}: no instructions")
    base = out[0].offset
    for x in out:
        x.offset -= base
    return out


def opcode(text: str) -> str:
    """The opcode of a SASS line, without its predicate ("@!P0 BRA ..." -> "BRA")."""
    t = re.sub(r"^@!?U?P\w+\s+", "", text)
    return t.split(" ")[0] if t else ""


def regions(instrs: list[Instr], bin_bytes: int) -> list[tuple[int, int, list[Instr]]]:
    """The instructions grouped by address range of bin_bytes, those with any execution or sample."""
    groups: dict[int, list[Instr]] = {}
    for x in instrs:
        if x.executed or x.samples:
            groups.setdefault(x.offset // bin_bytes, []).append(x)
    return [(k * bin_bytes, (k + 1) * bin_bytes, v) for k, v in sorted(groups.items())]


def report(instrs: list[Instr], units: float, bin_bytes: int, top: int, min_share: float) -> str:
    tot_s = sum(x.samples for x in instrs) or 1.0
    tot_e = sum(x.executed for x in instrs) or 1.0
    lines = [f"{len(instrs)} SASS instructions, {tot_e:,.0f} warp instructions executed "
             f"({tot_e / units:,.1f} per unit), {tot_s:,.0f} stall samples", "",
             "| range | samples | executed | per unit | most executed opcodes (per unit) |", "|---|---:|---:|---:|---|"]
    for lo, hi, xs in regions(instrs, bin_bytes):
        s, e = sum(x.samples for x in xs), sum(x.executed for x in xs)
        if s / tot_s < min_share and e / tot_e < min_share:
            continue
        ops = Counter()
        for x in xs:
            ops[opcode(x.text)] += x.executed
        top_ops = " ".join(f"{o} {c / units:.0f}" for o, c in ops.most_common(5) if c / units >= 0.5)
        lines.append(f"| {lo:#x}-{hi:#x} | {100 * s / tot_s:.1f}% | {100 * e / tot_e:.1f}% | {e / units:.0f} | {top_ops} |")
    if top:
        lines += ["", f"top {top} instructions by stall samples:"]
        for x in sorted(instrs, key=lambda x: -x.samples)[:top]:
            lines.append(f"  {x.offset:#07x} {100 * x.samples / tot_s:5.1f}%  exec/unit {x.executed / units:6.2f}  {x.text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --page source --print-source sass --csv output")
    ap.add_argument("--units", type=float, default=1.0, help="work units of the profiled launch (per-unit column)")
    ap.add_argument("--bin", type=lambda s: int(s, 0), default=0x800, help="bytes of SASS per range (16 per instruction)")
    ap.add_argument("--top", type=int, default=12, help="instructions with the most stall samples to list")
    ap.add_argument("--min-share", type=float, default=0.005, help="hide ranges below this share of both columns")
    a = ap.parse_args(argv)
    if a.units <= 0 or a.bin <= 0:
        sys.exit("--units and --bin must be positive")
    print(report(read_sass(a.csv), a.units, a.bin, a.top, a.min_share))


if __name__ == "__main__":
    main()
