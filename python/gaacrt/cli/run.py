"""gaac-run — the terminal front end of gaacrt.

    gaac-run [model.gguf]          (until chat lands: the model's summary)
    gaac-run --info [model.gguf]   the model's summary (architecture, tensors, KV cost)
"""
from __future__ import annotations

import argparse
import sys

from .. import models
from .._core import GGUFError
from .inspect import describe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gaac-run", description="Run a GGUF model in the terminal.")
    ap.add_argument("model", nargs="?", help="GGUF file (default: SmolLM2-135M-Instruct, fetched on first use)")
    ap.add_argument("--info", action="store_true", help="print the model's summary and exit")
    args = ap.parse_args(argv)
    try:
        path = args.model or models.default()
        print(describe(path))
    except (GGUFError, models.ModelFetchError, OSError, RuntimeError) as e:
        print(f"gaac-run: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
