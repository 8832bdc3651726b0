"""The spec's page_cache: "cold" (the default) drops the cache where permitted, "warm" never does.

Dropping the page cache is machine-wide (every process re-reads its files afterwards), so a spec
for a program whose data is cache-resident in production, or a node others share, asks for a warm
cache: dftune then never writes /proc/sys/vm/drop_caches and runs one warm-up run first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.runner import bench as bench_mod
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import SpecError, load_spec


def _spec(tmp_path: Path, page_cache: str | None) -> Path:
    (tmp_path / "app.py").write_text("print('run_time_s 0.01')\n")
    line = f'page_cache = "{page_cache}"\n' if page_cache is not None else ""
    spec = tmp_path / "workload.toml"
    spec.write_text(
        f'name = "cache"\ncommand = ["{{python}}", "app.py"]\nreplicates = 2\n{line}'
        '[metric]\nkind = "stdout_regex"\npattern = \'run_time_s ([0-9.]+)\'\n[tracing]\nmode = "off"\n'
    )
    return spec


def test_a_warm_spec_never_drops_the_cache_and_warms_up_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drops: list[int] = []
    monkeypatch.setattr(bench_mod, "drop_page_cache", lambda: drops.append(1) or True)
    result = bench(load_spec(_spec(tmp_path, "warm")), trace=False, workdir=tmp_path / "work")
    assert result.ok == 2 and result.cache_policy == "warm_up" and drops == []
    assert any("kept warm (the spec's page_cache)" in n for n in result.notes), result.notes
    assert (tmp_path / "work" / "logs" / "warmup.out").is_file()


def test_a_cold_spec_drops_before_every_replicate_where_permitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drops: list[int] = []
    monkeypatch.setattr(bench_mod, "drop_page_cache", lambda: drops.append(1) or True)
    result = bench(load_spec(_spec(tmp_path, None)), trace=False, workdir=tmp_path / "work")
    assert result.ok == 2 and result.cache_policy == "drop_caches" and len(drops) == 2
    assert not (tmp_path / "work" / "logs" / "warmup.out").exists()


def test_an_unknown_page_cache_value_names_the_file_and_the_key(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "lukewarm")
    with pytest.raises(SpecError, match=r"workload\.toml: .*page_cache"):
        load_spec(spec)


def test_a_later_call_into_the_same_folder_is_not_warmed_again(tmp_path: Path) -> None:
    """A campaign's baseline units are one-replicate calls into one workdir: one warm-up in all,
    and its time is the first call's prepare_s (what the deadline's unit estimate leaves out)."""
    spec = load_spec(_spec(tmp_path, "warm"))
    first = bench(spec, replicates=1, trace=False, workdir=tmp_path / "work")
    second = bench(spec, replicates=1, first_index=1, trace=False, workdir=tmp_path / "work")
    assert first.prepare_s > 0 and any("one untraced warm-up run first" in n for n in first.notes)
    assert any("warmed by an earlier run in this folder" in n for n in second.notes), second.notes
    assert second.prepare_s < first.prepare_s
    assert len(list((tmp_path / "work" / "logs").glob("warmup*.out"))) == 1


def test_a_deadlines_unit_estimate_leaves_out_the_first_units_warm_up(tmp_path: Path) -> None:
    from dftune.tools.runner.units import BaselineUnits

    (tmp_path / "app.py").write_text("import time\ntime.sleep(0.4)\nprint('run_time_s 0.4')\n")
    spec = tmp_path / "workload.toml"
    spec.write_text(
        'name = "slowish"\ncommand = ["{python}", "app.py"]\nreplicates = 2\npage_cache = "warm"\n'
        '[metric]\nkind = "stdout_regex"\npattern = \'run_time_s ([0-9.]+)\'\n[tracing]\nmode = "off"\n'
    )
    units = BaselineUnits(load_spec(spec), tmp_path / "work", 2, traced=False, lane="t", min_ok=2)
    units.start()
    assert units.wait_ready().ok == 2
    records = list(units._records.values())
    first = next(r for r in records if r.bench.prepare_s > 0)  # the one that warmed the folder up
    assert first.bench.prepare_s >= 0.4 and first.elapsed_s >= 0.8
    estimate = units.estimate_s()
    assert estimate is not None and estimate < 1.1 * first.elapsed_s + 0.5
    assert estimate == 1.1 * max(r.elapsed_s - r.bench.prepare_s for r in records) + 0.5
