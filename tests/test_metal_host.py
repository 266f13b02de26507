"""The Metal backend's portable host logic around in-flight work (issue 8), on the emulated
backend, whose kernels run only when the host must wait: writes and reads of buffers a queued
kernel uses wait for it, other writes do not, freeing waits, staged block tables are copied when
the op is encoded (tests/metal/host_hazards.cpp). The whole-model tests (test_metal_model.py) run
the same logic across full decode steps."""
from metal.programs import build_against_gaacrt, run_counted


def test_metal_host_waits_exactly_where_a_gpu_would_need_it(tmp_path):
    run_counted(build_against_gaacrt("tests/metal/host_hazards.cpp", tmp_path / "host_hazards"), 7)
