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

REASON = gaacrt.cuda_unavailable_reason()
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


@pytest.mark.parametrize("act_bits", [16, 8])
def test_real_smollm2_logits_match_cpu(smollm2, act_bits):
    # Both backends at the same activation precision. (The GPU's decode matvec once ran on 8-bit x
    # whatever the setting: against the CPU's default 16 bits the decode rows missed by 0.0725.)
    cpu = gaacrt.Model(smollm2, backend="cpu", n_threads=8, act_bits=act_bits)
    gpu = gaacrt.Model(smollm2, backend="cuda", act_bits=act_bits)
    toks = cpu.tokenize(TEXT)
    assert toks == gpu.tokenize(TEXT) and len(toks) > 100
    n_pre = len(toks) - 24
    a, _ = logits_run(cpu, toks, n_pre, 24)
    b, _ = logits_run(gpu, toks, n_pre, 24)
    worst = max(np.linalg.norm(x - y) / np.linalg.norm(y) for x, y in zip(b, a))
    print(f"real SmolLM2, {act_bits}-bit activations, {len(a)} rows (prefill {n_pre} + 24 decode steps): max relative L2 {worst:.3g}")
    assert_close_logits(b, a)


def test_real_smollm2_greedy_reply_matches_cpu(smollm2):
    # The words a user sees: a greedy chat reply of 48 tokens, both backends fed the CPU's choice at
    # every step. The GPU must pick the same token wherever the CPU's top-2 margin exceeds 0.5
    # (below that, a rounding difference may decide a near-tie, as between any two backends).
    cpu = gaacrt.Model(smollm2, backend="cpu", n_threads=8)
    gpu = gaacrt.Model(smollm2, backend="cuda")
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
