"""bench/sass_lines.py — where a kernel's SASS comes from, by source line, with no GPU: the static
instruction counts of a CUDA object's kernel (or of one address range of it, such as a loop) per
source line, each with its most frequent opcodes. The GPU counterpart is bench/ncu_sass_regions.py
(executed counts and stall samples, from Nsight Compute).

    python3 bench/sass_lines.py OBJ.o --kernel 'attention_e8_mma_kernel<128, false>' [--loops]
    python3 bench/sass_lines.py OBJ.o --kernel REGEX --range 0x9670:0xafc0 [--files attention_e8,gaac_lane]

OBJ.o: an object of the CUDA build (e.g. BUILD/backends/cuda/CMakeFiles/gaacrt_cuda.dir/attention_e8.cu.o;
the project compiles with -lineinfo). --kernel: a regular expression on the demangled name (the
first match; without it the kernels are listed). --loops: the conditional backward branches of 40
instructions or more, i.e. the kernel's loops and the address range each spans (the widest is
usually the main loop; a range inside it is a path through it). --files: file-name prefixes that
name the level an instruction is counted at: the innermost inlined frame in one of them (default:
the innermost frame), so that e.g. a helper called from two lines of attention_e8_block.cuh counts
at those lines.

--ncu CSV (with --units N): Nsight Compute's source page of one launch of the same binary (`ncu
--section SourceCounters ... ; ncu --import REP --page source --print-source sass --csv`, as
bench/ncu_sass_regions.py reads it): each line then also gets its executed warp instructions per
work unit and its share of the stall samples, so a GPU visit's profile reads by source line here.
The two listings are joined by offset; a differing opcode at any offset stops it (another build).

Needs nvdisasm and cuobjdump: the CUDA toolkit's, or the pip wheels nvidia-cuda-nvdisasm and
nvidia-cuda-cuobjdump (`pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump`), found on PATH, in
$CUDA_HOME/bin or in those wheels. Counts are static: a predicated or rarely taken path counts as
much as the common one, so read a loop's range, then the path through it (the addresses in
--loops and the branches in its listing).
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_sass_regions  # noqa: E402  (its CSV reader and opcode parsing)

INSN = re.compile(r"\s*/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
FRAME = re.compile(r'File "([^"]+)", line (\d+)')
TEXT = re.compile(r"^//-+ \.text\.(\S+) -+")


def tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", "/usr/local/cuda"), sysconfig.get_paths()["purelib"]]
    for root in roots:
        wheels = glob.glob(os.path.join(root, "nvidia", "*", "bin", name))
        for path in glob.glob(os.path.join(root, "bin", name)) + wheels:
            if not os.access(path, os.X_OK):
                sys.exit(f"sass_lines: {path} is not executable (chmod +x it)")
            return path
    sys.exit(f"sass_lines: {name} not found (CUDA toolkit, or pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump)")


def demangle(names: list[str]) -> list[str]:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        return names
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def disassemble(obj: str) -> dict[str, list[str]]:
    """The nvdisasm listing (with inlined line info) of each kernel in the object's sm_ cubins."""
    listings: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([tool("cuobjdump"), "-xelf", "all", os.path.abspath(obj)], cwd=tmp, check=True,
                       capture_output=True)
        for cubin in sorted(glob.glob(os.path.join(tmp, "*.cubin"))):
            text = subprocess.run([tool("nvdisasm"), "-gi", "-c", cubin], capture_output=True, text=True,
                                  check=True).stdout
            name = None
            for line in text.splitlines():
                m = TEXT.match(line)
                if m:
                    name = m.group(1)
                    listings[name] = []
                elif name:
                    listings[name].append(line)
    return listings


def parse(lines: list[str]):
    """[(address, instruction, inline chain innermost first)] and {label: address}."""
    out, labels, chain, pending, fresh = [], {}, [], [], False
    for line in lines:
        s = line.strip()
        if s.startswith("//## File"):
            if not fresh:
                chain, fresh = [], True
            chain.append(FRAME.search(s).groups())
            continue
        m = LABEL.match(s)
        if m:
            pending.append(m.group(1))
            continue
        m = INSN.match(line)
        if m:
            fresh = False
            addr = int(m.group(1), 16)
            for p in pending:
                labels[p] = addr
            pending = []
            out.append((addr, m.group(2), chain))
    return out, labels


def opcode(insn: str) -> str:
    """The opcode without its predicate or modifiers ("@!P0 LOP3.LUT ..." -> "LOP3")."""
    return ncu_sass_regions.opcode(insn).split(".")[0]


