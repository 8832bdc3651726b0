"""Typed result of a trace analysis (the ``dftune.analysis/1`` JSON document)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dftune.core.domain.diagnosis import HelperProcess, RunInfo
from dftune.tools.trace.darshan.model import DarshanInfo

SCHEMA = "dftune.analysis/1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FamilyStats(_Model):
    """One I/O family (read, write, metadata, sync).  Times in seconds, bytes exact."""

    count: int = 0
    bytes: int | None = None
    time_s: float = 0.0
    #: operations whose size is known (``ret`` present); bytes and size stats cover only these
    sized: int = 0
    mean_xfer_bytes: float | None = None
    #: mean of per-operation bandwidth (bytes/dur) over ops with dur > 0, MiB/s
    bw_per_op_mean_mib_s: float | None = None
    #: bytes / time spent in these calls, MiB/s
    bw_io_time_mib_s: float | None = None
    #: operations and bytes known only from dftracer aggregated records (no per-op detail)
    aggregated_ops: int = 0
    #: small (< 1 MiB) operations among the sized ones, and their time
    small: int = 0
    small_time_s: float = 0.0
    #: access-pattern counts (read/write only; see docs/analyze.md "What each number means")
    consecutive: int = 0
    sequential: int = 0
    random: int = 0
    #: accesses whose start offset is known, and those not aligned to 4 KiB
    positioned: int = 0
    misaligned: int = 0
    #: time spent in the random and in the misaligned accesses
    random_time_s: float = 0.0
    misaligned_time_s: float = 0.0


class SkippedLine(_Model):
    file: str
    line: int | None
    reason: str


class Imbalance(_Model):
    """Per-process spread: (max - mean) / max (WisIO) and (max - min) / max (Drishti)."""

    ops_max_mean: float = 0.0
    bytes_max_mean: float = 0.0
    time_max_mean: float = 0.0
    ops_max_min: float = 0.0
    bytes_max_min: float = 0.0
    time_max_min: float = 0.0
    slowest_process: str | None = None


class Shape(_Model):
    """Is the I/O op-count-bound (many tiny ops) or bandwidth-bound (few large ones)?"""

    kind: str = "none"
    ops: int = 0
    bytes: int = 0
    mean_xfer_bytes: float | None = None
    ops_per_io_s: float | None = None
    reason: str = ""


class InterfaceStats(_Model):
    """One I/O interface (POSIX, STDIO): operations, bytes moved by reads/writes, time."""

    count: int = 0
    bytes: int = 0
    time_s: float = 0.0
    bytes_pct: float = 0.0
    time_pct: float = 0.0


class AppEventStats(_Model):
    """One application-level event name (e.g. DLIO's ``TorchDataLoader.next``)."""

    cat: str
    name: str
    count: int
    time_s: float


class EpochSpread(_Model):
    """How long each process took for one epoch (first to last event tagged with it)."""

    epoch: str
    processes: int
    min_s: float
    median_s: float
    max_s: float
    #: (max - median) / max: how far the slowest process lags the typical one
    straggler_spread: float
    slowest_process: str


class LayerStats(_Model):
    cat: str
    count: int
    time_s: float
    mean_ms: float
    #: time / (job time x processes): share of all process-time spent in this layer
    share_of_job_pct: float


class FileAccess(_Model):
    """What the application did to one file: the guards compare these between two arms."""

    path: str
    processes: int = 0
    read_calls: int = 0
    read_bytes: int = 0
    #: bytes of the file covered by at least one read (the union of the read ranges)
    read_unique_bytes: int = 0
    read_segments: int = 0
    #: a digest of the read ranges (sha256 of the disjoint segments): equal means the same bytes
    read_ranges: str = ""
    #: the lowest offset read (None: no positioned read)
    read_start: int | None = None
    write_calls: int = 0
    write_bytes: int = 0
    write_unique_bytes: int = 0
    write_segments: int = 0
    write_ranges: str = ""
    write_start: int | None = None
    #: accesses whose start offset is known and those left without one (no open seen, append, ...)
    positioned: int = 0
    unpositioned: int = 0
    consecutive: int = 0
    sequential: int = 0
    random: int = 0
    metadata_calls: int = 0
    #: first access (microseconds, trace clock): gives the order in which files are visited
    first_ts: int | None = None
    #: transfer sizes of the calls: {"read": {size bin: calls}, "write": {...}} (non-empty bins),
    #: and the bytes and the time (seconds, summed over calls) of each bin
    sizes: dict[str, dict[str, int]] = {}
    size_bytes: dict[str, dict[str, int]] = {}
    size_time_s: dict[str, dict[str, float]] = {}

    @property
    def reread_bytes(self) -> int:
        """Bytes read more than once (what a cache can serve without reading again)."""
        return max(0, self.read_bytes - self.read_unique_bytes)


class AppEvent(_Model):
    """An application-level event name (not POSIX/STDIO/tracer): what the program says it did."""

    cat: str
    name: str
    count: int
    #: sum of the ``size`` the program logged with it (None when it logs none)
    size_sum: int | None = None


class RequestStream(_Model):
    """One thread's requests to the files (a stream: host, process and thread), in the order issued.

    ``runs`` compress them: ``[file, is_write, start, size, calls, ts]`` says ``calls`` requests of
    ``size`` bytes each, back to back from byte ``start`` of ``paths[file]`` (start -1: position
    unknown), the first at trace time ``ts``.
    """

    stream: str
    runs: list[tuple[int, int, int, int, int, int]] = []


class RequestLog(_Model):
    """The application's requests per stream, from the highest layer the trace has for each file
    (STDIO above POSIX): what the access-pattern guard compares as the logical pattern."""

    paths: list[str] = []
    streams: list[RequestStream] = []
    #: requests kept, and whether more were left out (the log is bounded; the first ones are kept)
    requests: int = 0
    truncated: bool = False
    #: files whose STDIO requests replaced the POSIX calls beneath them
    stdio_files: int = 0


class AccessProfile(_Model):
    """Per-file accesses and application events of a trace (``analyze(..., profile=True)``)."""

    files: list[FileAccess] = []
    app_events: list[AppEvent] = []
    requests: RequestLog | None = None


class RankGroup(_Model):
    """One rank (or a main process without a rank) and the worker processes that belong to it."""

    label: str
    rank: int | None = None
    main: str
    workers: list[str] = []
    bytes: int = 0
    io_calls: int = 0
    io_time_s: float = 0.0
    #: the main process's lifetime (first event to last)
    lifetime_s: float = 0.0
    #: a member reads or writes a data file (None: unknown, no per-path tables)
    data_io: bool | None = None


class PathClassStats(_Model):
    """I/O on the accessed files of one path class (system, runtime, data: tools/trace/paths.py)."""

    files: int = 0
    read_count: int = 0
    read_bytes: int = 0
    read_time_s: float = 0.0
    write_count: int = 0
    write_bytes: int = 0
    write_time_s: float = 0.0
    metadata_count: int = 0
    metadata_time_s: float = 0.0
    sync_count: int = 0
    sync_time_s: float = 0.0
    sequential: int = 0
    random: int = 0
    #: the file of the class with the most I/O time
    example: str | None = None

    @property
    def io_time_s(self) -> float:
        return self.read_time_s + self.write_time_s + self.metadata_time_s + self.sync_time_s


class Analysis(_Model):
    """Everything ``dftune analyze`` reports; views are filled only when requested."""

    schema_: str = Field(SCHEMA, alias="schema")
    files: int
    trace_files: list[str]
    empty_files: list[str] = []
    events: int
    skipped_lines: int
    skipped: list[SkippedLine] = []
    truncated_files: list[str] = []
    metadata_lines: int
    counter_events: int
    aggregated_events: int
    formats: dict[str, int]
    processes: int
    hosts: list[str]
    job_time_s: float
    read: FamilyStats
    write: FamilyStats
    metadata: FamilyStats
    sync: FamilyStats
    io_time_s: float
    read_time_pct: float
    write_time_pct: float
    metadata_time_pct: float
    small_io_pct: float
    small_read_pct: float
    small_write_pct: float
    seq_pct: float
    consecutive_pct: float
    rand_pct: float
    classified_accesses: int
    xfer_size_hist: dict[str, dict[str, int]]
    unoverlapped_io_time_s: float
    io_wall_time_s: float
    compute_wall_time_s: float = 0.0
    #: processes that recorded compute events (the denominator of compute utilization)
    compute_processes: int = 0
    #: summed lifetimes (first event to last) of the processes that compute, and of all processes
    compute_process_time_s: float = 0.0
    process_time_s: float = 0.0
    misaligned_pct: float = 0.0
    interfaces: dict[str, InterfaceStats] = {}
    #: I/O wall time of the application's processes / their summed lifetimes (helpers left out)
    io_fraction_of_job: float
    unoverlapped_io_fraction: float
    bw_job_mib_s: float | None
    files_accessed: int
    imbalance: Imbalance
    shape: Shape
    layers: list[LayerStats]
    #: application events by (category, name), largest time first (top 200)
    app_events: list[AppEventStats] = []
    epochs: list[str] = []
    #: per epoch, the spread of per-process epoch times (processes that tag events with epochs)
    epoch_spreads: list[EpochSpread] = []
    steps: int = 0
    checkpoint_events: int = 0
    dftracer_versions: list[str] = []
    #: the tracer configuration dftracer records in its ``end`` event (first file that has one):
    #: which interfaces were traced, aggregation, metadata, ...; tells what the trace can show
    tracer_config: dict[str, Any] | None = None
    time_metric: str = "US"
    #: process accounting: the processes doing the application's I/O (all but the helpers), their
    #: summed lifetimes, the helpers (listed, not hidden), whether the files holding only helpers
    #: were left out of every total (diagnose), and the run these traces are
    app_processes: int = 0
    app_process_time_s: float = 0.0
    helper_processes: list[HelperProcess] = []
    helpers_excluded: bool = False
    run: RunInfo | None = None
    #: I/O per path class (system pseudo-files, the runtime's own files, data), when the file
    #: view was read; system paths are left out of the file view unless included
    path_classes: dict[str, PathClassStats] = {}
    system_paths_included: bool = False
    #: rank groups: each rank (or lone main process) with its worker processes; imbalance,
    #: stragglers and overlap are judged per group (tools/trace/processes.py)
    rank_groups: list[RankGroup] = []
    warnings: list[str] = []
    views: dict[str, Any] = {}
    #: per-file accesses and application events, when asked for (the guards and estimates use it)
    profile: AccessProfile | None = None
    #: Darshan input only: the header and the counters-only signals (None for dftracer traces)
    darshan: DarshanInfo | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")
