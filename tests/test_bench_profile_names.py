"""bench/cuda_kernel_profile.py's kernel names: namespaces, `void` and parameters go, the kernel's
own name and template arguments stay (an anonymous namespace once cost the name itself: the E8
block finalization printed as `lossy::`)."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "cuda_kernel_profile", Path(__file__).resolve().parents[1] / "bench" / "cuda_kernel_profile.py")
profile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(profile)


def test_kernel_names_keep_the_kernel():
    assert profile.short("void gaacrt::cuda::lossy::(anonymous namespace)::finalize_kernel(gaacrt::KVLayerView, "
                         "gaacrt::KVFinalizeJob*, long)") == "lossy::finalize_kernel"
    assert profile.short("void gaacrt::cuda::attn::attention_mma_kernel<128, false, 3>(gaacrt::cuda::attn::KernelArgs)"
                         ) == "attn::attention_mma_kernel<128, false, 3>"
    assert profile.short("void gaacrt::cuda::(anonymous namespace)::norm_quant_kernel<true>(float const*, int)"
                         ) == "norm_quant_kernel<true>"


def test_side_by_side_lists_every_kernel_under_every_cache_with_differences():
    aggs = {"bf16": {"attn::attention_mma_kernel<128, false, 3>": [10.0, 12.0], "norm_quant_kernel<true>": [2.0, 2.0]},
            "e8": {"attn::attention_e8_mma_kernel<128>": [30.0, 34.0], "norm_quant_kernel<true>": [2.0, 4.0],
                   "lossy::rotate_kernel": [1.0, 1.0]}}
    lines = profile.side_by_side(aggs, 2, "per token")
    assert lines[2] == "| kernel | bf16 µs | e8 µs | e8 - bf16 |"
    rows = {ln.split(" | ")[0][2:]: ln.split(" | ")[1:] for ln in lines[4:]}
    # µs per token (2 tokens profiled), largest first; a kernel one cache lacks counts 0 there
    assert list(rows)[0] == "`attn::attention_e8_mma_kernel<128>`"
    assert rows["`attn::attention_e8_mma_kernel<128>`"] == ["0.0", "32.0", "+32.0 |"]
    assert rows["`norm_quant_kernel<true>`"] == ["2.0", "3.0", "+1.0 |"]
    assert rows["`lossy::rotate_kernel`"] == ["0.0", "1.0", "+1.0 |"]
    assert rows["total"] == ["13.0", "36.0", "+23.0 |"]
