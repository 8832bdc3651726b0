"""Campaigns: several workloads tuned in one night, each in its own run, under one deadline.

``dftune run a.toml b.toml c.toml --time-budget 8h`` (or a campaign TOML listing the specs)
makes one campaign. Each workload keeps its own run (opt<n> layout, KB records, report),
driven by :mod:`graphs.runs` in its own thread; the campaign adds what they share:

* one deadline: every run plans its experiments from its measured arm times and starts
  nothing that cannot finish (:mod:`agents.budget`), and the combined report is written
  before the deadline;
* partial baselines: each workload's baseline replicates are independent units
  (:mod:`tools.runner.units`); a workload is diagnosed and tuned as soon as its own
  baseline is ready, whatever the others do; a workload whose baseline fails ends alone;
* measurement slots (:mod:`tools.runner.pool`): local jobs run one at a time, shared out by
  fair share of time, so a slow workload gets its share of the night, not all of it;
* its own id, status, history (``events.jsonl``), resume (a resumed campaign resumes its runs:
  finished baseline units and experiments are not measured again) and combined report.
"""

from __future__ import annotations

import contextlib
import os
import threading
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from dftune.agents.budget import Budget
from dftune.agents.context import ProgressFn, silent
from dftune.core.domain.run import RunResult, RunSettings
from dftune.core.errors import DftuneError, one_line
from dftune.graphs.checkpointer import CHECKPOINT_FILE
from dftune.graphs.runs import ARCHIVED_SPEC, resume_run, run_settings_of, start_run
from dftune.tools.bundle.campaign import write_campaign_bundle
from dftune.tools.report.campaign import (
    MEMBER_HTML_S,
    CampaignResult,
    write_campaign_reports,
    write_member_html,
)
from dftune.tools.runner import levers
from dftune.tools.runner.deadline import Deadline, clock
from dftune.tools.runner.levers import with_levers
from dftune.tools.runner.pool import SlotPool
from dftune.tools.runner.spec import SpecError, WorkloadSpec, load_spec
from dftune.tools.runner.spec_check import check_runnable
from dftune.tools.runner.units import BaselineNotReady, BaselineUnits
from dftune.tools.session.campaigns import CampaignMeta, CampaignStore, Member, driver_alive
from dftune.tools.session.layout import RUN_BUNDLE, new_run_id, validate_run_id
from dftune.tools.session.workspace import Workspace

#: Kept at the end of the night for the combined report (Markdown and HTML); MEMBER_HTML_S more is
#: kept before it, so that a run the deadline cut still gets its HTML page (plots from its traces).
CAMPAIGN_RESERVE_S = 5.0
#: Kept at the end of each run for reverting its last change and writing its report.
RUN_RESERVE_S = 10.0
#: Run statuses after which a member needs nothing more from the campaign.
ENDED = ("completed", "failed", "not_worth_tuning", "awaiting_approval")


class CampaignError(DftuneError):
    """A campaign cannot be started or continued as asked (one line, with the reason)."""


class CampaignFile(RunSettings):
    """A campaign TOML: the specs (relative to the file), its deadline, and the run settings every
    member shares (any RunSettings field; the command line wins over the file, see cli ``run``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(default="campaign", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    workloads: list[str] = Field(min_length=1)
    time_budget: str | None = None
    deadline: str | None = None


def is_campaign_file(path: Path) -> bool:
    """A TOML with a ``workloads`` list is a campaign; anything else is read as a workload spec."""
    try:
        return "workloads" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def load_campaign_file(path: Path) -> tuple[CampaignFile, list[Path]]:
    """The campaign file and its specs' paths (relative to it); errors name the file and the key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        cf = CampaignFile.model_validate(data)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CampaignError(f"{path}: cannot be read as a campaign TOML: {exc}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        what = (
            "unknown key"
            if err["type"] == "extra_forbidden"
            else str(err["msg"]).removeprefix("Value error, ")
        )
        raise CampaignError(
            f"{path}: {where}: {what}"
            if err["type"] != "extra_forbidden"
            else f"{path}: unknown key '{where}'"
        ) from None
    specs = [(path.parent / w).resolve() if not Path(w).is_absolute() else Path(w) for w in cf.workloads]
    return cf, specs


def is_campaign(campaign_id: str, store: CampaignStore | None = None) -> bool:
    return (store or CampaignStore()).exists(campaign_id)