def loops(insns, labels, min_len: int = 40) -> list[tuple[int, int, int]]:
    """(first address, address of the branch back, instructions) of each loop of min_len or more."""
    found = []
    for addr, insn, _ in insns:
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", insn)
        # Conditional branches only: the unconditional ones back are the returns of the
        # divergent-warp fallbacks (BRA.DIV) placed after the kernel's end.
        if m and insn.startswith("@") and m.group(1) in labels and labels[m.group(1)] < addr:
            n = (addr - labels[m.group(1)]) // 16 + 1
            if n >= min_len:
                found.append((labels[m.group(1)], addr, n))
    return found


def line_of(chain, files: list[str]) -> tuple[str, int]:
    frame = next((f for f in chain if any(os.path.basename(f[0]).startswith(p) for p in files)), None)
    frame = frame or (chain[0] if chain else ("?", "0"))
    return os.path.basename(frame[0]), int(frame[1])


def by_line(insns, lo: int, hi: int, files: list[str]):
    """{(file, line): instructions} and {(file, line): Counter of opcodes} over [lo, hi)."""
    counts: collections.Counter = collections.Counter()
    ops: dict = collections.defaultdict(collections.Counter)
    for addr, insn, chain in insns:
        if not lo <= addr < hi:
            continue
        key = line_of(chain, files)
        counts[key] += 1
        ops[key][opcode(insn)] += 1
    return counts, ops


def profile_by_line(insns, prof, lo: int, hi: int, files: list[str]):
    """{(file, line): [executed, samples]} over [lo, hi) from a profile's instructions (offset,
    executed, samples, text), joined to the listing by offset."""
    at = {addr: (insn, chain) for addr, insn, chain in insns}
    out: dict = collections.defaultdict(lambda: [0.0, 0.0])
    for x in prof:
        if x.offset not in at:
            sys.exit(f"sass_lines: the profile has an instruction at {x.offset:#x} that the listing lacks")
        insn, chain = at[x.offset]
        if opcode(insn) != opcode(x.text):
            sys.exit(f"sass_lines: at {x.offset:#x} the listing has {insn!r}, the profile {x.text!r}: "
                     "not the same build")
        if lo <= x.offset < hi:
            acc = out[line_of(chain, files)]
            acc[0] += x.executed
            acc[1] += x.samples
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("obj")
    ap.add_argument("--kernel", help="regular expression on the demangled kernel name")
    ap.add_argument("--range", help="LO:HI addresses (hex), default the whole kernel")
    ap.add_argument("--files", default="", help="comma-separated file-name prefixes to count at")
    ap.add_argument("--loops", action="store_true")
    ap.add_argument("--ncu", help="ncu source-page CSV of one launch of this kernel (executed, samples)")
    ap.add_argument("--units", type=float, default=1.0, help="work units of that launch (per-unit column)")
    args = ap.parse_args(argv)
    listings = disassemble(args.obj)
    names = list(listings)
    pretty = dict(zip(names, demangle(names)))
    if not args.kernel:
        for name in names:
            print(pretty[name])
        return
    match = [n for n in names if re.search(args.kernel, pretty[n])]
    if not match:
        sys.exit(f"sass_lines: no kernel matches {args.kernel!r}; the object's kernels:\n  " +
                 "\n  ".join(pretty[n] for n in names))
    insns, labels = parse(listings[match[0]])
    print(f"# {pretty[match[0]]}: {len(insns)} instructions\n")
    if args.loops:
        print("| loop start | branch back | instructions |\n|---|---|---:|")
        for first, back, n in loops(insns, labels):
            print(f"| {first:#x} | {back:#x} | {n} |")
        return
    lo, hi = (int(x, 16) for x in args.range.split(":")) if args.range else (0, 1 << 40)
    files = [f for f in args.files.split(",") if f]
    counts, ops = by_line(insns, lo, hi, files)
    print(f"{sum(counts.values())} instructions in [{lo:#x}, {hi:#x})\n")
    if args.ncu:
        prof = profile_by_line(insns, ncu_sass_regions.read_sass(args.ncu), lo, hi, files)
        tot_e = sum(v[0] for v in prof.values()) or 1.0
        tot_s = sum(v[1] for v in prof.values()) or 1.0
        print(f"executed {tot_e / args.units:,.1f} warp instructions per unit in the range\n")
        print("| source line | instructions | executed per unit | stall samples | opcodes |\n|---|---:|---:|---:|---|")
        for key in sorted(counts):
            e, smp = prof.get(key, (0.0, 0.0))
            top = ", ".join(f"{op} {n}" for op, n in ops[key].most_common(4))
            print(f"| {key[0]}:{key[1]} | {counts[key]} | {e / args.units:.1f} | {100 * smp / tot_s:.1f}% | {top} |")
        return
    print("| source line | instructions | opcodes |\n|---|---:|---|")
    for key in sorted(counts):
        top = ", ".join(f"{op} {n}" for op, n in ops[key].most_common(5))
        print(f"| {key[0]}:{key[1]} | {counts[key]} | {top} |")


if __name__ == "__main__":
    main()
