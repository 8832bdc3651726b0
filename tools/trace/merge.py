"""Reduce step: merge per-file partials into one :class:`Analysis`.

Merging is exact: every partial table holds sums and counts keyed by family, size bin,
process, accessed path or category, so re-aggregating them gives the same numbers as
one pass over all events would.  The same function serves the local thread pool and the
Dask cluster, which is why both paths agree to the last byte.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pyarrow as pa

from dftune.core.domain.diagnosis import HelperProcess
from dftune.core.errors import DftuneError
from dftune.tools.trace import semantics as S
from dftune.tools.trace.batch import _connection as connection
from dftune.tools.trace.model import (
    Analysis,
    AppEventStats,
    EpochSpread,
    FamilyStats,
    Imbalance,
    InterfaceStats,
    LayerStats,
    RankGroup,
    Shape,
    SkippedLine,
)
from dftune.tools.trace.processes import Accounting, Proc, account, group_label, root
from dftune.tools.trace.reader import FilePartial

US = 1_000_000.0
MIB = float(1 << 20)


def concat_partials(partials: list[FilePartial], name: str) -> pa.Table | None:
    tables = [p.tables[name] for p in partials if name in p.tables and p.tables[name].num_rows]
    if not tables:
        return None
    try:
        return pa.concat_tables([_normalize(t) for t in tables], promote_options="permissive")
    except pa.ArrowInvalid as exc:
        raise TotalsOverflow(name) from exc


class TotalsOverflow(DftuneError):
    """A total over the traces does not fit 64 bits: every event is within the trace limits
    (limits.py), but so many maximal values add up past 2^63."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"the {what} totals of these traces exceed 64-bit integers: their numbers are within "
            "DFTUNE_TRACE_MAX_VALUE, but too many maximal ones add up; lower the limit to refuse them by line"
        )


def _normalize(table: pa.Table) -> pa.Table:
    """DuckDB sums come back as decimals/hugeints; make them int64/float64 for merging."""
    cols = []
    for f in table.schema:
        col = table[f.name]
        if pa.types.is_decimal(f.type):
            col = col.cast(pa.int64() if f.type.scale == 0 else pa.float64())
        elif pa.types.is_integer(f.type) and f.type not in (pa.int64(), pa.uint64()):  # uint64: hashes
            col = col.cast(pa.int64())
        elif pa.types.is_floating(f.type) and f.type != pa.float64():
            col = col.cast(pa.float64())
        elif pa.types.is_null(f.type):
            col = col.cast(pa.int64())
        cols.append(col)
    return pa.table(cols, names=table.schema.names)


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 4) if whole else 0.0


def merge(
    partials: list[FilePartial],
    warnings: list[str] | None = None,
    *,
    accounting: Accounting | None = None,
    helpers_excluded: bool = False,
    group_overlap: dict[str, tuple[int, int]] | None = None,
) -> Analysis:
    """Combine per-file partials into the final analysis (views are added by :mod:`views`).

    ``accounting`` says which processes are helpers (:mod:`processes`; computed from the
    partials when not given); ``helpers_excluded`` records that the caller left the files
    holding only helpers out of ``partials``.
    """
    acc = accounting or account(partials)
    con = connection()  # a cursor of the process's database: a fresh database costs ~13 ms
    try:
        return _merge(con, partials, list(warnings or []), acc.procs, helpers_excluded, group_overlap or {})
    finally:
        con.close()