def _spec_of(member: Member, ws: Workspace) -> WorkloadSpec:
    """A member's spec: the run's archived copy once the run exists (a run never changes its workload)."""
    archived = ws.run_dir(member.run_id) / ARCHIVED_SPEC
    if archived.is_file():
        return with_levers(load_spec(archived, located_at=member.spec_path), levers.saved(archived.parent))
    return load_spec(member.spec_path)


def start_campaign(
    spec_paths: list[Path],
    *,
    deadline: float | None,
    budget_text: str = "",
    campaign_id: str | None = None,
    name: str = "campaign",
    settings: RunSettings | None = None,
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    store: CampaignStore | None = None,
    **overrides: Any,
) -> CampaignResult:
    """Create the campaign (every spec is validated first) and drive it to its end."""
    ws, store = workspace or Workspace(), store or CampaignStore()
    if not spec_paths:
        raise CampaignError("a campaign needs at least one workload spec")
    specs = [load_spec(p) for p in spec_paths]  # a bad spec fails now, before anything runs
    for s in specs:
        check_runnable(s)
    run_settings = run_settings_of(settings, overrides)
    cid = validate_run_id(campaign_id) if campaign_id else new_run_id(name)
    members = [
        Member(spec_path=str(Path(p).resolve()), workload=s.name, run_id=new_run_id(s.name))
        for p, s in zip(spec_paths, specs, strict=True)
    ]
    meta = CampaignMeta(
        id=cid,
        name=name,
        created=datetime.now(UTC),
        deadline=deadline,
        budget=budget_text,
        members=members,
        pid=os.getpid(),
        settings=run_settings.model_dump(mode="json"),
    )
    store.create(meta)
    store.log(
        cid,
        "start",
        f"campaign of {len(members)} workload(s)"
        + (f", deadline {clock(deadline)}" if deadline else ", no deadline"),
        members=[m.model_dump() for m in members],
    )
    return _drive(meta, store, ws, progress)


def resume_campaign(
    campaign_id: str,
    *,
    deadline: float | None = None,
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    store: CampaignStore | None = None,
) -> CampaignResult:
    """Continue every member that has not ended; ``deadline`` replaces the campaign's (a new night)."""
    ws, store = workspace or Workspace(), store or CampaignStore()
    meta = store.read(campaign_id)
    if meta.status == "running" and driver_alive(meta) and meta.pid != os.getpid():
        raise CampaignError(f"campaign {campaign_id} is being driven by process {meta.pid}")
    if deadline is not None:
        meta.deadline = deadline
    elif (
        meta.deadline is not None
        and meta.deadline <= _now() + CAMPAIGN_RESERVE_S + MEMBER_HTML_S + RUN_RESERVE_S
    ):
        raise CampaignError(
            f"campaign {campaign_id}: its deadline {clock(meta.deadline)} has passed; give a new "
            f"one: dftune resume {campaign_id} --time-budget 2h"
        )
    meta.status, meta.status_reason, meta.pid, meta.ended = "running", "", os.getpid(), None
    store.write(meta)
    store.log(
        campaign_id, "resume", "resumed" + (f", deadline {clock(meta.deadline)}" if meta.deadline else "")
    )
    return _drive(meta, store, ws, progress)


def _report_at(meta: CampaignMeta) -> float | None:
    """When the combined report must start (None: no deadline)."""
    return meta.deadline - CAMPAIGN_RESERVE_S if meta.deadline else None


def _now() -> float:
    import time

    return time.time()


