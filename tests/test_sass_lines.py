"""bench/sass_lines.py reads nvdisasm's listing with inlined line info (-gi) and counts a kernel's
instructions by source line and finds its loops, and joins an Nsight Compute source-page profile
onto those lines: checked on a small hand-made listing of nvdisasm's shape and a CSV of ncu's (the
tools themselves are not needed)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import sass_lines as sl  # noqa: E402

LISTING = '''\
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_7:
	//## File "/src/kernels/helper.cuh", line 12 inlined at "/src/kernels/attention_e8_block.cuh", line 40
	//## File "/src/kernels/attention_e8_block.cuh", line 40 inlined at "/src/kernels/attention_e8_mma.cuh", line 9
	//## File "/src/kernels/attention_e8_mma.cuh", line 9
        /*0010*/                   LOP3.LUT R2, R3, 0xff, RZ, 0xc0, !PT ;
        /*0020*/                   PRMT R4, R2, 0x4440, RZ ;
	//## File "/src/kernels/attention_e8_block.cuh", line 41 inlined at "/src/kernels/attention_e8_mma.cuh", line 9
	//## File "/src/kernels/attention_e8_mma.cuh", line 9
        /*0030*/                   IMMA.16832.S8.S8 R8, R4, R6, R8 ;
        /*0040*/              @!P0 BRA `(.L_x_7) ;
        /*0050*/                   BRA `(.L_x_7) ;
        /*0060*/                   EXIT ;
'''


def test_counts_by_line_at_the_named_files_level():
    insns, labels = sl.parse(LISTING.splitlines())
    assert [a for a, _, _ in insns] == [0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
    assert labels == {".L_x_7": 0x10}
    assert sl.opcode(insns[1][1]) == "LOP3" and sl.opcode(insns[4][1]) == "BRA"
    # Innermost frame by default: the helper's line.
    counts, _ = sl.by_line(insns, 0x10, 0x40, [])
    assert counts == {("helper.cuh", 12): 2, ("attention_e8_block.cuh", 41): 1}
    # Counted at the first frame in attention_e8_block*: the lines that call the helper.
    counts, ops = sl.by_line(insns, 0, 1 << 20, ["attention_e8_block"])
    # (A line's info holds until the next: the branches and EXIT count at line 41.)
    assert counts[("attention_e8_block.cuh", 40)] == 2 and counts[("attention_e8_block.cuh", 41)] == 4
    assert ops[("attention_e8_block.cuh", 40)] == {"LOP3": 1, "PRMT": 1}
    assert counts[("?", 0)] == 1  # the first instruction has no line info


def test_loops_are_the_conditional_branches_back():
    insns, labels = sl.parse(LISTING.splitlines())
    # The unconditional BRA back (a divergence fallback's return) is not a loop.
    assert sl.loops(insns, labels, min_len=2) == [(0x10, 0x40, 4)]
    assert sl.loops(insns, labels, min_len=5) == []


CSV = '''"Kernel Name","void k(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed"
"0x7f0000000000","      LDC R1, c[0x0][0x28]","2","1","8"
"0x7f0000000010","      LOP3.LUT R2, R3, 0xff, RZ, 0xc0, !PT","4","1","80"
"0x7f0000000020","      PRMT R4, R2, 0x4440, RZ","0","0","80"
"0x7f0000000030","      IMMA.16832.S8.S8 R8, R4, R6, R8","10","9","80"
"0x7f0000000040","@!P0  BRA 0x7f0000000010","4","3","80"
'''


def test_a_profile_joins_by_offset_onto_the_lines(tmp_path):
    import ncu_sass_regions
    p = tmp_path / "sass.csv"
    p.write_text(CSV)
    insns, _ = sl.parse(LISTING.splitlines())
    prof = sl.profile_by_line(insns, ncu_sass_regions.read_sass(str(p)), 0, 1 << 20, ["attention_e8_block"])
    assert prof[("attention_e8_block.cuh", 40)] == [160.0, 4.0]
    assert prof[("attention_e8_block.cuh", 41)] == [160.0, 14.0]
    # Another build: an opcode that differs at the same offset stops the join.
    p.write_text(CSV.replace("PRMT R4", "IADD3 R4"))
    with pytest.raises(SystemExit, match="not the same build"):
        sl.profile_by_line(insns, ncu_sass_regions.read_sass(str(p)), 0, 1 << 20, [])