def query_rows(
    con: duckdb.DuckDBPyConnection, table: pa.Table | None, sql: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` over ``table`` registered as ``t``: (column names, rows); nothing for no table."""
    if table is None:
        return [], []
    con.register("t", table)
    try:
        cur = con.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.OutOfRangeException as exc:
        raise TotalsOverflow("merged") from exc
    finally:
        con.unregister("t")


def _query(con: duckdb.DuckDBPyConnection, table: pa.Table | None, sql: str) -> list[tuple[Any, ...]]:
    return query_rows(con, table, sql)[1]


def _merge(
    con: duckdb.DuckDBPyConnection,
    partials: list[FilePartial],
    warnings: list[str],
    accounted: list[Proc],
    helpers_excluded: bool,
    group_overlap: dict[str, tuple[int, int]],
) -> Analysis:
    sc = [p.scalars for p in partials]
    events = sum(s.get("events", 0) for s in sc)
    firsts = [s["first_ts"] for s in sc if s.get("first_ts") is not None]
    lasts = [s["last_end"] for s in sc if s.get("last_end") is not None]
    job_us = (max(lasts) - min(firsts)) if firsts and lasts else 0
    job_s = job_us / US

    fam_rows = _query(
        con,
        concat_partials(partials, "fam"),
        """
        SELECT fam, sum(count), sum(bytes), sum(sized), sum(time_us),
               sum(small), sum(small_time_us), sum(bw_sum), sum(bw_n),
               sum(consecutive), sum(sequential), sum(random), sum(positioned), sum(misaligned),
               sum(random_time_us), sum(misaligned_time_us)
        FROM t GROUP BY fam""",
    )
    agg_rows = _query(
        con,
        concat_partials(partials, "agg"),
        "SELECT fam, sum(count), sum(bytes), sum(time_us) FROM t GROUP BY fam",
    )
    agg = {r[0]: r for r in agg_rows}
    # read/write move bytes (0 when nothing moved); metadata/sync calls move none (None)
    fams = {f: FamilyStats(bytes=0 if f in ("read", "write") else None) for f in S.FAMILIES}
    for (
        fam,
        count,
        nbytes,
        sized,
        time_us,
        nsmall,
        small_us,
        bw_sum,
        bw_n,
        consec,
        sequ,
        rand,
        npos,
        nmis,
        rand_us,
        mis_us,
    ) in fam_rows:
        st = fams[fam]
        st.count, st.sized, st.time_s = int(count), int(sized or 0), (time_us or 0) / US
        if fam in ("read", "write"):
            st.bytes = int(nbytes or 0)
            st.mean_xfer_bytes = (st.bytes / st.sized) if st.sized else None
            st.bw_per_op_mean_mib_s = (bw_sum * US / MIB / bw_n) if bw_n else None
            st.small, st.small_time_s = int(nsmall or 0), float(small_us or 0) / US
            st.consecutive, st.sequential, st.random = int(consec or 0), int(sequ or 0), int(rand or 0)
            st.positioned, st.misaligned = int(npos or 0), int(nmis or 0)
            st.random_time_s, st.misaligned_time_s = float(rand_us or 0) / US, float(mis_us or 0) / US
    for fam, count, nbytes, time_us in ((r[0], r[1], r[2], r[3]) for r in agg.values()):
        st = fams[fam]
        st.count += int(count or 0)
        st.aggregated_ops = int(count or 0)
        st.time_s += (time_us or 0) / US
        if nbytes is not None and st.bytes is not None:
            st.bytes += int(nbytes)
    rd, wr = fams["read"], fams["write"]
    for st in (rd, wr):
        st.bw_io_time_mib_s = (st.bytes / MIB / st.time_s) if st.time_s and st.bytes else None

    rwm = fams["read"].time_s + fams["write"].time_s + fams["metadata"].time_s
    classified = rd.sequential + rd.random + wr.sequential + wr.random

    hist_rows = _query(
        con,
        concat_partials(partials, "hist"),
        "SELECT fam, sbin, sum(count), sum(bytes) FROM t GROUP BY 1, 2",
    )
    hist: dict[str, dict[str, int]] = {
        fam: {label: 0 for label, _ in S.SIZE_BINS} for fam in ("read", "write")
    }
    for fam, sbin, count, _bytes in hist_rows:
        hist[fam][S.SIZE_BINS[int(sbin)][0]] += int(count)

    proc_t = concat_partials(partials, "proc")
    procs = _query(
        con,
        proc_t,
        """
        SELECT host, pid, max(rank), any_value(cmd), sum(events),
               sum(COALESCE(read_count,0) + COALESCE(write_count,0)
                   + COALESCE(metadata_count,0) + COALESCE(sync_count,0)),
               sum(COALESCE(read_bytes,0) + COALESCE(write_bytes,0)),
               sum(COALESCE(read_time_us,0) + COALESCE(write_time_us,0) + COALESCE(metadata_time_us,0)
                   + COALESCE(sync_time_us,0)),
               sum(io_wall_us), sum(unoverlapped_us), sum(compute_wall_us), max(last_end) - min(first_ts)
        FROM t GROUP BY host, pid""",
    )
    pids = {p[1] for p in procs if p[1] is not None}
    hosts = sorted({str(p[0]) for p in procs if p[0]})
    helpers = [p for p in accounted if p.helper is not None]
    helper_keys = {p.key for p in helpers}
    # the application's processes: the I/O fraction, imbalance and stragglers are theirs
    app = [p for p in procs if (str(p[0] or ""), None if p[1] is None else int(p[1])) not in helper_keys]
    app_io_wall_us = sum(float(p[8] or 0) for p in app)
    app_life_us = sum(float(p[11] or 0) for p in app)
    io_wall_us = sum(float(p[8] or 0) for p in procs)
    compute_wall_us = sum(float(p[10] or 0) for p in procs)
    compute_procs = sum(1 for p in procs if (p[10] or 0) > 0)
    compute_life_us = sum(float(p[11] or 0) for p in procs if (p[10] or 0) > 0)
    process_time_us = sum(float(p[11] or 0) for p in procs)
    groups = _rank_groups(app, accounted)
    # peers are compared only when they do data I/O (a resource tracker that only imports is no peer)
    movers = [g for g in groups if g[0].data_io is not False]
    imbalance = _imbalance([g[1] for g in (movers or groups)])
    # I/O hidden behind compute is judged per rank group: a worker that only reads while its main
    # process computes is not "unoverlapped" because it computes nothing itself
    # groups whose overlap was measured across their processes (tools/trace/overlap.py) count as
    # one; elsewhere a worker that computes nothing while its group's main process computes is not
    # counted as unhidden (its overlap is not measured)
    measured = {p.key for p in accounted if p.helper is None and group_label(p) in group_overlap}
    fed = _fed_workers([g for g in groups if g[0].label not in group_overlap], app)
    apart = measured | fed
    unover_us = sum(float(p[9] or 0) for p in procs if _key(p) not in apart)
    unover_us += sum(u for _, u in group_overlap.values())
    judged_io_wall_us = sum(float(p[8] or 0) for p in procs if _key(p) not in apart)
    judged_io_wall_us += sum(w for w, _ in group_overlap.values())
    if fed:
        warnings.append(
            f"{len(fed)} worker process(es) do I/O for a process of their rank group that computes: "
            "their I/O is not counted as unhidden (overlap across processes is not measured)"
        )

    layer_rows = _query(
        con,
        concat_partials(partials, "layer"),
        "SELECT cat, sum(count), sum(time_us) FROM t GROUP BY cat ORDER BY 3 DESC",
    )
    nproc = max(len(procs), 1)
    layers = [
        LayerStats(
            cat=str(cat),
            count=int(cnt),
            time_s=(t or 0) / US,
            mean_ms=((t or 0) / cnt / 1000.0) if cnt else 0.0,
            share_of_job_pct=_pct((t or 0), job_us * nproc),
        )
        for cat, cnt, t in layer_rows
    ]
    # distinct keys of accessed files (name, or 2.x hash): the file view's rows, or the bare keys
    path_t = concat_partials(partials, "path")
    if path_t is not None:
        files_accessed_row = _query(con, path_t, "SELECT count(DISTINCT pkey) FROM t")
    else:
        files_accessed_row = _query(con, concat_partials(partials, "fks"), "SELECT count(DISTINCT fk) FROM t")
    files_accessed = int(files_accessed_row[0][0]) if files_accessed_row else 0

    skipped: list[SkippedLine] = []
    for p in partials:
        for bad in p.bad_lines:
            skipped.append(
                SkippedLine(file=p.path, line=None if bad.line < 0 else bad.line, reason=bad.reason)
            )
    no_args = [
        p.path
        for p in partials
        if p.scalars.get("io_events")
        and p.scalars.get("io_events") == p.scalars.get("io_events_without_args")
    ]
    if no_args:
        warnings.append(
            f"{len(no_args)} trace file(s) have I/O events without "
            "args (traced without DFTRACER_INC_METADATA=1?): "
            "bytes, sizes and sequentiality are unknown for them, e.g. " + no_args[0]
        )
    formats: dict[str, int] = {}
    for s in sc:
        for k, v in (s.get("formats") or {}).items():
            formats[k] = formats.get(k, 0) + int(v)
    epochs = sorted({e for s in sc for e in s.get("epochs", [])}, key=_natural)
    rw_ops = (
        fams["read"].count + fams["write"].count - fams["read"].aggregated_ops - fams["write"].aggregated_ops
    )
    rw_bytes = (fams["read"].bytes or 0) + (fams["write"].bytes or 0)
    return Analysis(
        files=len(partials),
        trace_files=[p.path for p in partials],
        empty_files=[p.path for p in partials if p.scalars.get("empty")],
        events=events,
        skipped_lines=sum(int(s.get("bad_line_count", 0)) for s in sc),
        skipped=skipped[:200],
        truncated_files=[p.path for p in partials if p.scalars.get("truncated")],
        metadata_lines=sum(s.get("metadata_lines", 0) for s in sc),
        counter_events=sum(s.get("counter_events", 0) for s in sc),
        aggregated_events=sum(s.get("aggregated_events", 0) for s in sc),
        formats=formats,
        processes=len(pids),
        hosts=hosts,
        job_time_s=job_s,
        read=fams["read"],
        write=fams["write"],
        metadata=fams["metadata"],
        sync=fams["sync"],
        io_time_s=sum(f.time_s for f in fams.values()),
        read_time_pct=_pct(fams["read"].time_s, rwm),
        write_time_pct=_pct(fams["write"].time_s, rwm),
        metadata_time_pct=_pct(fams["metadata"].time_s, rwm),
        small_io_pct=_pct(rd.small + wr.small, rd.sized + wr.sized),
        small_read_pct=_pct(rd.small, rd.sized),
        small_write_pct=_pct(wr.small, wr.sized),
        seq_pct=_pct(rd.sequential + wr.sequential, classified),
        consecutive_pct=_pct(rd.consecutive + wr.consecutive, classified),
        rand_pct=_pct(rd.random + wr.random, classified),
        classified_accesses=classified,
        xfer_size_hist=hist,
        unoverlapped_io_time_s=unover_us / US,
        io_wall_time_s=io_wall_us / US,
        compute_wall_time_s=compute_wall_us / US,
        compute_processes=compute_procs,
        compute_process_time_s=compute_life_us / US,
        process_time_s=process_time_us / US,
        app_events=_app_events(con, partials),
        epoch_spreads=_epoch_spreads(con, partials, accounted),
        misaligned_pct=_pct(
            fams["read"].misaligned + fams["write"].misaligned,
            fams["read"].positioned + fams["write"].positioned,
        ),
        interfaces=_interfaces(con, partials),
        io_fraction_of_job=round(app_io_wall_us / app_life_us, 6) if app_life_us else 0.0,
        unoverlapped_io_fraction=round(unover_us / judged_io_wall_us, 6) if judged_io_wall_us else 0.0,
        bw_job_mib_s=(rw_bytes / MIB / job_s) if job_s and rw_bytes else None,
        files_accessed=files_accessed,
        imbalance=imbalance,
        shape=_shape(rw_ops, rw_bytes, fams, io_wall_us),
        layers=layers,
        epochs=epochs,
        steps=sum(int(s.get("steps", 0)) for s in sc),
        checkpoint_events=sum(int(s.get("checkpoint_events", 0)) for s in sc),
        dftracer_versions=sorted({str(s["dftracer_version"]) for s in sc if s.get("dftracer_version")}),
        time_metric=next((s["time_metric"] for s in sc if s.get("time_metric")), "US"),
        tracer_config=_first_config(sc),
        app_processes=len(app),
        rank_groups=[g[0] for g in groups],
        app_process_time_s=app_life_us / US,
        helper_processes=[_helper(p) for p in sorted(helpers, key=lambda p: (p.first_ts or 0, p.key))],
        helpers_excluded=helpers_excluded,
        warnings=warnings + _helper_warning(helpers, helpers_excluded),
    )


def _helper(p: Proc) -> HelperProcess:
    return HelperProcess(
        host=p.host,
        pid=p.pid,
        cmd=p.cmd,
        events=p.events,
        lifetime_s=p.lifetime_us / US,
        io_time_s=p.io_time_us / US,
        bytes=p.moved,
        why=str(p.helper),
    )


def _helper_warning(helpers: list[Proc], excluded: bool) -> list[str]:
    if not helpers:
        return []
    names = sorted({(p.cmd or f"pid {p.pid}").replace(";", " ")[:60] for p in helpers})
    left_out = "every number here" if excluded else "the I/O fraction, imbalance and stragglers"
    return [
        f"{len(helpers)} helper process(es) (shell wrappers, "
        "shims, launchers, short children) do none of the "
        f"application's I/O and are left out of {left_out} (listed in helper_processes): "
        + ", ".join(names[:3])
        + (", ..." if len(names) > 3 else "")
    ]


def _key(row: tuple[Any, ...]) -> tuple[str, int | None]:
    return (str(row[0] or ""), None if row[1] is None else int(row[1]))


def _fed_workers(
    groups: list[tuple[RankGroup, tuple[Any, ...]]], app: list[tuple[Any, ...]]
) -> set[tuple[str, int | None]]:
    """Members of a rank group that compute nothing themselves while another member computes."""
    compute = {_key(p): float(p[10] or 0) for p in app}
    out: set[tuple[str, int | None]] = set()
    for group, _ in groups:
        members = [group.main, *group.workers]
        keys = [
            (m.rsplit(":", 1)[0], int(m.rsplit(":", 1)[1]) if m.rsplit(":", 1)[1].isdigit() else None)
            for m in members
        ]
        if len(keys) > 1 and any(compute.get(k, 0) > 0 for k in keys):
            out |= {k for k in keys if compute.get(k, 0) == 0}
    return out


def _rank_groups(
    app: list[tuple[Any, ...]], accounted: list[Proc]
) -> list[tuple[RankGroup, tuple[Any, ...]]]:
    """The application's processes summed per rank group (a rank or lone main process with its workers).

    Each group comes with a row shaped like the proc query's (host, pid, rank, cmd, events, ops,
    bytes, time) so imbalance compares groups exactly as it compared processes."""
    by_key = {p.key: p for p in accounted}
    sums: dict[str, list[Any]] = {}
    members: dict[str, list[str]] = {}
    lifetimes = {_key(row): float(row[11] or 0) / US for row in app}
    moves: dict[str, bool | None] = {}
    for row in app:
        key = (str(row[0] or ""), None if row[1] is None else int(row[1]))
        proc = by_key.get(key)
        lead = root(proc) if proc is not None else None
        label = group_label(proc) if proc is not None else f"{key[0]}:{key[1]}"
        head = (lead.host, lead.pid, lead.rank) if lead is not None else (row[0], row[1], row[2])
        acc = sums.setdefault(label, [*head, None, 0, 0, 0, 0.0])
        for i in (4, 5, 6):
            acc[i] += int(row[i] or 0)
        acc[7] += float(row[7] or 0)
        members.setdefault(label, []).append(f"{key[0]}:{key[1]}")
        mine = proc.data_io if proc is not None else None
        moves[label] = (
            mine
            if label not in moves
            else None
            if mine is None and not moves[label]
            else bool(moves[label]) or bool(mine)
        )
    out = []
    for label, acc in sums.items():
        main = f"{acc[0]}:{acc[1]}"
        out.append(
            (
                RankGroup(
                    label=label,
                    rank=acc[2],
                    main=main,
                    workers=sorted(m for m in members[label] if m != main),
                    bytes=acc[6],
                    io_calls=acc[5],
                    io_time_s=acc[7] / US,
                    lifetime_s=lifetimes.get((str(acc[0] or ""), acc[1]), 0.0),
                    data_io=moves.get(label),
                ),
                tuple(acc),
            )
        )
    return sorted(out, key=lambda g: (g[0].rank is None, g[0].rank or 0, g[0].label))


def _epoch_spreads(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], accounted: list[Proc]
) -> list[EpochSpread]:
    """Per epoch, the duration spread of the application's rank groups (epoch stragglers).

    A group's epoch lasts from the first to the last event any of its processes tags with it;
    helpers are left out, and workers count with the rank they serve."""
    keys = [(p.host, p.pid, group_label(p)) for p in accounted if p.helper is None and p.pid is not None]
    con.register(
        "groups",
        pa.table(
            {
                "host": pa.array([h for h, _, _ in keys], pa.string()),
                "pid": pa.array([p for _, p, _ in keys], pa.int64()),
                "grp": pa.array([g for _, _, g in keys], pa.string()),
            }
        ),
    )
    try:
        rows = _query(
            con,
            concat_partials(partials, "epochspan"),
            """
            WITH p AS (SELECT epoch, g.grp, (max(last_end) - min(first_ts)) / 1e6 AS secs
                       FROM t JOIN groups g ON g.host = t.host AND g.pid = t.pid GROUP BY epoch, g.grp)
            SELECT epoch, count(*), min(secs), median(secs), max(secs), arg_max(grp, secs)
            FROM p GROUP BY epoch HAVING count(*) > 1 ORDER BY epoch
            """,
        )
    finally:
        con.unregister("groups")
    out = []
    for epoch, n, lo, med, hi, slowest in rows:
        if not str(epoch).isdigit():  # DLIO tags set-up with epoch -1 and phases with names
            continue
        spread = (hi - med) / hi if hi else 0.0
        out.append(
            EpochSpread(
                epoch=str(epoch),
                processes=int(n),
                min_s=float(lo),
                median_s=float(med),
                max_s=float(hi),
                straggler_spread=round(spread, 6),
                slowest_process=str(slowest),
            )
        )
    return sorted(out, key=lambda e: _natural(e.epoch))


def _app_events(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> list[AppEventStats]:
    rows = _query(
        con,
        concat_partials(partials, "names"),
        "SELECT cat, name, sum(count), sum(time_us) FROM t "
        "GROUP BY cat, name ORDER BY 4 DESC, 1, 2 LIMIT 200",
    )
    return [
        AppEventStats(cat=str(c), name=str(n), count=int(k or 0), time_s=float(t or 0) / US)
        for c, n, k, t in rows
    ]


def _interfaces(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> dict[str, InterfaceStats]:
    rows = _query(
        con,
        concat_partials(partials, "iface"),
        "SELECT iface, sum(count), sum(bytes) FILTER (WHERE fam IN ('read', 'write')), sum(time_us) "
        "FROM t GROUP BY iface ORDER BY iface",
    )
    total_bytes = sum(int(r[2] or 0) for r in rows)
    total_time = sum(float(r[3] or 0) for r in rows)
    return {
        str(iface): InterfaceStats(
            count=int(count or 0),
            bytes=int(nbytes or 0),
            time_s=float(t or 0) / US,
            bytes_pct=_pct(float(nbytes or 0), total_bytes),
            time_pct=_pct(float(t or 0), total_time),
        )
        for iface, count, nbytes, t in rows
    }


def _first_config(scalars: list[dict[str, Any]]) -> dict[str, Any] | None:
    for s in scalars:
        raw = s.get("tracer_config")
        if raw:
            try:
                cfg = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                continue
            if isinstance(cfg, dict):
                return cfg
    return None


def _natural(value: str) -> tuple[int, float | str]:
    try:
        return (0, float(value))
    except ValueError:
        return (1, value)


def _imbalance(procs: list[tuple[Any, ...]]) -> Imbalance:
    """Spread of I/O ops, bytes and time across processes that did any I/O."""
    rows = [p for p in procs if (p[5] or 0) > 0]
    if len(rows) < 2:
        return Imbalance()

    def spread(idx: int) -> tuple[float, float]:
        vals = [float(r[idx] or 0) for r in rows]
        hi, lo, mean = max(vals), min(vals), sum(vals) / len(vals)
        return ((hi - mean) / hi, (hi - lo) / hi) if hi else (0.0, 0.0)

    ops, nbytes, time = spread(5), spread(6), spread(7)
    slow = max(rows, key=lambda r: float(r[7] or 0))
    label = f"{slow[0]}:{slow[1]}" + (f" (rank {slow[2]})" if slow[2] is not None else "")
    return Imbalance(
        ops_max_mean=round(ops[0], 6),
        ops_max_min=round(ops[1], 6),
        bytes_max_mean=round(nbytes[0], 6),
        bytes_max_min=round(nbytes[1], 6),
        time_max_mean=round(time[0], 6),
        time_max_min=round(time[1], 6),
        slowest_process=label,
    )


def _shape(ops: int, nbytes: int, fams: dict[str, FamilyStats], io_wall_us: float) -> Shape:
    sized = fams["read"].sized + fams["write"].sized
    if not sized:
        return Shape(kind="none", reason="no read/write operation with a known size")
    mean = nbytes / sized
    rate = ops / (io_wall_us / US) if io_wall_us else None
    if mean < S.OP_COUNT_BOUND_BYTES:
        kind = "op-count-bound"
        why = (
            f"mean transfer {mean:,.0f} B < {S.OP_COUNT_BOUND_BYTES // 1024} KiB: many small operations; "
            "coalescing helps, striping or ROMIO hints do not"
        )
    elif mean >= S.BANDWIDTH_BOUND_BYTES:
        kind = "bandwidth-bound"
        why = f"mean transfer {mean / MIB:,.1f} MiB >= 1 MiB: few large operations; bandwidth levers apply"
    else:
        kind = "mixed"
        why = f"mean transfer {mean / 1024:,.0f} KiB between 64 KiB and 1 MiB"
    return Shape(kind=kind, ops=ops, bytes=nbytes, mean_xfer_bytes=mean, ops_per_io_s=rate, reason=why)
