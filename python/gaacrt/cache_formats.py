"""Nominal KV-cache sizes per format (bytes per token and kv-head), from the format specs.

Used by `gaac-inspect` to say what a context costs before anything runs; the live figures of a
session come from `session.kv_stats()`.
  bf16        2 bytes per element, K and V
  gaac        lossless; the fixed part of a tile is 11.25 bits/element, escapes add ~0.1 bit:
              spec/gaac.md measured 1.405-1.411x on SmolLM2 (we print 16/1.405 bits)
  fp8_*+gaac  1 byte per element before GAAC (the seed: 1.09-1.14x E4M3, 1.25-1.30x E5M2)
  e8          keys: one 16-bit E8 code per 8 dims + fp32 norm; values: 2-bit, groups of 32
              channels with fp16 scale and zero (84 B per token-head at d=128); newest 128
              tokens stay bf16
  q8          int8, groups of 32 channels, fp16 scale (34 B per 32 elements), K and V
  kivi2       keys 2-bit per channel over 16-token blocks with fp16 scale+zero per channel;
              values 2-bit per token in groups of 32 with fp16 scale+zero
"""
from __future__ import annotations

GAAC_TYPICAL_RATIO = 1.405

FORMATS = ("bf16", "gaac", "fp8_e4m3+gaac", "fp8_e5m2+gaac", "e8", "q8", "kivi2")


def bytes_per_token_head(fmt: str, d_k: int, d_v: int) -> float:
    """Bytes of K plus V for one token of one kv-head, excluding windows and tables."""
    if fmt == "bf16":
        return 2.0 * (d_k + d_v)
    if fmt == "gaac":
        return 2.0 * (d_k + d_v) / GAAC_TYPICAL_RATIO
    if fmt == "fp8_e4m3+gaac":
        return (d_k + d_v) / 1.09
    if fmt == "fp8_e5m2+gaac":
        return (d_k + d_v) / 1.25
    if fmt == "e8":
        return (2 * d_k / 8 + 4) + (d_v * 2 / 8 + d_v / 32 * 4)
    if fmt == "q8":
        return (d_k + d_v) / 32 * 34
    if fmt == "kivi2":
        return (d_k * 2 / 8 + d_k * 4 / 16) + (d_v * 2 / 8 + d_v / 32 * 4)
    raise ValueError(f"unknown cache format '{fmt}' (known: {', '.join(FORMATS)})")
