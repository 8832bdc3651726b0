"""The fault matrix, hostile inputs: what a hostile user tried against the real `dftune` command.

Hostile numbers and nesting in traces, memory bombs (peak RSS of the dftune process is measured
with ``os.wait4``), FIFOs and device links named ``*.pfw``, spec placeholders that are not plain
names, and a grandchild that ignores SIGTERM when `dftune bench` / `dftune run` is SIGKILLed.
Each case must end in a one-line error naming the file (and line) with exit code 2, or a counted,
named skip; never a crash, a silent zero or a leftover process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import pytest

from dftune.core.supervise import proc_info

pytestmark = pytest.mark.e2e

GOOD = 30


#: Runs one command and writes the peak RSS of it and the processes it waited for (KiB) to a file:
#: a wrapper of its own, so the number is that command's, never the largest of every child this test
#: process has started (RUSAGE_CHILDREN of pytest keeps the peak of earlier tests' programs).
_PEAK = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(done.returncode)\n"
)


def dftune(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak RSS in KiB) of one `dftune` command."""
    with tempfile.TemporaryDirectory(prefix="dftune-peak-") as tmp:
        peak = Path(tmp) / "peak"
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK, str(peak), sys.executable, "-m", "dftune.cli", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=timeout,
            check=False,
        )
        rss = int(peak.read_text()) if peak.exists() else 0
    return proc.returncode, proc.stdout, proc.stderr, rss


def one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("dftune: ")]
    assert len(lines) == 1 and "internal error" not in lines[0], err[-2000:]
    return lines[0]


def event(i: int) -> str:
    return json.dumps(
        {
            "id": i,
            "name": "read",
            "cat": "POSIX",
            "pid": 7,
            "tid": 7,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "ph": "X",
            "args": {"fhash": "fh", "hhash": "hh", "ret": 4096, "size": 4096},
        }
    )


def trace(path: Path, bad: str) -> Path:
    meta = json.dumps(
        {
            "id": 0,
            "name": "FH",
            "cat": "dftracer",
            "pid": 7,
            "tid": 7,
            "ph": "M",
            "args": {"name": "/data/f", "value": "fh"},
        }
    )
    path.write_text("\n".join(["[", meta, *(event(i) for i in range(1, GOOD + 1)), bad]) + "\n")
    return path


