"""The real SmolLM2-135M-Instruct (Q4_1, its own weights and tokenizer) on the CUDA backend against
the CPU backend (issue 7's real-weights check).

The GPU machine reaches no package index and takes at most 64 MiB of files per call, less than
the model's 98 MB: bench/gpu_real_smollm2.sh sends it in two parts, reassembles it there (sha256
checked) and points $GAACRT_MODEL_SMOLLM2_135M at it. Nothing is downloaded here: without the
file (or without a GPU) the test is skipped with the reason.
"""
import numpy as np
import pytest

import gaacrt
from fixtures.cuda_target import CUDA, REASON

pytestmark = pytest.mark.skipif(bool(REASON), reason=f"no usable CUDA device: {REASON}")

pytest.importorskip("gguf")
from fixtures.backend_compare import assert_close_logits, logits_run  # noqa: E402

TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk. From the lamp room he "
        "could see the fishing boats returning, their sails patched and grey, and beyond them the long "
        "line of the breakwater where the children played in summer. He wrote the weather in a ledger: "
        "wind from the south-west, a falling glass, rain before midnight. In forty years he had missed "
        "only one night, the winter his daughter was born, and the ship that ran aground that night "
        "was the one that brought the new lens from the city, packed in straw and wrapped in oilcloth.")


@pytest.fixture(scope="module")
def smollm2():
    try:
        return gaacrt.models.get("smollm2-135m", download=False)
    except gaacrt.models.ModelFetchError as e:
        pytest.skip(f"the real SmolLM2 file is not on this machine ({e}); bench/gpu_real_smollm2.sh brings it")


def rows_rel(got, want):
    return np.array([np.linalg.norm(x - y) / np.linalg.norm(y) for x, y in zip(got, want)])


def real_logits(path, backend, act_bits):
    m = gaacrt.Model(path, backend=backend, n_threads=8, act_bits=act_bits)
    toks = m.tokenize(TEXT)
    assert len(toks) > 100
    return logits_run(m, toks, len(toks) - 24, 24)[0]  # a 94-token prefill, then 24 decode steps


def test_real_smollm2_logits_match_cpu(smollm2):
    # Both backends at the default 16-bit activations. (The GPU's decode matvec once ran on 8-bit
    # x whatever the setting: against the CPU the decode rows then missed by 0.0725.)
    a, b = real_logits(smollm2, "cpu", 16), real_logits(smollm2, CUDA, 16)
    print(f"real SmolLM2, 16-bit activations, {len(a)} rows: max relative L2 {rows_rel(b, a).max():.3g}")
    assert_close_logits(b, a)


def test_real_smollm2_8bit_activations_are_as_good_as_the_cpus(smollm2):
    # At 8 bits (act_bits=8, llama.cpp's precision) this model's logits move by ~0.1 relative L2
    # from the 16-bit ones on either backend, and a rounding flip of one int8 value (a float
    # difference of an ulp upstream) moves them by more than the GPU-vs-CPU bound, so the two
    # backends' 8-bit runs are not compared with each other: the GPU's 8-bit run must be as close
    # to the 16-bit reference as the CPU's is.
    ref = real_logits(smollm2, "cpu", 16)
    e_cpu = rows_rel(real_logits(smollm2, "cpu", 8), ref)
    e_gpu = rows_rel(real_logits(smollm2, CUDA, 8), ref)
    print(f"real SmolLM2 at 8 bits vs the CPU at 16: CPU mean {e_cpu.mean():.3g} max {e_cpu.max():.3g}, "
          f"GPU mean {e_gpu.mean():.3g} max {e_gpu.max():.3g}")
    assert e_gpu.mean() <= 1.25 * e_cpu.mean() and e_gpu.max() <= 1.5 * e_cpu.max()


def test_real_smollm2_greedy_reply_matches_cpu(smollm2):
    # The words a user sees: a greedy chat reply of 48 tokens, both backends fed the CPU's choice at
    # every step. The GPU must pick the same token wherever the CPU's top-2 margin exceeds 0.5
    # (below that, a rounding difference may decide a near-tie, as between any two backends).
    cpu = gaacrt.Model(smollm2, backend="cpu", n_threads=8)
    gpu = gaacrt.Model(smollm2, backend=CUDA)
    prompt = cpu.apply_chat_template([{"role": "user", "content": "Name three uses of a lighthouse, one line each."}])
    toks = cpu.tokenize(prompt, parse_special=True)
    sc, sg = cpu.session(n_ctx=256), gpu.session(n_ctx=256)
    lc, lg = sc.eval(toks, all_logits=True)[-1], sg.eval(toks, all_logits=True)[-1]
    reply, agreed = [], 0
    for _ in range(48):
        t = int(np.argmax(lc))
        top = np.sort(lc)[-2:]
        if top[1] - top[0] > 0.5:
            assert int(np.argmax(lg)) == t, f"step {len(reply)}: GPU picks {int(np.argmax(lg))}, CPU {t}"
            agreed += 1
        reply.append(t)
        sc.eval([t])
        sg.eval([t])
        lc, lg = sc.logits(), sg.logits()
    print(f"reply ({agreed} of 48 steps with a margin > 0.5):", repr(cpu.detokenize(reply)))
    assert agreed >= 24
