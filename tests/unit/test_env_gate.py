"""Env-gated patches: an I/O call's literal (or left-out) argument read from an environment
variable whose default is the original, so the patched program is the same program until the
variable is set. Each patched source is executed here to show it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from dftune.tools.runner.env_gate import gated, gates, read_only_by_calls

LOOP = """
from torch.utils.data import DataLoader
loader = DataLoader(ds, batch_size=8, num_workers=2, pin_memory=False)
"""


class _Recorder:
    """Stands in for the callee: records the arguments it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def __call__(self, *args: object, **kw: object) -> dict[str, object]:
        self.calls.append({"args": args, **kw})
        return kw


def _run(source: str, env: dict[str, str], names: dict[str, object]) -> None:
    import os

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        exec(compile(source, "prog.py", "exec"), {"__name__": "prog", **names})
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_literal_arguments_become_variables_with_the_original_as_default() -> None:
    source = textwrap.dedent(LOOP).replace("from torch.utils.data import DataLoader\n", "")
    found = gates(source, "loop.py")
    by = {g.site.keyword: g for g in found}
    assert set(by) >= {"num_workers", "pin_memory"}
    assert by["num_workers"].variable == "DFTUNE_NUM_WORKERS" and by["num_workers"].default == 2
    assert by["pin_memory"].default is False
    src = gated(source, found)
    rec = _Recorder()
    _run(src, {}, {"DataLoader": rec, "ds": None})
    assert rec.calls[-1]["num_workers"] == 2 and rec.calls[-1]["pin_memory"] is False
    _run(src, {"DFTUNE_NUM_WORKERS": "4", "DFTUNE_PIN_MEMORY": "1"}, {"DataLoader": rec, "ds": None})
    assert rec.calls[-1]["num_workers"] == 4 and rec.calls[-1]["pin_memory"] is True


def test_a_left_out_argument_is_added_around_the_documented_default() -> None:
    source = 'import h5py\nf = h5py.File(\n    "x.h5",\n    "r",\n)\ng = h5py.File("y.h5")  # é\n'
    found = gates(source, "a.py")
    names = sorted(g.variable for g in found)
    # both files' caches at the same default: one variable sets both (one knob per setting)
    assert names.count("DFTUNE_RDCC_NBYTES") == 2 and "DFTUNE_RDCC_NBYTES_2" not in names
    src = gated(source, found).replace("import h5py\n", "")
    rec = _Recorder()

    class H5:
        File = rec

    _run(src, {}, {"h5py": H5})
    assert [c["rdcc_nbytes"] for c in rec.calls] == [1048576, 1048576]
    assert rec.calls[0]["args"] == ("x.h5", "r")
    _run(src, {"DFTUNE_RDCC_NBYTES": "67108864"}, {"h5py": H5})
    assert [c["rdcc_nbytes"] for c in rec.calls[2:]] == [67108864, 67108864]


def test_options_expressions_and_kwargs_are_not_gated() -> None:
    source = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "a = None\n"
        "ThreadPoolExecutor(max_workers=a.threads)\n"
        "ThreadPoolExecutor(**opts)\n"
        "open(p, 'rb', buffering=2 if big else 0)\n"
    )
    assert gates(source, "p.py") == []
    assert gates("def broken(:\n", "p.py") == []


H5 = """
import h5py
with h5py.File(path, "r") as f:
    rows = f["x"][:]
"""


def _patched(tmp_path: Path, source: str, extra: str = "") -> Path:
    tree = tmp_path / "copy"
    tree.mkdir(parents=True)
    found = gates(textwrap.dedent(source), "prog.py")
    (tree / "prog.py").write_text(gated(textwrap.dedent(source), found) + extra)
    return tree


def test_a_variable_only_the_patch_reads_is_shown_to_reach_only_the_call(tmp_path: Path) -> None:
    tree = _patched(tmp_path, H5)
    why = read_only_by_calls(tree, ["DFTUNE_RDCC_NBYTES"])
    assert why is not None and "DFTUNE_RDCC_NBYTES at prog.py:3" in why
    assert "the program's own code never reads it" in why
    # the variable the patch wrote beside it is no mention of this one
    assert read_only_by_calls(tree, ["DFTUNE_RDCC_NBYTES", "DFTUNE_RDCC_NSLOTS"]) is not None


def test_a_program_that_reads_the_variable_itself_shows_nothing(tmp_path: Path) -> None:
    reads = "import os\npasses = 1 if os.environ.get('DFTUNE_RDCC_NBYTES') else 2\n"
    assert read_only_by_calls(_patched(tmp_path / "a", H5, reads), ["DFTUNE_RDCC_NBYTES"]) is None
    # named in a comment or a longer text: not shown either (nothing is guessed)
    said = "# DFTUNE_RDCC_NBYTES decides the passes\n"
    assert read_only_by_calls(_patched(tmp_path / "b", H5, said), ["DFTUNE_RDCC_NBYTES"]) is None
    # a variable the tree never mentions, or a file that does not parse
    assert read_only_by_calls(_patched(tmp_path / "c", H5), ["DFTUNE_OTHER"]) is None
    broken = _patched(tmp_path / "d", H5)
    (broken / "helper.py").write_text("x = 'DFTUNE_RDCC_NBYTES' +\n")
    assert read_only_by_calls(broken, ["DFTUNE_RDCC_NBYTES"]) is None
