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
