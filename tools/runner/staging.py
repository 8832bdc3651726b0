"""Stage a read-mostly data set onto a faster tier for every replicate, and copy outputs back.

A staged replicate is honest only when the copy is part of what is measured: each replicate of a
staged arm copies the workload's ``data_dir`` to a fresh folder on the tier (``/dev/shm``, or a
node-local disk folder), runs the program with ``{data_dir}`` pointing at the copy, copies the
outputs back and removes the copy. The copy-in and copy-back seconds belong to the replicate
(:func:`adjusted_metric`). This is the stage-in / stage-out of burst buffers and node-local
tiers (DataWarp, Rabbit ``#DW``), done per run rather than once.

- **Outputs** are the data files (core/facts/paths.py) new or changed (size or modification
  time) under the staged copy after the run; they are copied to the same relative path under
  the original ``data_dir`` by :mod:`~dftune.tools.runner.copy_back` (never through a link the
  folder holds, never outside it, holes kept, special files skipped with a note; an output that
  cannot be copied keeps the copy, named with the command that recovers it).
  Files the program deleted in the copy are not deleted in the original. A copy whose folder the
  program replaced with a link gives nothing back (the link's target is not its output): the
  replicate fails and the copy is kept for a person to look at.
- **Special files** (FIFOs, sockets, devices) of the data folder are not staged, with a note:
  never opened (a FIFO would block the copy forever).
- **Every run of a staged arm is staged**, its warm-up run included.
- **Memory bound**: ``/dev/shm`` is memory. A data set is staged there only when it fits in
  ``shm_share`` (20%, the node-memory share node-local tier guides give tmpfs) of ``MemTotal``,
  in ``MemAvailable`` and in the free space of ``/dev/shm``, all measured now (:func:`room_for`).
- **Clean-up**: the copy is removed when the replicate ends, fails or times out; the guardian
  (:mod:`dftune.core.guardian`) removes it when dftune is killed (SIGKILL included); and
  :func:`remove_stale` removes copies whose dftune process is gone before the next copy is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from dftune.core.domain.measurements import StagePlan
from dftune.core.errors import DftuneError, os_error_line
from dftune.core.facts.paths import PathClass, RunPaths, classify
from dftune.core.supervise import GUARDIAN, proc_info
from dftune.tools.runner.copy_back import copy_back, sparse_copy, special_kind

#: Staged copies are folders named so under the tier's root, with this marker inside.
STAGE_PREFIX = "dftune-stage-"
#: a staged copy kept because an output could not be copied back (never removed as stale)
KEPT_PREFIX = "dftune-kept-"
MARKER = ".dftune-stage.json"
MEMINFO = Path("/proc/meminfo")

Copier = Callable[[str, str], object]


class StagingError(DftuneError):
    """The data set cannot be staged (does not fit, missing, same tier): one line with the reason."""


def plan_for(tier: str, local_dir: Path | None) -> StagePlan:
    """The stage plan a person asks for: ``shm`` (/dev/shm) or ``local`` (the spec's local_dir)."""
    if tier == "shm":
        return StagePlan(tier="shm")
    if tier == "local":
        if local_dir is None:
            raise StagingError("staging to a local folder needs [staging] local_dir in the workload spec")
        return StagePlan(tier="local", root=str(local_dir))
    raise StagingError(f"unknown staging tier {tier!r} (shm | local)")


# --------------------------------------------------------------------------- sizes and the bound


def tree_size(path: Path) -> tuple[int, int]:
    """Bytes and files under ``path`` (symbolic links are not followed)."""
    total = files = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            with suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
    return total, files


def meminfo(path: Path = MEMINFO) -> dict[str, int]:
    """``/proc/meminfo`` in bytes (``MemTotal``, ``MemAvailable``, ...); empty when unreadable."""
    out: dict[str, int] = {}
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return out


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def room_for(
    size: int, plan: StagePlan, *, memory: dict[str, int] | None = None, free: int | None = None
) -> str:
    """Why a data set of ``size`` bytes cannot be staged under ``plan`` ("" when it fits).

    Measured, not declared: ``MemTotal`` and ``MemAvailable`` from ``/proc/meminfo`` and the
    free space of the tier's root (``memory`` and ``free`` are for tests)."""
    root = Path(plan.root)
    if free is None:
        try:
            free = free_bytes(root)
        except OSError as exc:
            return f"staging folder {root} is not usable: {exc.strerror or exc}"
    if size > free:
        return f"the data set ({_gib(size)}) does not fit in the {_gib(free)} free in {root}"
    if plan.tier != "shm":
        return ""
    mem = meminfo() if memory is None else memory
    total, available = mem.get("MemTotal"), mem.get("MemAvailable")
    if not total or available is None:
        return "node memory unknown (/proc/meminfo has no MemTotal/MemAvailable): /dev/shm not used"
    bound = int(plan.shm_share * total)
    if size > bound:
        return (
            f"the data set ({_gib(size)}) exceeds {100 * plan.shm_share:.0f}% of node memory "
            f"({_gib(bound)} of {_gib(total)}): /dev/shm is memory"
        )
    if size > available:
        return f"the data set ({_gib(size)}) exceeds the memory available now ({_gib(available)})"
    return ""


def same_device(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def check_plan(data_dir: Path, plan: StagePlan) -> str:
    """Why ``data_dir`` cannot be staged under ``plan`` ("" when it can): it must exist, lie on
    another filesystem than the tier, and fit (:func:`room_for`)."""
    if not data_dir.is_dir():
        return f"data folder {data_dir} does not exist (nothing to stage)"
    root = Path(plan.root)
    if not root.is_dir():
        return f"staging folder {root} does not exist"
    if same_device(data_dir, root):
        return f"{data_dir} already lies on the filesystem of {root}: staging would not change the tier"
    size, _ = tree_size(data_dir)
    return room_for(size, plan)


# --------------------------------------------------------------------------- stale copies


def _alive(pid: int, start: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.start == start and info.state != "Z"


def remove_stale(root: Path) -> list[str]:
    """Remove staged copies under ``root`` whose dftune process is gone (killed before it could).
    Without ``/proc`` no process can be told alive, so nothing is removed."""
    removed: list[str] = []
    if proc_info(os.getpid()) is None:
        return removed
    with suppress(OSError):
        for entry in root.iterdir():
            if not entry.name.startswith(STAGE_PREFIX) or entry.is_symlink() or not entry.is_dir():
                continue
            try:
                mark = json.loads((entry / MARKER).read_text(encoding="utf-8"))
                pid, start = int(mark["pid"]), int(mark["start"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours, or being written: left alone
            if not _alive(pid, start):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(str(entry))
    return removed


# --------------------------------------------------------------------------- one staged replicate


def stage_home(plan: StagePlan, arm_key: str) -> Path:
    """The arm's staging folder: the same path for every replicate of the arm (each gets it fresh),
    so the guards can map the traced paths of any replicate back to ``data_dir``."""
    digest = hashlib.sha1(arm_key.encode("utf-8")).hexdigest()[:12]
    return Path(os.path.abspath(plan.root)) / f"{STAGE_PREFIX}{os.getpid()}-{digest}"


def staged_path(plan: StagePlan, arm_key: str, data_dir: Path) -> Path:
    """Where ``data_dir`` is copied for the arm ``arm_key``."""
    return stage_home(plan, arm_key) / (data_dir.name or "data")


Snapshot = dict[str, tuple[int, int]]


def snapshot(root: Path) -> Snapshot:
    """Relative path -> (size, mtime_ns) of every file under ``root`` that is not a link (a FIFO
    or socket the program made is listed too, so copying back can say it left it). No link is
    followed, ``root`` included: a root that is a link lists nothing."""
    out: Snapshot = {}
    for dirpath, _dirs, names, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in names:
            with suppress(OSError):
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def not_a_folder(path: Path) -> str:
    """What ``path`` is when it is no longer a real folder ("a link", "a file"; "" for a folder or
    nothing there), looked at without following a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return ""
    return special_kind(mode) or "a file"


def output_class(path: str, run: RunPaths) -> PathClass:
    """What a file the run left in its staged copy is (core/facts/paths.py, the copy being the run's
    data folder): only the program's data is copied back, not the byte-code caches or launchers'
    per-job files a run may leave beside it."""
    return classify(path, run)


def outputs(before: Snapshot, after: Snapshot, copy: Path) -> list[str]:
    """Data files new or changed (size or modification time) since ``before``: the run's outputs."""
    run = RunPaths.of(str(copy))
    changed = (rel for rel, sig in after.items() if before.get(rel) != sig)
    return sorted(rel for rel in changed if output_class(str(copy / rel), run).is_data)


@dataclass
class Staged:
    """One replicate's staged copy and the seconds spent moving data."""

    origin: Path
    path: Path
    home: Path
    stage_in_s: float = 0.0
    copy_back_s: float = 0.0
    bytes_in: int = 0
    files_in: int = 0
    outputs: list[str] = field(default_factory=list)
    removed_stale: list[str] = field(default_factory=list)
    #: what copying back met that a person should know (special files left, links replaced)
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.stage_in_s + self.copy_back_s


def _skip_special(origin: Path, skipped: list[tuple[str, str]]) -> Callable[[str, list[str]], set[str]]:
    """A copytree ``ignore`` leaving out the special files of the data folder (recorded, never opened)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        out: set[str] = set()
        for name in names:
            try:
                mode = os.lstat(os.path.join(folder, name)).st_mode
            except OSError:
                continue  # the copy says what is wrong with it
            if stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or stat.S_ISREG(mode):
                continue
            skipped.append((os.path.relpath(os.path.join(folder, name), origin), special_kind(mode) or "?"))
            out.add(name)
        return out

    return ignore


def _skipped_note(origin: Path, skipped: list[tuple[str, str]]) -> str:
    rel, kind = skipped[0]
    more = f" (and {len(skipped) - 1} more special file(s))" if len(skipped) > 1 else ""
    return f"{rel} in {origin} is {kind}{more}: not staged, never opened"


def _keep(home: Path) -> Path:
    """Rename a staged copy's folder out of the stale copies' reach, for a person to recover from;
    each replicate of the arm that keeps one gets its own (``-2``, ``-3``, ...)."""
    base = home.name.replace(STAGE_PREFIX, KEPT_PREFIX, 1)
    kept = home.with_name(base)
    n = 1
    while os.path.lexists(kept):
        n += 1
        kept = home.with_name(f"{base}-{n}")
    (home / MARKER).unlink(missing_ok=True)
    home.rename(kept)
    return kept


def _refuse_replaced(home: Path, copy: Path, data_dir: Path) -> None:
    """Fail the replicate when the program replaced its staged data folder (or the folder holding
    it) with a link or a file: what lies behind a link is not its output, so nothing is copied
    back, and the staged copy is kept for a person to recover the outputs from."""
    what = not_a_folder(home)
    if what:
        raise StagingError(
            f"the program replaced the folder of its staged data {home} with {what}: "
            f"nothing was copied back to {data_dir}"
        )
    what = not_a_folder(copy)
    if what:
        kept = _keep(home)
        raise StagingError(
            f"the program replaced its data folder {copy} with {what}: nothing was copied back to "
            f"{data_dir}; the staged copy is kept in {kept}: recover outputs with cp -a --sparse=always "
            f"{kept}/<path> {data_dir}/<path>"
        )


def _mark(home: Path, origin: Path) -> None:
    info = proc_info(os.getpid())
    mark = {"pid": os.getpid(), "start": info.start if info else 0, "origin": str(origin)}
    (home / MARKER).write_text(json.dumps(mark), encoding="utf-8")


@contextmanager
def staged_replicate(
    data_dir: Path, plan: StagePlan, arm_key: str, *, copier: Copier = sparse_copy
) -> Iterator[Staged]:
    """Copy ``data_dir`` to the tier, yield the copy, then copy outputs back and remove the copy.

    Outputs go back by :func:`~dftune.tools.runner.copy_back.copy_back` (never through a link,
    never outside the folder, one failure stopping none of the others). The copy is removed
    whatever happens (a failed or timed-out run, an exception; the guardian removes it if dftune
    is killed), except when an output could not be copied back: then it is kept, renamed out of
    the stale copies' reach, and :class:`StagingError` names it and the command that recovers
    the outputs. ``copier`` copies one file (holes stay holes)."""
    problem = check_plan(data_dir, plan)
    if problem:
        raise StagingError(f"cannot stage {data_dir}: {problem}")
    stale = remove_stale(Path(plan.root))
    home = stage_home(plan, arm_key)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    copy = staged_path(plan, arm_key, data_dir)
    staged = Staged(origin=data_dir, path=copy, home=home, removed_stale=stale)
    watched = False
    try:
        _mark(home, data_dir)  # before the guardian hears of it: it removes only marked folders
        if "\n" not in str(home):
            GUARDIAN.watch_dir(str(home))
            watched = True
        t0 = time.perf_counter()
        skipped: list[tuple[str, str]] = []
        try:
            shutil.copytree(
                data_dir,
                staged.path,
                symlinks=True,
                copy_function=copier,
                ignore=_skip_special(data_dir, skipped),
            )
        except OSError as exc:  # shutil.Error lists every file: its first and a count
            raise StagingError(f"cannot stage {data_dir} in {home}: {os_error_line(exc)}") from None
        if skipped:
            staged.notes.append(_skipped_note(data_dir, skipped))
        before = snapshot(staged.path)
        staged.stage_in_s = time.perf_counter() - t0
        staged.bytes_in = sum(size for size, _ in before.values())
        staged.files_in = len(before)
        yield staged
        t1 = time.perf_counter()
        _refuse_replaced(home, staged.path, data_dir)
        staged.outputs = outputs(before, snapshot(staged.path), staged.path)
        back = copy_back(staged.path, data_dir, staged.outputs)
        staged.copy_back_s = time.perf_counter() - t1
        staged.notes += [f"{rel} in the staged copy is {kind}: not copied back" for rel, kind in back.skipped]
        staged.notes += [
            f"{rel} was a link in {data_dir}; the program replaced it in the copy, so its output "
            "replaced the link (the link's target is untouched)"
            for rel in back.replaced_links
        ]
        if back.failed:
            kept = _keep(home)
            rel, why = back.failed[0]
            more = f" and {len(back.failed) - 1} more" if len(back.failed) > 1 else ""
            copied = kept / staged.path.relative_to(home)
            raise StagingError(
                f"{len(back.failed)} output(s) could not be copied back to {data_dir} ({rel}: {why}{more}); "
                f"the staged copy is kept in {copied}: recover with cp -a --sparse=always "
                f"{copied}/{rel} {data_dir}/{rel}"
            )
    finally:
        if os.path.islink(home):  # the program's link in place of the folder: removed, never followed
            home.unlink()
        shutil.rmtree(home, ignore_errors=True)
        if watched:
            GUARDIAN.release_dir(str(home))


# --------------------------------------------------------------------------- the measured metric


def adjusted_metric(
    value: float, *, kind: str, lower_is_better: bool, run_wall_s: float, stage_s: float
) -> float:
    """The replicate's metric with its staging inside it.

    - wall time dftune measures: the run's wall time plus the staging seconds;
    - a time the program reports (lower is better): plus the staging seconds;
    - a rate the program reports (higher is better): scaled by run / (run + staging) wall time,
      the rate the whole replicate achieved when the same work also waited for the copies."""
    if stage_s <= 0:
        return value
    if kind == "wall_time" or lower_is_better:
        return value + stage_s
    if run_wall_s <= 0:
        return value
    return value * run_wall_s / (run_wall_s + stage_s)


def stage_share(run_wall_s: float, stage_s: float) -> float | None:
    """The share of the replicate spent staging (copy-in and copy-back)."""
    total = run_wall_s + stage_s
    return stage_s / total if total > 0 else None
