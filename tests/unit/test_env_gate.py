"""Env-gated patches: an I/O call's literal (or left-out) argument read from an environment
variable whose default is the original, so the patched program is the same program until the
variable is set. Each patched source is executed here to show it."""

from __future__ import annotations

import textwrap

from dftune.tools.runner.env_gate import gated, gates

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
