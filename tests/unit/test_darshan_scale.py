"""A log of 512 processes and 512,000 per-rank file records (written by libdarshan-util's own writer,
benchmarks/gen_darshan_log.py) is analyzed in seconds, and exactly."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from dftune.tools.trace import analyze
from dftune.tools.trace.darshan.reader import read_log
from tests.darshan_logs import shipped

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_darshan_log import build

RANKS, FILES = 512, 1000


def test_500_processes_and_a_thousand_files_each_in_seconds(tmp_path: Path) -> None:
    log = tmp_path / "big.darshan"
    build(log, RANKS, FILES)
    t = time.perf_counter()
    a = analyze([log], views=["file", "proc"])
    took = time.perf_counter() - t
    src = read_log(shipped("sample-badost.darshan")).tables["POSIX"]
    take = np.arange(RANKS * FILES) % len(src)
    assert a.processes == RANKS and a.files_accessed == RANKS * FILES
    assert a.write.count == int(np.clip(src.c("POSIX_WRITES")[take], 0, None).sum())
    assert a.write.bytes == int(src.c("POSIX_BYTES_WRITTEN")[take].sum())
    assert a.views["proc"]["total"] == RANKS and a.views["file"]["total"] == RANKS * FILES
    assert took < 60, f"{took:.1f} s"  # about 3 s on the 2-core development machine (benchmarks/README.md)
