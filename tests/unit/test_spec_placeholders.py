"""Spec placeholders: only plain ``{name}`` is valid, refused at load with the file named.

``{}`` once passed validation and crashed ``bench`` with IndexError; ``{ranks:0300000000d}`` took
1 GB of memory and failed at exec with E2BIG; ``{data_dir!r}`` handed the program a Python repr.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.runner.spec import SpecError, fill_placeholders, load_spec, placeholder_problem

SPEC = """
name = "demo"
command = ["{python}", "app.py", "--data", "{data_dir}", "--workers", "{READERS}", "EXTRA"]
data_dir = "{workdir}/data"
[[knobs]]
name = "READERS"
kind = "arg"
values = [1, 2]
default = 1
"""


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("{}", "empty placeholder {}"),
        ("{ranks:0300000000d}", "{ranks:0300000000d} is not a plain {name}"),
        ("{data_dir!r}", "{data_dir!r} is not a plain {name}"),
        ("{python.__class__}", "{python.__class__} is not a plain {name}"),
        ("{READERS[0]}", "is not a plain {name}"),
        ("{0}", "{0} is not a plain {name}"),
        ("{unclosed", "not a valid placeholder template"),
    ],
)
def test_only_plain_placeholders_load(tmp_path: Path, extra: str, needle: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(SPEC.replace("EXTRA", extra.replace("\\", "\\\\")))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert str(path) in msg and needle in msg and "command" in msg and "\n" not in msg, msg


def test_plain_placeholders_and_literal_braces_still_render(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(SPEC.replace("EXTRA", "{{literal}}-{READERS}"))
    spec = load_spec(path)
    argv = spec.render(spec.command, spec.settings({"READERS": "2"}), workdir=tmp_path)
    assert argv[-1] == "{literal}-2" and argv[-2] == "2" and argv[3] == str(tmp_path / "data")
    assert placeholder_problem("{a}-{b_c}-{d-e}") is None
    assert fill_placeholders("{a:>9}", {"a": 1}) == "1"  # never the format mini-language