class _Member:
    """One member's run, its baseline units and its thread."""

    def __init__(
        self,
        m: Member,
        meta: CampaignMeta,
        ws: Workspace,
        pool: SlotPool,
        deadline: Deadline | None,
        progress: ProgressFn,
    ) -> None:
        self.m, self.meta, self.ws = m, meta, ws
        self.spec = _spec_of(m, ws)
        run_dir = ws.run_dir(m.run_id)
        n = meta.settings.get("replicates") or self.spec.replicates
        self.units = BaselineUnits(
            self.spec,
            ws.baseline_dir(m.run_id),
            n,
            traced=self.spec.tracing.mode != "off",
            lane=m.run_id,
            pool=pool,
            deadline=deadline,
            gate=lambda: (run_dir / "run.json").is_file(),
            owner=ws.process_owner(m.run_id),
        )
        self.budget = Budget(deadline=deadline, pool=pool, lane=m.run_id, units=self.units)
        self.progress = progress
        self.result: RunResult | None = None
        self.thread = threading.Thread(target=self._run, name=f"run-{m.workload}", daemon=True)

    def say(self, node: str, message: str) -> None:
        self.progress(node, f"{self.m.workload}: {message}")

    def _run(self) -> None:
        m, s = self.m, self.meta.settings
        try:
            if (self.ws.run_dir(m.run_id) / CHECKPOINT_FILE).is_file():
                self.result = resume_run(m.run_id, progress=self.say, workspace=self.ws, budget=self.budget)
            else:
                self.result = start_run(
                    m.spec_path,
                    settings=RunSettings.layered(s),
                    run_id=m.run_id,
                    progress=self.say,
                    workspace=self.ws,
                    budget=self.budget,
                )
            m.status, m.reason = self.result.status, self.result.status_reason
            # approvals and changes kept on trial, as the run's result lists them
            m.pending = [p.model_dump(mode="json") for p in self.result.pending]
            if m.status == "awaiting_approval":  # the morning reader still gets what was measured
                who = self.result.pending[0].proposal_id if self.result.pending else None
                m.reason = f"{who} waits for a person: dftune approve {m.run_id} [--reject]"
                interim_report(m.run_id, self.ws, self.spec, m.reason)
        except BaselineNotReady as exc:
            m.status, m.reason = "interrupted", one_line(exc)
            self._mark("interrupted")
        except DftuneError as exc:
            m.status, m.reason = "failed", one_line(exc)
            self._mark("failed")
        except Exception as exc:  # one workload's crash must not end the others
            m.status, m.reason = "failed", f"internal error: {type(exc).__name__}: {exc}"
            self._mark("failed")
        finally:
            self.units.stop()
            m.coverage = _coverage(self.units, self.result)
        # its page now (in a measurement slot, as an analysis: plotting beside another workload's
        # replicate would disturb it); the combined report at the end only adds what is missing
        try:
            with self.budget.job(self.ws.run_dir(m.run_id), "HTML page", self.spec, arm=False):
                write_member_html(m.run_id, self.ws, _report_at(self.meta))
        except Exception as exc:  # a page is a convenience: its failure must not hide the run's result
            self.say("report", f"no HTML page: {type(exc).__name__}: {one_line(exc)}")

    def _mark(self, status: str) -> None:
        with contextlib.suppress(DftuneError):  # the run folder was never made (its spec failed before start)
            self.ws.set_status(self.m.run_id, status)


def _coverage(units: BaselineUnits, result: RunResult | None) -> dict[str, Any]:
    c = units.counts()
    return {
        "units_total": units.n,
        "units_ok": len(c["ok"]),
        "units_failed": len(c["failed"]),
        "units_pending": len(c["pending"]) + len(c["running"]),
        "experiments": len(result.verdicts) if result else 0,
    }


def _drive(meta: CampaignMeta, store: CampaignStore, ws: Workspace, progress: ProgressFn) -> CampaignResult:
    pool = SlotPool(1)
    deadline = (
        Deadline(meta.deadline - CAMPAIGN_RESERVE_S - MEMBER_HTML_S, reserve_s=RUN_RESERVE_S)
        if meta.deadline
        else None
    )
    todo = [m for m in meta.members if m.status not in ENDED]
    runners = []
    for m in todo:
        try:
            runners.append(_Member(m, meta, ws, pool, deadline, progress))
        except (SpecError, DftuneError) as exc:
            m.status, m.reason = "failed", one_line(exc)
            store.log(
                meta.id, "member", f"{m.workload}: failed before it started: {m.reason}", run_id=m.run_id
            )
    for r in runners:
        r.m.status = "running"
        store.log(meta.id, "member", f"{r.m.workload}: run {r.m.run_id} started", run_id=r.m.run_id)
    store.write(meta)
    for r in runners:
        r.units.start()
        r.thread.start()
    # every run stops itself in time; should one overrun, the combined report is still written in time
    report_at = _report_at(meta)
    logged: set[str] = set()
    for r in runners:
        r.thread.join(None if report_at is None else max(0.0, report_at - _now()))
        _log_end(r, meta, store, logged)
    paths = _finish(meta, store, ws)
    if any(r.thread.is_alive() for r in runners):
        for r in runners:
            r.thread.join()
            _log_end(r, meta, store, logged)
        paths = _finish(meta, store, ws)
    progress("campaign", f"report: {paths.get('markdown')}")
    return campaign_result(meta, ws, paths)


