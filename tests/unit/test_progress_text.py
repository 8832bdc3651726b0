"""The progress lines of the long steps carry the counts the runner is working to, with units."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.runner.bench import Replicate
from dftune.tools.runner.progress_text import baseline_start, pair_line, replicate_line, sitting_start
from dftune.tools.runner.spec import load_spec


def _rep(i: int, metric: float | None, status: str = "ok", reason: str = "") -> Replicate:
    return Replicate(
        index=i, status=status, wall_s=metric or 0.0, exit_code=0, metric=metric, traced=True, reason=reason
    )


def test_lines_name_counts_and_units(tmp_path: Path) -> None:
    (tmp_path / "w.toml").write_text('name = "w"\ncommand = ["true"]\n')
    spec = load_spec(tmp_path / "w.toml")
    assert baseline_start(spec, 5, True).startswith("baseline: 5 replicate(s) of w traced; metric: wall time")
    assert replicate_line(spec, 2, 5, _rep(1, 1.23456)) == "baseline replicate 2/5: 1.235 s"
    assert replicate_line(spec, 3, 5, _rep(2, None, "timeout", "ran 300 s")) == (
        "baseline replicate 3/5: timeout (ran 300 s)"
    )
    assert "3 interleaved pair(s)" in sitting_start(2, "WORKERS=4", 3)
    assert "up to 6" in sitting_start(2, "WORKERS=4", 3)
    assert pair_line(spec, 2, 4, 6, _rep(3, 2.0), _rep(3, 1.5)) == (
        "opt2: pair 4/6: incumbent 2.000 s, candidate 1.500 s"
    )