HOSTILE = {
    "ret-int64-max": event(99).replace('"ret": 4096', '"ret": 9223372036854775807'),
    "ts-int64-min": event(99).replace('"ts": 1990', '"ts": -9223372036854775808'),
    "dur-nan": event(99).replace('"dur": 5', '"dur": NaN'),
    "ts-infinity": event(99).replace('"ts": 1990', '"ts": Infinity'),
    "ret-1e30": event(99).replace('"ret": 4096', '"ret": 1e30'),
    "dur-1e308": event(99).replace('"dur": 5', '"dur": 1e308'),
    "ret-uint64-max": event(99).replace('"ret": 4096', '"ret": 18446744073709551615'),
    "nested-200000": "[" * 200_000 + "]" * 200_000,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_trace_numbers_are_named_or_counted(tmp_path: Path, case: str) -> None:
    assert HOSTILE[case] != event(99) or case.startswith("nested")
    path = trace(tmp_path / "t.pfw", HOSTILE[case])
    code, _out, err, _rss = dftune("analyze", str(path))
    assert code == 2 and one_error(err).startswith(f"dftune: error: {path}:{GOOD + 3}: "), err
    code, out, err, _rss = dftune("analyze", "--skip-bad", "--json", str(path))
    assert code == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert doc["skipped_lines"] == 1 and doc["read"]["count"] == GOOD and doc["read"]["bytes"] == GOOD * 4096


def _bomb(path: Path, size: int, filler: bytes) -> Path:
    """A .pfw.gz whose third line holds ``size`` bytes of ``filler`` inside one object."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = filler * ((1 << 20) // len(filler))
    with open(path, "wb") as fh:
        fh.write(comp.compress(f"[\n{event(1)}\n".encode() + b'{"name": "read", "ph": "X", "x": "'))
        for _ in range(size >> 20):
            fh.write(comp.compress(chunk))
        fh.write(comp.compress(f'"}}\n{event(2)}\n'.encode()))
        fh.write(comp.flush())
    return path


@pytest.mark.parametrize("filler", [b"a", b" "], ids=["letters", "blanks"])
def test_a_line_bomb_is_cut_in_bounded_memory(tmp_path: Path, filler: bytes) -> None:
    """512 MiB in one line of a ~1 MB gzip: refused by line under the 16 MiB default line limit,
    with the cut size reported, while the dftune process stays far below the line's size."""
    path = _bomb(tmp_path / "bomb.pfw.gz", 512 << 20, filler)
    assert path.stat().st_size < 4 << 20
    code, _out, err, rss_kib = dftune("analyze", str(path))
    msg = one_error(err)
    assert code == 2 and f"{path}:3: line longer than 16777216 bytes" in msg and "cut" in msg, msg
    assert rss_kib < 450 * 1024, f"peak RSS {rss_kib / 1024:.0f} MiB for a 512 MiB line"
    code, out, err, rss_kib = dftune("analyze", "--skip-bad", "--json", str(path))
    assert code == 0 and json.loads(out)["read"]["count"] == 2, err
    assert rss_kib < 450 * 1024


def test_special_files_are_skipped_by_name_or_refused(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    trace(folder / "good.pfw", event(99))
    os.mkfifo(folder / "pipe.pfw")
    (folder / "zero.pfw").symlink_to("/dev/zero")
    code, out, err, _rss = dftune("analyze", "--json", str(folder), timeout=60)
    assert code == 0, err
    reasons = {Path(s["file"]).name: s["reason"] for s in json.loads(out)["skipped"]}
    assert "FIFO" in reasons["pipe.pfw"] and "/dev/zero" in reasons["zero.pfw"], reasons
    for name in ("pipe.pfw", "zero.pfw"):
        code, _out, err, _rss = dftune("analyze", str(folder / name), timeout=60)
        assert code == 2 and "not a regular file" in one_error(err) and name in err


@pytest.mark.parametrize("placeholder", ["{}", "{ranks:0300000000d}", "{data_dir!r}"])
def test_spec_placeholders_other_than_plain_names_are_refused(tmp_path: Path, placeholder: str) -> None:
    spec = tmp_path / "w.toml"
    spec.write_text(
        f'name = "p"\ncommand = ["{{python}}", "-c", "pass", "{placeholder}"]\n[tracing]\nmode = "off"\n'
    )
    code, _out, err, rss_kib = dftune("bench", str(spec), timeout=60)
    assert code == 2 and str(spec) in one_error(err) and placeholder in err, err
    assert rss_kib < 400 * 1024


# --------------------------------------------------------------------------- a leaking grandchild

WORKLOAD = r"""
import os, signal, subprocess, sys, time
record, hold = sys.argv[1], sys.argv[2]
code = ("import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "open(os.path.join(sys.argv[1], f'gc-{os.getpid()}'), 'w').close()\n"
        "time.sleep(120)\n")
# the grandchild stays in the workload's group, ignores SIGTERM and carries no dftune tag
subprocess.Popen([sys.executable, "-c", code, record], env={"PATH": os.environ.get("PATH", "")})
while not any(n.startswith("gc-") for n in os.listdir(record)):
    time.sleep(0.01)
open(os.path.join(record, f"main-{os.getpid()}"), "w").close()
deadline = time.monotonic() + 60
while os.path.exists(hold) and time.monotonic() < deadline:
    time.sleep(0.02)
print("run_time_s 0.1")
"""


def _pid(folder: Path, kind: str, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [int(n.split("-", 1)[1]) for n in os.listdir(folder) if n.startswith(f"{kind}-")]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no {kind}-* in {folder}")


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = proc_info(pid)
        if info is None or info.state == "Z":
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("command", ["bench", "run"])
def test_sigkill_of_dftune_leaves_no_grandchild_that_ignores_sigterm(tmp_path: Path, command: str) -> None:
    rec, hold = tmp_path / "pids", tmp_path / "hold"
    rec.mkdir()
    hold.touch()
    (tmp_path / "leak.py").write_text(WORKLOAD)
    spec = tmp_path / "leak.toml"
    spec.write_text(
        f'name = "leak"\ncommand = ["{{python}}", "leak.py", "{rec}", "{hold}"]\nreplicates = 2\n'
        '[metric]\nkind = "stdout_regex"\npattern = "run_time_s ([0-9.]+)"\n[tracing]\nmode = "off"\n'
        '[[knobs]]\nname = "X"\nkind = "env"\nvalues = [1, 2]\ndefault = 1\n'
        'strategy = "l1.dataloader_workers"\n'
    )
    args = [command, str(spec)] + (["--max-experiments", "1", "--run-id", "leak"] if command == "run" else [])
    proc = subprocess.Popen(
        [sys.executable, "-m", "dftune.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    try:
        main, gc = _pid(rec, "main"), _pid(rec, "gc")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _gone(main), "the workload outlived dftune"
        assert _gone(gc), "a grandchild that ignores SIGTERM outlived dftune's SIGKILL"
    finally:
        hold.unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
