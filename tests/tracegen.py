"""Small, exact dftracer 2.x traces written by tests: one file per process, as dftracer writes them.

A :class:`Proc` collects events; ``read``/``write`` take explicit offsets (pread/pwrite) or
advance a stream position after ``open``; ``app`` logs an application-level event with an
optional ``size``. Timestamps advance by themselves so the order is the call order.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Proc:
    pid: int
    host: str = "aa"
    #: the thread (dftracer's ``tid``); None: the process's main thread (tid = pid)
    tid: int | None = None
    ts: int = 1_000
    lines: list[str] = field(default_factory=list)
    _fh: dict[str, str] = field(default_factory=dict)

    def _meta(self, kind: str, name: str, value: str) -> None:
        self.lines.append(
            json.dumps(
                {
                    "name": kind,
                    "cat": "dftracer",
                    "type": 1,
                    "pid": self.pid,
                    "tid": self.pid,
                    "ph": 4,
                    "args": {"hhash": self.host, "name": name, "value": value},
                }
            )
        )

    def _fhash(self, path: str) -> str:
        if path not in self._fh:
            self._fh[path] = f"{abs(hash(path)) & 0xFFFFFFFFFFFF:012x}"
            self._meta("FH", path, self._fh[path])
        return self._fh[path]

    def event(self, name: str, cat: str = "POSIX", dur: int = 5, **args: object) -> None:
        self.lines.append(
            json.dumps(
                {
                    "id": len(self.lines),
                    "name": name,
                    "cat": cat,
                    "type": 3,
                    "pid": self.pid,
                    "tid": self.tid or self.pid,
                    "ts": self.ts,
                    "dur": dur,
                    "ph": 1,
                    "args": {"hhash": self.host, **args},
                }
            )
        )
        self.ts += dur + 5

    def open(self, path: str) -> None:
        self.event("open64", fhash=self._fhash(path), flags=0)

    def close(self, path: str) -> None:
        self.event("close", fhash=self._fhash(path), ret=0)

    def read(self, path: str, nbytes: int, offset: int | None = None, dur: int = 5) -> None:
        if offset is None:
            self.event("read", dur=dur, fhash=self._fhash(path), ret=nbytes, count=nbytes)
        else:
            self.event("pread64", dur=dur, fhash=self._fhash(path), ret=nbytes, count=nbytes, offset=offset)

    def write(self, path: str, nbytes: int, offset: int | None = None, dur: int = 5) -> None:
        if offset is None:
            self.event("write", dur=dur, fhash=self._fhash(path), ret=nbytes, count=nbytes)
        else:
            self.event("pwrite64", dur=dur, fhash=self._fhash(path), ret=nbytes, count=nbytes, offset=offset)

    def app(self, name: str, size: int | None = None, dur: int = 5) -> None:
        self.event(name, cat="APP", dur=dur, **({"size": size} if size is not None else {}))

    def compute(self, dur: int) -> None:
        self.event("compute", cat="compute", dur=dur)


def write_trace(folder: Path, procs: list[Proc]) -> Path:
    """One ``.pfw.gz`` per process under ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    for p in procs:
        name = f"{p.pid}" if p.tid is None else f"{p.pid}-{p.tid}"
        with gzip.open(folder / f"trace-{name}-app.pfw.gz", "wt") as fh:
            fh.write("\n".join(p.lines) + "\n")
    return folder
