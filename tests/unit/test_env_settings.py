"""dftune's numeric environment variables are read by one validated reader: `inf` or `1e309` in
DFTUNE_DASK_CONNECT_S was "internal error: KeyError: 'Invalid time unit'", and `nan`, `-1`, `0`
silently became the default (the hostile round)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.core.envnum import SettingError, env_float, env_int
from dftune.tools.trace import engine, limits
from tests.cli_inproc import dftune
from tests.tracegen import Proc, write_trace

DASK = ("DFTUNE_DASK_CONNECT_S", "DFTUNE_DASK_NO_WORKERS_S", "DFTUNE_DASK_STALL_S")


@pytest.mark.parametrize("name", DASK)
@pytest.mark.parametrize("raw", ["inf", "-inf", "1e309", "nan", "-1", "0", "86401", "1e12", "ten"])
def test_a_dask_wait_that_is_no_usable_number_of_seconds_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(SettingError, match=f"^{name}='{raw}': ") as info:
        engine._limit(name, 10.0)
    assert "seconds" in str(info.value)


def test_a_dask_wait_in_range_is_taken_and_unset_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFTUNE_DASK_STALL_S", " 2.5 ")
    assert engine._limit("DFTUNE_DASK_STALL_S", 3600.0) == 2.5
    monkeypatch.setenv("DFTUNE_DASK_STALL_S", "86400")
    assert engine._limit("DFTUNE_DASK_STALL_S", 3600.0) == 86400.0
    monkeypatch.delenv("DFTUNE_DASK_STALL_S")
    assert engine._limit("DFTUNE_DASK_STALL_S", 3600.0) == 3600.0


def test_analyze_on_a_cluster_refuses_an_infinite_connect_wait_in_one_line(tmp_path: Path) -> None:
    proc = Proc(pid=1)
    proc.open("/d/a.bin")
    proc.read("/d/a.bin", 4096)
    trace = write_trace(tmp_path / "t", [proc])
    res = dftune(
        "analyze", str(trace), "--scheduler", "tcp://127.0.0.1:9", env={"DFTUNE_DASK_CONNECT_S": "inf"}
    )
    assert res.returncode == 2 and "internal error" not in res.stderr
    assert res.stderr.strip() == "dftune: error: DFTUNE_DASK_CONNECT_S='inf': not a finite number of seconds"


def test_the_trace_limits_share_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.VALUE_ENV, "inf")
    with pytest.raises(SettingError, match="DFTUNE_TRACE_MAX_VALUE='inf': not an integer"):
        limits.max_value()
    monkeypatch.setenv(limits.VALUE_ENV, "0x100000")
    assert limits.max_value() == 1 << 20


def test_the_reader_itself() -> None:
    env = "DFTUNE_TEST_NUMBER"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(env, "")
        assert env_float(env, 1.5, low=0, high=2) == 1.5 and env_int(env, 3, low=0, high=5) == 3
        mp.setenv(env, "2")
        assert env_float(env, 1.5, low=0, high=2) == 2.0 and env_int(env, 3, low=0, high=5) == 2
        with pytest.raises(SettingError, match=r"must be at least 0 and at most 1$"):
            env_float(env, 0.5, low=0, high=1)
        with pytest.raises(SettingError, match=r"must be between 3 and 5$"):
            env_int(env, 4, low=3, high=5)
