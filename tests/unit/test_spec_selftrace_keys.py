"""Spec keys for self-tracing programs: [tracing] output, {trace_dir}, app_python / {app_python}."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dftune.tools.runner.spec import SpecError, load_spec


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "w.toml"
    p.write_text('name = "x"\n' + body)
    return p


def test_output_accepts_one_path_or_a_list(tmp_path: Path) -> None:
    one = load_spec(_write(tmp_path, 'command = ["a"]\n[tracing]\noutput = "{trace_dir}"\n'))
    assert one.tracing.output == ["{trace_dir}"]
    many = load_spec(_write(tmp_path, 'command = ["a"]\n[tracing]\noutput = ["out/*.pfw", "{workdir}/o"]\n'))
    assert many.tracing.output == ["out/*.pfw", "{workdir}/o"]


def test_output_placeholders_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"tracing.output: placeholder \{nope\}"):
        load_spec(_write(tmp_path, 'command = ["a"]\n[tracing]\noutput = "{nope}/x"\n'))


def test_trace_dir_and_app_python_render(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    spec = load_spec(
        _write(tmp_path, 'app_python = "venv"\ncommand = ["{app_python}", "-m", "x", "{trace_dir}"]\n')
    )
    argv = spec.render(spec.command, {}, workdir=tmp_path / "wd", trace_dir=tmp_path / "wd" / "r3")
    assert argv == [str(venv / "bin" / "python"), "-m", "x", str(tmp_path / "wd" / "r3")]
    plain = load_spec(_write(tmp_path, 'command = ["{app_python}", "{trace_dir}"]\n'))
    assert plain.render(plain.command, {}, workdir=tmp_path)[0] == sys.executable


def test_knob_cannot_be_named_like_the_new_placeholders(tmp_path: Path) -> None:
    body = (
        'command = ["a", "{trace_dir}"]\n[[knobs]]\n'
        'name = "trace_dir"\nkind = "env"\nvalues = [1]\ndefault = 1\n'
    )
    with pytest.raises(SpecError, match="clash with built-in placeholders"):
        load_spec(_write(tmp_path, body))