def _log_end(r: _Member, meta: CampaignMeta, store: CampaignStore, logged: set[str]) -> None:
    if r.thread.is_alive() or r.m.run_id in logged:
        return
    logged.add(r.m.run_id)
    store.log(
        meta.id,
        "member",
        f"{r.m.workload}: {r.m.status}" + (f" ({r.m.reason})" if r.m.reason else ""),
        run_id=r.m.run_id,
        coverage=r.m.coverage,
    )
    store.write(meta)


def _finish(meta: CampaignMeta, store: CampaignStore, ws: Workspace) -> dict[str, str]:
    ended = all(m.status in ENDED for m in meta.members)
    meta.status = "completed" if ended else "interrupted"
    meta.status_reason = _summary(meta)
    meta.ended = datetime.now(UTC)
    store.write(meta)
    paths = write_campaign_reports(meta, ws, store.dir(meta.id), html=True, until=meta.deadline)
    try:  # each workload's kept configuration and an index (docs/bundle.md)
        paths["bundle"] = str(write_campaign_bundle(meta, ws, store.dir(meta.id) / RUN_BUNDLE, replace=True))
    except (DftuneError, OSError) as exc:  # an extra the campaign's result never depends on
        store.log(meta.id, "end", f"no bundle: {one_line(exc)}")
    store.log(meta.id, "end", f"{meta.status}: {meta.status_reason}", reports=paths)
    return paths


def _summary(meta: CampaignMeta) -> str:
    by: dict[str, list[str]] = {}
    for m in meta.members:
        by.setdefault(m.status, []).append(m.workload)
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by.items()))


def campaign_result(meta: CampaignMeta, ws: Workspace, paths: dict[str, str] | None = None) -> CampaignResult:
    """``dftune run --json`` of a campaign: its status, each member's run and coverage, the reports."""
    from dftune.tools.report.campaign import coverage_sentence, member_rows, timing_text

    rows = member_rows(meta, ws)
    partial, coverage = coverage_sentence(rows)
    return CampaignResult(
        campaign_id=meta.id,
        status=meta.status,
        status_reason=meta.status_reason,
        deadline=meta.deadline,
        deadline_text=clock(meta.deadline) if meta.deadline else None,
        ended=meta.ended.isoformat() if meta.ended else None,
        finished_before_deadline=(meta.ended.timestamp() <= meta.deadline)
        if meta.ended and meta.deadline
        else None,
        timing=timing_text(meta),
        partial=partial,
        coverage=coverage,
        members=rows,
        report=(paths or {}).get("markdown"),
        html=(paths or {}).get("html"),
        campaign_dir=str(CampaignStore().dir(meta.id)),
        bundle=str(own) if (own := CampaignStore().dir(meta.id) / RUN_BUNDLE).is_dir() else None,
    )


def campaign_history(campaign_id: str, store: CampaignStore | None = None) -> list[dict[str, Any]]:
    """The campaign's events, oldest first (each member run has its own ``dftune history``)."""
    return (store or CampaignStore()).events(campaign_id)


def campaign_reports(
    campaign_id: str,
    *,
    html: bool = False,
    workspace: Workspace | None = None,
    store: CampaignStore | None = None,
) -> dict[str, str]:
    """(Re)write the combined report of a campaign."""
    store = store or CampaignStore()
    meta = store.read(campaign_id)
    return write_campaign_reports(meta, workspace or Workspace(), store.dir(campaign_id), html=html)


def interim_report(run_id: str, ws: Workspace, spec: WorkloadSpec, reason: str) -> None:
    """report.json/report.md of a run that waits for an approval: everything measured so far (finalize
    rewrites them when the run ends)."""

    from dftune.graphs.checkpointer import open_checkpointer
    from dftune.graphs.finalize import run_report, write_report
    from dftune.graphs.pipeline import builder
    from dftune.graphs.runs import _as_state

    saver = open_checkpointer(ws.run_dir(run_id) / CHECKPOINT_FILE)
    try:
        values = builder.compile(checkpointer=saver).get_state({"configurable": {"thread_id": run_id}}).values
    finally:
        saver.conn.close()
    if values:
        report = run_report(_as_state(values), spec, status="awaiting_approval", status_reason=reason)
        write_report(ws.run_dir(run_id), report)
