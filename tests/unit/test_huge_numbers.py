"""Integers outside what a run can store (a checkpoint keeps 64-bit numbers) are one-line errors
wherever a number is read: flags, specs, the MCP's and the KB's inputs (hostile round four:
`--max-experiments 99999999999999999999` ended in 'internal error: TypeError: Type is not msgpack
serializable' with a run left marked failed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.core.domain.kb import KbRecordIn
from dftune.tools.runner.spec import SpecError, load_spec
from tests.cli_inproc import dftune

HUGE = "99999999999999999999"


@pytest.mark.parametrize("flag", ["--max-experiments", "--replicates", "--token-budget"])
def test_a_huge_run_flag_is_refused_before_a_run_exists(tmp_path: Path, flag: str) -> None:
    spec = tmp_path / "w.toml"
    spec.write_text('name = "w"\ncommand = ["echo", "x"]\n')
    res = dftune("run", str(spec), flag, HUGE)
    assert res.returncode == 2, (res.returncode, res.stderr)
    (line,) = [x for x in res.stderr.splitlines() if x.startswith("dftune: ")]
    assert "internal error" not in line and "less than or equal to" in line
    listed = dftune("runs", "--json")
    assert '"id"' not in listed.stdout  # no run folder was made


def test_a_huge_bench_flag_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "w.toml"
    spec.write_text('name = "w"\ncommand = ["echo", "x"]\n')
    res = dftune("bench", str(spec), "--replicates", HUGE)
    assert res.returncode == 2 and "internal error" not in res.stderr


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (f"timeout_s = {HUGE}", "timeout_s"),
        ("timeout_s = inf", "timeout_s"),
        (f"replicates = {HUGE}", "replicates"),
        (f'[[knobs]]\nname = "N"\nkind = "env"\nvalues = [1, {HUGE}]\ndefault = 1', "64-bit"),
        ('[[knobs]]\nname = "N"\nkind = "env"\nvalues = [1.0, nan]\ndefault = 1.0', "finite"),
    ],
)
def test_a_huge_number_in_a_spec_is_a_one_line_error(tmp_path: Path, text: str, why: str) -> None:
    spec = tmp_path / "w.toml"
    spec.write_text(f'name = "w"\ncommand = ["echo", "x"]\n{text}\n')
    with pytest.raises(SpecError, match=why):
        load_spec(spec)


def test_a_huge_iteration_is_refused_by_the_kb_input() -> None:
    with pytest.raises(ValueError, match="less than or equal"):
        KbRecordIn(system="s", workload="w", strategy="l1.read_buffering", metric="m", iteration=int(HUGE))
