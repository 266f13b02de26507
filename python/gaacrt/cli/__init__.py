"""Command-line entry points: gaac-run, gaac-inspect, gaac-perplexity, gaac-calibrate."""
from __future__ import annotations

import argparse


def add_lossy_cache_args(ap: argparse.ArgumentParser) -> None:
    """The options beside the paper's methods that gaac-run and gaac-perplexity share."""
    ap.add_argument("--e8-center", nargs="?", const="global", default="off", choices=["off", "global", "block"],
                    help="E8 key centering (not in the paper): global = keys coded as (k - mean) / sqrt(std) per channel, "
                         "fitted online (the flag alone); block = each 16-token block's own mean stored and subtracted "
                         "(CPU only)")
    ap.add_argument("--raw-sink", type=int, default=0, metavar="N",
                    help="lossy caches: keep the first N tokens BF16 for good (the attention sink)")
    ap.add_argument("--raw-window", type=int, default=None, metavar="N",
                    help="compressing caches: keep the newest N tokens raw BF16 (default: the format's own)")
