"""The ``darshan`` section of a ``dftune.analysis/1`` document analyzed from Darshan logs.

Only what a Darshan log has and a dftracer trace has not: the header (executable, job,
mounts, modules and their partial flags), the counters-only signals (shared files, MPI-IO
collective use, alignment, Lustre striping, rank skew) and, per number, whether it is exact
(DXT) or derived from counters.  Pure data: no dftune import, so tools/trace/model can embed it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LogInfo(_Model):
    """One log file's header."""

    path: str
    jobid: int
    nprocs: int
    start_time: float
    end_time: float
    run_time_s: float
    log_format: str
    darshan_version: str
    executable: str
    modules: list[str]
    partial_modules: list[str] = []


class ModuleInfo(_Model):
    records: int = 0
    #: Darshan ran out of memory or record slots for this module: its numbers are a lower bound
    partial: bool = False
    #: mapped into the families (POSIX, STDIO), a layer above them (MPI-IO, H5F/H5D, PnetCDF), or not
    role: str = "unmapped"


class Mount(_Model):
    path: str
    fs_type: str


class FileCategories(_Model):
    """POSIX files by how they were accessed: darshan-util's categories (darshan-job-summary's table)."""

    total: int = 0
    #: by bytes moved (a file opened but never read or written is in none of the three)
    read_only: int = 0
    write_only: int = 0
    read_write: int = 0
    #: accessed by every rank / by several but not all / by one
    shared: int = 0
    partially_shared: int = 0
    unique: int = 0


class MpiioInfo(_Model):
    """MPI-IO calls: collective vs independent, blocking vs non-blocking, and the hints set."""

    files: int = 0
    indep_reads: int = 0
    indep_writes: int = 0
    coll_reads: int = 0
    coll_writes: int = 0
    split_reads: int = 0
    split_writes: int = 0
    nb_reads: int = 0
    nb_writes: int = 0
    #: MPI_File_set_info / info-at-open calls by the application (MPIIO_HINTS)
    hints_set: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    time_s: float = 0.0
    #: POSIX time (read + write + metadata) of the files that were opened through MPI-IO
    posix_time_s: float = 0.0


class LustreInfo(_Model):
    files: int = 0
    #: stripe count -> number of files
    stripe_counts: dict[str, int] = {}
    stripe_sizes: dict[str, int] = {}
    osts_used: int = 0
    #: files with stripe count 1 that several ranks access
    shared_stripe1: int = 0


class PerfEstimate(_Model):
    """Darshan's POSIX-layer performance estimate (darshan-job-summary's "agg_perf_by_slowest")."""

    total_bytes: int = 0
    slowest_rank_unique_time_s: float = 0.0
    slowest_rank: int | None = None
    shared_time_by_slowest_s: float = 0.0
    agg_time_by_slowest_s: float = 0.0
    agg_perf_by_slowest_mib_s: float | None = None
    #: agg_time_by_slowest / job time: the I/O share of the rank the job waits for
    slowest_io_fraction: float | None = None


class DxtInfo(_Model):
    modules: list[str] = []
    read_ops: int = 0
    write_ops: int = 0
    #: traced operations / operations the POSIX counters saw (1.0 = every operation traced)
    read_coverage: float | None = None
    write_coverage: float | None = None
    #: DXT covers every POSIX read and write: sequentiality, sizes, I/O wall time are exact
    complete: bool = False
    hosts: list[str] = []


class DarshanInfo(_Model):
    logs: list[LogInfo]
    executable: str
    jobids: list[int]
    nprocs: int
    mounts: list[Mount] = []
    modules: dict[str, ModuleInfo] = {}
    partial_modules: list[str] = []
    #: the ``h=`` header entry: the MPI-IO hints Darshan used to write its own log file
    log_write_hints: str | None = None
    files: FileCategories = FileCategories()
    mpiio: MpiioInfo | None = None
    lustre: LustreInfo | None = None
    perf: PerfEstimate = PerfEstimate()
    dxt: DxtInfo = DxtInfo()
    #: per number of the analysis, where it comes from: "dxt", "counters", "heatmap", "none"
    sources: dict[str, str] = {}
    #: read/write operations per Darshan size bin (POSIX_SIZE_*), always from the counters
    counter_size_hist: dict[str, dict[str, int]] = {}
    #: Darshan bin -> the dftune bins it spans (the mapping of ``counter_size_hist`` onto dftune's)
    size_bin_map: dict[str, list[str]] = {}
    #: POSIX accesses not aligned to the file alignment Darshan recorded, and to memory alignment
    file_not_aligned: int = 0
    mem_not_aligned: int = 0
    file_alignments: list[int] = []
    #: read/write operations of exactly 1 MiB moved out of the 100K-1M bin (POSIX_ACCESS*_ACCESS)
    exact_1mib_ops: int = 0
    #: records whose counters were negative (Darshan's -1 "not recorded" or a broken timer)
    negative_counters: dict[str, int] = {}
    #: counters the log's Darshan did not record (-1), treated as 0
    not_recorded: dict[str, int] = {}
    #: the Darshan-only metrics the diagnosis rules read (tools/trace/darshan/signals.py)
    signals: dict[str, float | int | str | bool] = {}
