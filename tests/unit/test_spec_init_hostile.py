"""`dftune spec init` against hostile programs and files (the fourth hostile round): its --help
probe leaves no process behind and keeps a bounded output, a huge script or an alias bomb is
refused in one line, and any name or argument makes a TOML that loads."""

from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path

import pytest

from dftune.core.process import COMMAND_OUTPUT_CAP, run_command
from dftune.tools.runner.draft import DraftError, draft_spec, render_toml, run_help

LEAKY = """#!{python}
import subprocess, sys, time
if "--help" in sys.argv:
    subprocess.Popen(["sleep", "300"])
    subprocess.Popen(["sleep", "301"], start_new_session=True)
    print("usage: leaky [--threads N]", flush=True)
    time.sleep(100)
"""


def _alive(pattern: str) -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if cmd.strip() == pattern:
                out.append(int(pid))
    return out


def test_the_help_probe_leaves_no_child_behind(tmp_path: Path) -> None:
    import sys

    prog = tmp_path / "leaky"
    prog.write_text(LEAKY.format(python=sys.executable))
    prog.chmod(0o755)
    started = time.monotonic()
    text = run_help([str(prog)], tmp_path, timeout_s=1.0)
    assert time.monotonic() - started < 10  # a child holding the pipe does not keep it waiting
    assert "usage: leaky" in text
    time.sleep(0.2)
    assert _alive("sleep 300") == [] and _alive("sleep 301") == []


def test_endless_output_is_cut_not_kept(tmp_path: Path) -> None:
    res = run_command(["yes"], timeout_s=1.0, cwd=tmp_path)
    assert res.timed_out and len(res.stdout) < COMMAND_OUTPUT_CAP + 100
    assert "more bytes not kept" in res.stdout


def test_a_huge_script_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    with open(big, "wb") as fh:
        fh.write(b"# " + b"x" * (5 << 20) + b"\n")
    draft = draft_spec(["python", "big.py"], tmp_path, help_text="")
    assert any("larger than 4 MiB" in n for n in draft.notes)


def test_a_dlio_alias_bomb_is_refused_in_one_line(tmp_path: Path) -> None:
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(9))}]" for i in range(1, 40)]
    lines += ["b0: &b0 {x: 1}"] + [f"b{i}: &b{i} {{<<: *b{i - 1}, y{i}: *b{i - 1}}}" for i in range(1, 2000)]
    (tmp_path / "workload").mkdir()
    (tmp_path / "workload" / "bomb.yaml").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    with pytest.raises(DraftError, match="more than 1,000 YAML aliases"):
        draft_spec(["dlio_benchmark", "workload=bomb", "--config-dir", str(tmp_path)], tmp_path)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("arg", ["--arg=\x1b[31mred", "--note=two\nlines", 'workload=a"b'])
def test_any_name_or_argument_makes_a_spec_that_loads(tmp_path: Path, arg: str) -> None:
    script = tmp_path / 'tra"in\nx.py'
    script.write_text("print(f'x_time_s {1}')\n")
    draft = draft_spec(["python", str(script), arg], tmp_path)
    doc = tomllib.loads(render_toml(draft))
    assert doc["command"][1:] == [str(script), arg]
    from dftune.tools.runner.spec import load_spec

    (tmp_path / "s.toml").write_text(render_toml(draft))
    assert load_spec(tmp_path / "s.toml").name == "tra-in-x"


