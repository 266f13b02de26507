"""gaac-calibrate — fit GAAC's per-channel bases and slot capacity for a model.

    gaac-calibrate model.gguf --text FILE [FILE ...] --ctx N [-o model.gaac]
"""
from __future__ import annotations

import argparse
import sys

from .. import models
from .._core import GaacrtError, GGUFError
from ..calibrate import calibrate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gaac-calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", help="GGUF file (default: the default model)")
    ap.add_argument("--text", nargs="+", required=True, metavar="FILE", help="real text to calibrate on")
    ap.add_argument("--ctx", type=int, default=4096, help="calibration window = deployment context (default 4096)")
    ap.add_argument("-o", "--out", default=None, help="sidecar path (default: model.gaac beside the model)")
    ap.add_argument("-t", "--threads", type=int, default=None)
    args = ap.parse_args(argv)
    try:
        r = calibrate(args.model or models.default(), files=args.text, ctx=args.ctx, out=args.out,
                      n_threads=args.threads)
    except (GGUFError, GaacrtError, models.ModelFetchError, OSError, ValueError) as e:
        print(f"gaac-calibrate: {e}", file=sys.stderr)
        return 1
    print(f"wrote {r['out']}: {r['tokens']} tokens in windows of {r['ctx']}")
    for kv in ("k", "v"):
        print(f"  {kv.upper()}: codec ratio {r['codec_ratio_' + kv]:.4f}, resident ratio {r['resident_ratio_' + kv]:.4f}, "
              f"groups 3-bit {100 * r['share_3bit_' + kv]:.2f}% 4-bit {100 * r['share_4bit_' + kv]:.2f}% "
              f"raw {100 * r['share_raw_' + kv]:.3f}%, escape capacity {r['capacity_' + kv]} B, "
              f"exponent entropy {r['exponent_entropy_' + kv]:.2f} bits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
