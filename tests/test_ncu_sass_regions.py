"""bench/ncu_sass_regions.py reads Nsight Compute's source-page CSV and tables where a kernel's
instructions and stall samples fall: checked on a small hand-made CSV of ncu's shape."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ncu_sass_regions as nsr  # noqa: E402

CSV = '''"Kernel Name","void k(int)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed"
"0x7f0000000000","      LDC R1, c[0x0][0x28]","2","1","8"
"0x7f0000000010","      IMAD R2, R3, R4, RZ","0","0","8"
"0x7f0000000800","@!P0  BRA 0x7f0000000000","6","3","24"
"0x7f0000000810","      HMMA.16816.F32.BF16 R4, R8, R12, R4","12","9","40"
"0x7f0000001000","      EXIT","0","0","0"
'''


def test_regions_shares_and_per_unit(tmp_path, capsys):
    p = tmp_path / "sass.csv"
    p.write_text(CSV)
    ins = nsr.read_sass(str(p))
    assert [x.offset for x in ins] == [0, 0x10, 0x800, 0x810, 0x1000]
    assert nsr.opcode(ins[2].text) == "BRA" and nsr.opcode(ins[3].text) == "HMMA.16816.F32.BF16"
    rg = nsr.regions(ins, 0x800)
    assert [(lo, len(xs)) for lo, _, xs in rg] == [(0, 2), (0x800, 2)]  # EXIT: never executed, no samples
    nsr.main([str(p), "--units", "8", "--top", "1"])
    out = capsys.readouterr().out
    assert "80 warp instructions executed (10.0 per unit), 20 stall samples" in out
    assert "| 0x0-0x800 | 10.0% | 20.0% | 2 | LDC 1 IMAD 1 |" in out
    assert "| 0x800-0x1000 | 90.0% | 80.0% | 8 | HMMA.16816.F32.BF16 5 BRA 3 |" in out
    assert "HMMA.16816.F32.BF16 R4, R8, R12, R4" in out.split("top 1 instructions")[1]


def test_rejects_other_csv(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text('"a","b"\n"1","2"\n')
    with pytest.raises(SystemExit, match="not ncu's --page source --csv output"):
        nsr.read_sass(str(p))
    p.write_text('"Address","Source","Instructions Executed"\n"0x0","NOP","1"\n')
    with pytest.raises(SystemExit, match="SourceCounters"):
        nsr.read_sass(str(p))
