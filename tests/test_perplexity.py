"""gaac-perplexity (issue 6): windows scored on their second half, as llama-perplexity does, in the
cache's serving state; KL and top-1 against a BF16 run; its errors."""
import math

import numpy as np
import pytest

import gaacrt
from gaacrt.cli import perplexity as cli
from gaacrt.perplexity import perplexity

GPL = "/usr/share/common-licenses/GPL-3"


@pytest.fixture(scope="module")
def smollm(smollm2_path):
    return gaacrt.Model(smollm2_path, backend="cpu", n_threads=2)


def test_bf16_perplexity_is_the_mean_nll_of_each_windows_second_half(smollm):
    text = open(GPL, encoding="utf-8").read()[:4000]
    r = perplexity(smollm, text, cache="bf16", ctx=64, ubatch=16, max_windows=2)
    toks = smollm.tokenize(text, add_special=False)
    bos = smollm.tokenizer.bos_id if smollm.tokenizer.add_bos else None
    step = 64 - (bos is not None)
    nll = []
    for w in range(2):
        window = ([bos] if bos is not None else []) + toks[w * step:(w + 1) * step]
        s = smollm.session(n_ctx=64, n_ubatch=16)
        lg = np.vstack([s.eval(window[c:c + 16], all_logits=True) for c in range(0, 64, 16)]).astype(np.float64)
        lp = lg - lg.max(1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(1, keepdims=True))
        nll += [-lp[i, window[i + 1]] for i in range(31, 63)]
    assert r.windows == 2 and r.tokens_scored == len(nll)
    assert r.perplexity == pytest.approx(math.exp(np.mean(nll)), rel=1e-9)


def test_cli_prints_perplexity_and_distance_from_bf16_for_a_lossy_cache(smollm2_path, tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text(open(GPL, encoding="utf-8").read()[:6000])
    assert cli.main([smollm2_path, str(f), "--cache", "e8", "--ctx", "256", "--windows", "1",
                     "--raw-sink", "16", "--e8-center", "block", "-t", "2"]) == 0
    out = capsys.readouterr().out
    assert "cache e8" in out and "perplexity:" in out and "top-1 agreement" in out
    ppl = float(out.split("perplexity:")[1].split()[0])
    assert 1.0 < ppl < 200.0


def test_cli_names_bad_input(smollm2_path, tmp_path, capsys):
    f = tmp_path / "short.txt"
    f.write_text("too short")
    assert cli.main([smollm2_path, str(f), "--ctx", "512"]) == 1
    assert "shorter than one window" in capsys.readouterr().err
    f.write_text(open(GPL, encoding="utf-8").read()[:6000])
    assert cli.main([smollm2_path, str(f), "--cache", "nope", "--ctx", "64", "--windows", "1"]) == 1
    assert "nope" in capsys.readouterr().err
