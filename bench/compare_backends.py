"""A real model's logits on two backends, row by row (issue 7's correctness rule).

    python bench/compare_backends.py gemma3-270m --backend cuda-emulated --prefill 40 --decode 4
    python bench/compare_backends.py smollm2-135m --backend cuda --cache gaac

The model is a name gaacrt.models.get knows (or a .gguf path); the text is tests/test_cuda_real_model.py's.
Prints each backend's time, the largest relative L2 over the rows and the argmax agreement, and
fails (exit 1) unless every row is within --tol and has the same argmax wherever the reference's
top-2 margin exceeds 0.5 (tests/fixtures/backend_compare.assert_close_logits).
"""
import argparse
import ast
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import gaacrt  # noqa: E402
from fixtures.backend_compare import assert_close_logits, logits_run, rel  # noqa: E402


def real_text() -> str:
    src = (ROOT / "tests/test_cuda_real_model.py").read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TEXT":
            return ast.literal_eval(node.value)
    raise SystemExit("tests/test_cuda_real_model.py has no TEXT")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--backend", default="cuda-emulated", help="compared against --reference")
    ap.add_argument("--reference", default="cpu")
    ap.add_argument("--prefill", type=int, default=40)
    ap.add_argument("--decode", type=int, default=4)
    ap.add_argument("--cache", default="bf16")
    ap.add_argument("--tol", type=float, default=3e-2)
    a = ap.parse_args()
    path = a.model if a.model.endswith(".gguf") else gaacrt.models.get(a.model, download=False)
    runs = {}
    for be in (a.reference, a.backend):
        m = gaacrt.Model(path, backend=be, n_threads=2) if be == "cpu" else gaacrt.Model(path, backend=be)
        toks = m.tokenize(real_text())[: a.prefill + a.decode]
        if len(toks) < a.prefill + a.decode:
            raise SystemExit(f"the text has only {len(toks)} tokens")
        t = time.time()
        runs[be] = logits_run(m, toks, a.prefill, a.decode, cache=a.cache)[0]
        print(f"{be}: {time.time() - t:.1f} s", flush=True)
    want, got = runs[a.reference], runs[a.backend]
    r = [rel(x, y) for x, y in zip(got, want)]
    agree = float(np.mean(np.argmax(got, 1) == np.argmax(want, 1)))
    print(f"{pathlib.Path(path).name} cache {a.cache}: {len(r)} rows, max relative L2 {max(r):.3g}, argmax agree {agree:.3f}")
    assert_close_logits(got, want, tol=a.tol)
    print("PASS")


if __name__ == "__main__":
    main()
