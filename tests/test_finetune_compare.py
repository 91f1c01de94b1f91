"""`python -m finetune.compare`: runs against a control with Welch's t-test, and baseline rows
(the command itself and its bad input: tests/integration/test_finetune_cli.py)."""

import json
import math

import pytest
from scipy import stats
from support.finetune import write_run

from albert_jax.finetune import compare


def _welch_by_hand(a, b):
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se2 = va / len(a) + vb / len(b)
    t = (ma - mb) / math.sqrt(se2)
    df = se2**2 / ((va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1))
    return t, 2 * stats.t.sf(abs(t), df)


def test_rows_against_the_random_init_control(tmp_path, capsys):
    pre = write_run(tmp_path, "pre", [0.86, 0.87, 0.85], [0.85, 0.88, 0.86],
               lr_search={"chosen": 1e-4})  # fmt: skip
    rnd = write_run(tmp_path, "rnd", [0.80, 0.79, 0.81], [0.79, 0.80, 0.82], random_init=True,
               lr_search={"chosen": 3e-4, "fallback": True})  # fmt: skip
    summary = json.loads((tmp_path / "rnd" / "summary.json").read_text())
    summary["per_seed"]["1"]["test"]["collapsed"] = 1.0  # seed 1 predicted one class on test
    (tmp_path / "rnd" / "summary.json").write_text(json.dumps(summary))
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({
        "task": "sentiment",
        "dev": {"accuracy": 0.85}, "test": {"accuracy": 0.83},
        "majority_class": {"label": "neg", "dev": {"accuracy": 0.52}, "test": {"accuracy": 0.51}},
    }))  # fmt: skip
    rows = compare.main([pre, rnd, "--baseline", str(base), "--json", str(tmp_path / "o.json")])
    # The random-init run is the control by default; the pretrained row is tested against it.
    by = {r["run"]: r for r in rows}
    assert "p" not in by[rnd]
    t, p = _welch_by_hand([0.85, 0.88, 0.86], [0.79, 0.80, 0.82])
    assert by[pre]["t"] == pytest.approx(t) and by[pre]["p"] == pytest.approx(p)
    assert by[pre]["diff"] == pytest.approx(0.06)
    assert by[pre]["test_std"] == pytest.approx(0.015275, abs=1e-6)
    out = capsys.readouterr().out
    assert f"| {pre} | pretrained (all) | 0.0001 (searched) | 3 | 0 | 86.00 ± 1.00 | 86.33" in out
    assert f"| {rnd} | random | 0.0003 (fallback) | 3 | 1 | 80.00 ± 1.00 |" in out
    assert by[rnd]["collapsed"] == [1]
    assert f"+6.00 | {t:.2f} | {p:.3g} |" in out
    assert "| non-neural baseline | | | | | 85.00 | 83.00 |" in out
    assert "| majority class (neg) | | | | | 52.00 | 51.00 |" in out
    assert json.loads((tmp_path / "o.json").read_text())["rows"][0]["run"] == pre