# ------------------------------------------------------------------ the fifth round
def _list_bomb(levels: int = 8) -> str:
    """Nine anchors and eighty aliases: 10**9 list items once expanded, and a key a knob sets."""
    lines = ["a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, "loader:", "  num_workers: 0", ""])


def test_a_list_alias_bomb_is_refused_when_drafted_and_when_copied(tmp_path: Path) -> None:
    from dftune.tools.runner.config_files import MAX_VALUES, ConfigFileError, dumps
    from dftune.tools.runner.spec import SpecError, load_spec

    (tmp_path / "bomb.yaml").write_text(_list_bomb())
    (tmp_path / "r.py").write_text("print('elapsed_s 1')\n")
    started = time.monotonic()
    draft = draft_spec(["python", "r.py", "--config", "bomb.yaml"], tmp_path, help_text="")
    (note,) = [n for n in draft.notes if "not drafted" in n]
    assert f"bomb.yaml: more than {MAX_VALUES:,} values" in note and "\n" not in note
    # a spec written by hand that sets its key: the copy an arm reads is refused, not expanded
    (tmp_path / "spec.toml").write_text(
        'name = "x"\ncommand = ["{python}", "r.py", "--config", "bomb.yaml"]\n'
        '[[knobs]]\nname = "W"\nkind = "config"\nfile = "bomb.yaml"\nkey = "loader.num_workers"\n'
        "values = [0, 2]\ndefault = 0\n"
    )
    with pytest.raises(SpecError, match=f"bomb.yaml: more than {MAX_VALUES:,} values"):
        spec = load_spec(tmp_path / "spec.toml")
        spec.render(spec.command, spec.settings({"W": "2"}), workdir=tmp_path / "w")
    # and the writer bounds what it expands however the tree was made (shared lists, no file)
    shared: list[object] = list(range(10))
    for _ in range(8):
        shared = [shared] * 10
    with pytest.raises(ConfigFileError, match=f"^conf.yaml: more than {MAX_VALUES:,} values"):
        dumps({"a": shared, "loader": {"num_workers": 2}}, "yaml", "conf.yaml")
    assert time.monotonic() - started < 10


LEAVES_A_SCRUBBED_SLEEP = """#!/bin/sh
setsid env -i sleep 29.1 >/dev/null 2>&1 </dev/null &
sleep 0.3
echo "usage: scrubbed [--threads N]"
"""

#: children that share its output and outlive it every way a shell can: a new session with a
#: scrubbed environment (no tag, not in the group), nohup, and one that ignores SIGTERM (their
#: sleeps are short enough that a failing run ends in half a minute, and long enough to be seen)
FORKER = """#!/bin/sh
setsid env -i sleep 29.2 &
setsid env -i sleep 29.2 &
setsid env -i sleep 29.2 &
nohup sleep 29.3 >/dev/null 2>&1 &
sh -c 'trap "" TERM; sleep 29.4' &
echo "usage: forker [--threads N]"
sleep 29.5
"""


def _script(tmp_path: Path, name: str, text: str) -> Path:
    prog = tmp_path / name
    prog.write_text(text)
    prog.chmod(0o755)
    return prog


def test_a_child_in_a_new_session_with_no_environment_does_not_outlive_the_probe(tmp_path: Path) -> None:
    prog = _script(tmp_path, "scrubbed", LEAVES_A_SCRUBBED_SLEEP)
    text = run_help([str(prog)], tmp_path, timeout_s=5.0)
    assert "usage: scrubbed" in text
    time.sleep(0.2)
    assert _alive("sleep 29.1") == []


def test_children_holding_the_probes_output_neither_hang_it_nor_outlive_it(tmp_path: Path) -> None:
    prog = _script(tmp_path, "forker", FORKER)
    started = time.monotonic()
    text = run_help([str(prog)], tmp_path, timeout_s=1.0)
    # its timeout, the grace a group that ignores SIGTERM gets (3 s), and a little more
    assert time.monotonic() - started < 1.0 + 3.0 + 4.0
    assert "usage: forker" in text
    time.sleep(0.2)
    assert [_alive(f"sleep {n}") for n in ("29.2", "29.3", "29.4", "29.5")] == [[], [], [], []]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        # parsed to a left-deep tree the parser cannot hand over (RecursionError)
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', default={})\n".format(
                "+".join(["1"] * 100_000)
            ),
            "too deeply nested to parse",
        ),
        # the parser's own stack (MemoryError)
        ("y = " + "-" * 100_000 + "lambda:" * 50_000 + "1\n", "too deeply nested to parse"),
        # parsed, but deeper than the walks that read it go (literal_eval of the default)
        (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', default={})\n".format(
                "+".join(["1"] * 1500)
            ),
            "nested deeper than 200 levels",
        ),
        ("\0\x7fELF\x01binary", "not valid Python"),
    ],
    ids=["sum-of-100k", "minus-and-lambdas", "sum-of-1500", "binary"],
)
def test_a_hostile_script_is_refused_in_one_line(tmp_path: Path, source: str, said: str) -> None:
    (tmp_path / "h.py").write_text(source)
    with pytest.raises(DraftError, match=f"^h.py: .*{said}") as caught:
        draft_spec(["python", "h.py"], tmp_path, help_text="")
    assert "\n" not in str(caught.value) and "None" not in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--n', default={})\n".format(
            "+".join(["1"] * 200_000)
        ),
        "y = " + "-" * 500_000 + "lambda:" * 50_000 + "1\n",
    ],
    ids=["sum-of-200k", "500k-minus-50k-lambdas"],
)
def test_a_script_too_large_to_parse_is_not_read(tmp_path: Path, source: str) -> None:
    """More words and symbols than the parser is given (it holds them all at once): a note, as for
    a script over 4 MiB, and its --help is read instead."""
    (tmp_path / "h.py").write_text(source)
    draft = draft_spec(
        ["python", "h.py"], tmp_path, help_text="usage: h [--threads N]\n  --threads N  pool\n"
    )
    assert any("h.py has more than 300,000 words and symbols" in n for n in draft.notes)
