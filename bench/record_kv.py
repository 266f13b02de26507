"""bench/record_kv.py — records real models' KV for the GPU attention benchmark (issue 7: GAAC timings
must use KV with real exponent statistics, not a random model's).

    python bench/record_kv.py [--out bench/kv_rec] [--tokens 2048]

Runs SmolLM2-135M and Gemma-3-270M on the CPU over GPL-3 (a bf16 cache), exports every layer's K
(after RoPE) and V, and regroups their channels into the benchmark's shape, 8 kv-heads of 128:
  * SmolLM2 (30 layers x 3 kv-heads of 64): 16 (layer, head) units spread over the depth, two per
    128-channel head.
  * Gemma-3 (18 layers x 1 kv-head of 256, five of six layers sliding-window): the three global
    layers (which hold the whole prompt) split into 128-channel halves, six halves, the first two
    repeated to make eight.
Writes OUT/{smollm2,gemma3}.npz with k, v: uint16 BF16 bits [tokens][8][128]; bench/cuda_attention.py
--kv loads them (`Context._import_kv_for_bench`) and tiles them to each context length.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import gaacrt
from gaacrt import _core

TEXT = "/usr/share/common-licenses/GPL-3"


def export_all(path: str, n_tok: int) -> list[tuple[np.ndarray, np.ndarray]]:
    m = gaacrt.Model(path)
    toks = m.tokenize(Path(TEXT).read_text())[:n_tok]
    c = _core.Context(m._m, n_ctx=n_tok + 16, cache="bf16")
    s = _core.Session(c)
    s.eval(toks)
    return [c._export_kv(s, il) for il in range(m.config["n_layer"])]


def smollm2(layers, n_tok: int) -> tuple[np.ndarray, np.ndarray]:
    units = [(il, h) for il in range(len(layers)) for h in range(layers[0][0].shape[1])]
    pick = [units[i * len(units) // 16] for i in range(16)]
    k = np.concatenate([layers[il][0][:n_tok, h, :] for il, h in pick], axis=1)
    v = np.concatenate([layers[il][1][:n_tok, h, :] for il, h in pick], axis=1)
    return k.reshape(n_tok, 8, 128), v.reshape(n_tok, 8, 128)


def gemma3(layers, n_tok: int) -> tuple[np.ndarray, np.ndarray]:
    glob = [il for il, (k, _) in enumerate(layers) if k.shape[0] >= n_tok]
    halves = [(il, c) for il in glob for c in (0, 128)]
    halves = (halves + halves)[:8]
    k = np.concatenate([layers[il][0][:n_tok, 0, c:c + 128] for il, c in halves], axis=1)
    v = np.concatenate([layers[il][1][:n_tok, 0, c:c + 128] for il, c in halves], axis=1)
    return k.reshape(n_tok, 8, 128), v.reshape(n_tok, 8, 128), glob


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "kv_rec"))
    ap.add_argument("--tokens", type=int, default=2048)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = args.tokens
    layers = export_all(gaacrt.models.get("smollm2-135m"), n)
    k, v = smollm2(layers, n)
    np.savez(out / "smollm2.npz", k=k, v=v)
    print(f"smollm2: {k.shape} from {len(layers)} layers")
    layers = export_all(gaacrt.models.get("gemma3-270m"), n)
    k, v, glob = gemma3(layers, n)
    np.savez(out / "gemma3.npz", k=k, v=v)
    print(f"gemma3: {k.shape} from global layers {glob}")


if __name__ == "__main__":
    main()
