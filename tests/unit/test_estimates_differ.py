"""Fixes of one checklist category get estimates of their own: each acts on the I/O its catalog
entry names (a read buffer saves nothing on writes) with the size or depth its entry recommends."""

from __future__ import annotations

import json
from pathlib import Path

from dftune.agents.optimizer.estimates import TraceFacts, estimate
from dftune.agents.optimizer.impact import lever_of
from dftune.agents.optimizer.plan import catalog_proposal
from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm
from dftune.tools.runner.spec import load_spec
from dftune.tools.trace import analyze


def _trace(tmp_path: Path) -> Path:
    """One process: 200 reads of 4 KiB from one file, then
    50 writes of 4 KiB to another, with compute between."""
    lines, ts = ["["], 1_000_000
    calls = [("open", "/d/in.bin", 3)] + [("read", "/d/in.bin", 4096)] * 200
    calls += [("open", "/d/out.bin", 4)] + [("write", "/d/out.bin", 4096)] * 50
    for i, (name, fname, ret) in enumerate(calls):
        lines.append(
            json.dumps(
                {
                    "id": str(i),
                    "name": name,
                    "cat": "POSIX",
                    "pid": "7",
                    "tid": "7",
                    "ts": str(ts),
                    "dur": "40",
                    "ph": "X",
                    "args": {"hostname": "h", "fname": fname, "ret": ret},
                }
            )
        )
        ts += 400
    path = tmp_path / "t.pfw"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_read_and_write_buffering_and_vectored_io_are_priced_apart(tmp_path: Path) -> None:
    a = analyze([_trace(tmp_path)], views=["file", "proc"], profile=True)
    facts = TraceFacts(Arm(analysis=a, data_dir="/d", work={}, label="incumbent"))
    (tmp_path / "w.toml").write_text('name = "w"\ncommand = ["true"]\n')
    spec = load_spec(tmp_path / "w.toml")
    cat = default_catalog().strategies
    pct = {}
    for sid in ("l1.read_buffering", "l1.write_buffering", "l1.vectored_io"):
        p = catalog_proposal(cat[sid], {})
        lever = lever_of(p, spec, None, cat[sid])
        pct[sid] = estimate(p.checklist, facts, lever)
    assert pct["l1.read_buffering"].reason.count("write:") == 0 and "read:" in pct["l1.read_buffering"].reason
    assert (
        pct["l1.write_buffering"].reason.count("read:") == 0 and "write:" in pct["l1.write_buffering"].reason
    )
    assert "read:" in pct["l1.vectored_io"].reason and "write:" in pct["l1.vectored_io"].reason
    values = {round(e.app_pct, 2) for e in pct.values()}
    assert len(values) == 3, pct  # three fixes, three numbers
    assert (
        pct["l1.read_buffering"].app_pct > pct["l1.write_buffering"].app_pct
    )  # 200 small reads, 50 small writes


def test_a_count_knob_lever_carries_the_counts_it_moves_between(tmp_path: Path) -> None:
    """The readers before and after, so the estimate can cap the count that results (not the step)."""
    from dftune.agents.optimizer.plan import knob_proposals
    from dftune.core.domain.measurements import Measurement

    (tmp_path / "w.toml").write_text(
        'name = "w"\ncommand = ["true", "{THREADS}", "{PREFETCH}"]\n'
        '[[knobs]]\nname = "THREADS"\nkind = "arg"\nvalues = [1, 2, 4]\ndefault = 1\n'
        'strategy = "l1.dataloader_workers"\n'
        '[[knobs]]\nname = "PREFETCH"\nkind = "arg"\nvalues = [0, 2]\ndefault = 0\n'
        'strategy = "l1.background_prefetch"\n'
    )
    spec = load_spec(tmp_path / "w.toml")
    cat = default_catalog()
    props = {p.id: p for p in knob_proposals(spec, cat)}
    incumbent = Measurement(
        settings={"THREADS": 2, "PREFETCH": 0},
        values=[1.0],
        median=1.0,
        ci95=None,
        ok=1,
        replicates=1,
        traced=False,
        workdir=str(tmp_path),
    )
    four = next(p for pid, p in props.items() if "THREADS" in p.change.settings and "4" in pid)
    prefetch = next(p for p in props.values() if "PREFETCH" in p.change.settings)
    assert lever_of(four, spec, incumbent).counts == (2, 4)
    assert lever_of(four, spec, None).counts == (1, 4)
    assert lever_of(prefetch, spec, incumbent).counts == (1, 3)  # none in flight: the caller serves
