"""Optional extras: a command that needs one that is not installed says which, in one line."""

from __future__ import annotations

import sys

import pytest

from dftune.core.extras import MissingExtra, require
from tests.cli_inproc import dftune
from tests.darshan_logs import shipped


def test_require_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    require("json", "none", "anything")  # present: nothing happens
    monkeypatch.setitem(sys.modules, "darshan", None)  # what an uninstalled package looks like to import
    with pytest.raises(MissingExtra, match=r"pip install 'dftune\[darshan\]'"):
        require("darshan", "darshan", "reading Darshan logs")


def test_a_darshan_log_without_pydarshan_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "darshan" or m.startswith("darshan.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "darshan", None)
    res = dftune("analyze", str(shipped("ior_hdf5_example.darshan")))
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "dftune[darshan]" in res.stderr, res.stderr


def test_the_mcp_server_without_the_sdk_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    res = dftune("mcp")
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "dftune[mcp]" in res.stderr, res.stderr
