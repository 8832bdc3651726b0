"""The run tools: start a tuning run, list runs, show one, answer its question, resume it, read its report.

A run can take hours, longer than an MCP client waits for one call, so the tools that drive a
run (start, answer, resume) check everything the command line checks first (the spec, the model,
the budget, the knowledge base, the run's state, the answer's form) and then hand the drive to
``dftune run|approve|resume`` in a process of its own, detached from the client: the run lives
on if the client goes away, and it goes through exactly the command line's code and guards
(one driver per run, the approval policy, the knowledge-base guards). ``run_show`` reads the
run's saved state and can wait, up to a limit, for it to stop or to need a person.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from dftune.core.domain.run import Mode, RunSettings  # the MCP server's one import of the run settings
from dftune.mcp_server.registry import RunId, Toolbox, ToolFailure, _In

box = Toolbox()
#: the run settings' fields, whose defaults and descriptions run_start's inputs take over
SETTING = RunSettings.model_fields

#: How long one call may wait for a run to stop or ask (a client's own call timeout is usually minutes).
MAX_WAIT_S = 600
#: Characters of report.md returned by run_report (the whole file is on disk at the returned path).
REPORT_CHARS = 40_000
DRIVERS_DIR = "mcp-drivers"
#: Drivers whose files (stdout JSON, stderr log) are kept in $DFTUNE_HOME/mcp-drivers, newest first;
#: older ones go when a driver starts, and a run's own go once run_report has read its ended run.
MAX_DRIVER_LOGS = 50

# The drivers this server started, by run id: polled so an ended driver is reaped, never a zombie.
_drivers: dict[str, subprocess.Popen[bytes]] = {}

WaitS = Field(
    0,
    ge=0,
    le=MAX_WAIT_S,
    description="Wait up to this many seconds for the run to stop or to need a person.",
)


def _driver_files(run_id: str) -> tuple[Path, Path]:
    """Where a detached driver's stdout (its JSON result) and stderr (progress, refusal) go."""
    from dftune.core.home import dftune_home

    folder = dftune_home() / DRIVERS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{run_id}.json", folder / f"{run_id}.log"


def prune_driver_files(keep: int = MAX_DRIVER_LOGS) -> list[str]:
    """Remove the files of all but the ``keep`` most recent drivers (never a live one's); the run
    ids whose files went. The runs' own records are untouched: these are only the drivers' output."""
    from dftune.core.home import dftune_home

    folder = dftune_home() / DRIVERS_DIR
    newest: dict[str, float] = {}
    for f in folder.glob("*") if folder.is_dir() else ():
        if f.suffix in (".json", ".log") and f.is_file():
            newest[f.stem] = max(newest.get(f.stem, 0.0), f.stat().st_mtime)
    ranked = sorted(newest, key=lambda r: newest[r], reverse=True)
    gone = [r for r in ranked[keep:] if not driver_state(r)[0]]
    for run_id in gone:
        forget_driver(run_id)
        _driver_files(run_id)[0].with_suffix(".claim").unlink(missing_ok=True)
    return gone


def forget_driver(run_id: str) -> bool:
    """Remove an ended driver's files (its result was read); a live driver's stay. True if removed."""
    if driver_state(run_id)[0]:
        return False
    _drivers.pop(run_id, None)
    for f in _driver_files(run_id):
        f.unlink(missing_ok=True)
    return True


#: a claim younger than this, by a server still alive, holds its run id (its driver has not yet
#: made the run's folder); an older one is stale
CLAIM_S = 120.0


def _claim(run_id: str) -> bool:
    """Claim ``run_id`` for this server across every server on this DFTUNE_HOME (two MCP servers
    given one run id at once): the claim file is created exclusively, so one claimant wins."""
    import json

    from dftune.core.supervise import pid_alive

    path = _driver_files(run_id)[0].with_suffix(".claim")
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                held = json.loads(path.read_text(encoding="utf-8"))
                mine_ended = int(held["pid"]) == os.getpid() and not driver_state(run_id)[0]
                alive = (
                    pid_alive(int(held["pid"]))
                    and time.time() - float(held["at"]) < CLAIM_S
                    and not mine_ended  # this server's own driver for it ended without a run
                )
            except (OSError, ValueError, KeyError, TypeError):
                alive = False
            if alive:
                return False
            path.unlink(missing_ok=True)  # stale: its server is gone, or its driver long started
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"pid": os.getpid(), "at": time.time()}, fh)
        return True
    return False


def spawn_driver(run_id: str, args: list[str]) -> None:
    """``dftune ARGS --json`` in its own session (a client's exit or Ctrl-C does not stop the run)."""
    prune_driver_files(MAX_DRIVER_LOGS - 1)
    out, err = _driver_files(run_id)
    argv = [sys.executable, "-m", "dftune.cli", *args, "--json"]
    with out.open("wb") as o, err.open("ab") as e:
        _drivers[run_id] = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e, start_new_session=True, env=os.environ.copy()
        )


def driver_state(run_id: str) -> tuple[bool, int | None]:
    """(this server's driver for the run still runs, its exit code once it ended)."""
    proc = _drivers.get(run_id)
    if proc is None:
        return False, None
    code = proc.poll()
    return code is None, code


def last_error(run_id: str) -> str | None:
    """The driver's last stderr line: the one-line reason a refused or failed drive gave."""
    _, err = _driver_files(run_id)
    try:
        lines = [ln for ln in err.read_text("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1].strip() if lines else None


def _show(run_id: str) -> dict[str, Any]:
    """The run as it is now: its saved result, with the live driver's word on whether it runs."""
    from dftune.graphs.runs import run_result
    from dftune.tools.session.workspace import RunNotFound, Workspace

    ws = Workspace()
    alive, code = driver_state(run_id)
    driver = ws.driver_pid(run_id) if ws.run_dir(run_id).is_dir() else None
    try:
        doc = run_result(run_id, ws).document()
    except RunNotFound:
        if not alive and code is None:
            raise
        doc = {
            "schema": "dftune.run/1",
            "run_id": run_id,
            "status": "starting" if alive else "failed",
            "pending": [],
        }
    except ToolFailure:
        raise
    except Exception as exc:  # no checkpoint yet (killed before the first one): say so, do not guess
        if not (alive or driver):
            raise
        doc = {
            "schema": "dftune.run/1",
            "run_id": run_id,
            "status": "starting",
            "pending": [],
            "note": str(exc),
        }
    if alive or driver is not None:
        doc["status"] = "running"  # the saved state lags the live driver
        doc["pending"] = []
    if code not in (None, 0):
        doc["driver_exit_code"] = code
        doc["driver_error"] = last_error(run_id)
    if _driver_files(run_id)[1].is_file():
        doc["driver_log"] = str(_driver_files(run_id)[1])
    doc["next"] = _next_step(run_id, doc["status"])
    return doc


def _next_step(run_id: str, status: str) -> str:
    """What a client does next, in tool terms."""
    if status in ("starting", "running"):
        return f"run_show(run_id={run_id!r}, wait_s=...) until it stops or asks"
    if status == "awaiting_approval":
        return f"run_answer(run_id={run_id!r}, decision='approve'|'reject', reason=...)"
    if status in ("interrupted", "failed"):
        return f"run_resume(run_id={run_id!r})"
    return f"run_report(run_id={run_id!r})"


def _waited(run_id: str, wait_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while True:
        doc = _show(run_id)
        if doc["status"] not in ("starting", "running") or time.monotonic() >= deadline:
            return doc
        time.sleep(0.5)


#: the folders whose workload specs run_start may run (``dftune mcp --allow DIR``); the current
#: folder when the server starts without one
_allowed: list[Path] = []
#: run_start calls in flight: a run id is started by one call only
_starting = threading.Lock()


def allow_specs_from(folders: list[Path]) -> None:
    _allowed[:] = [f.expanduser().resolve() for f in folders]


def allowed_path(path: Path) -> None:
    """A spec (or a bundle) outside the folders the person allowed is refused: a client may not run
    any program whose spec the server can read."""
    folders = _allowed or [Path.cwd().resolve()]
    if not any(path.is_relative_to(f) for f in folders):
        shown = ", ".join(map(str, folders))
        raise ToolFailure(
            f"{path} is outside the folders this server runs programs from ({shown}): start it with "
            "dftune mcp --allow DIR to allow another"
        )


def _idle(run_id: str) -> None:
    """Refuse to drive a run that another driver drives (the run's own lock refuses it too, later)."""
    from dftune.tools.session.workspace import RunNotFound, Workspace

    ws = Workspace()
    if not ws.run_dir(run_id).is_dir():
        raise RunNotFound(f"no run {run_id!r} under {ws.root}")
    pid = ws.driver_pid(run_id)
    if pid is not None or driver_state(run_id)[0]:
        who = f"pid {pid}" if pid and pid > 0 else "another process"
        raise ToolFailure(f"run {run_id} is being driven by {who}: one driver per run; run_show it and wait")


# --------------------------------------------------------------------------- start


class RunStartIn(_In):
    spec: str = Field(min_length=1, description="Workload spec (TOML): command, knobs, metric (see docs).")
    # run settings: default, bounds and description are RunSettings' (the MCP caps a few for an assistant)
    max_experiments: Annotated[int, SETTING["max_experiments"], Field(le=100)]
    time_budget: str | None = Field(
        None, description="Wall-clock budget, e.g. '90s', '20m', '8h': nothing starts that cannot finish."
    )
    mode: Annotated[Mode, SETTING["mode"]]
    replicates: Annotated[int | None, SETTING["replicates"], Field(le=50)]
    run_id: str | None = Field(None, description="The run's id (default: a new one from time and workload).")
    model: Annotated[str, SETTING["model"]]
    force: Annotated[bool, SETTING["force"]]
    declared_only: Annotated[bool, SETTING["declared_only"]]
    verify_pairs: Annotated[int, SETTING["verify_pairs"]]
    wait_s: int = WaitS


@box.tool(
    "run_start",
    RunStartIn,
    """Start a tuning run of a workload spec with a budget (max_experiments, time_budget): baseline,
       diagnosis, cited proposals, one guarded experiment at
       a time, report. Checked as `dftune run` checks it,
       then driven in a detached process (it outlives this call); returns the run id and its state after
       wait_s. Follow with run_show, run_answer when it asks, run_report when it ends.""",
    read_only=False,
)
def run_start_tool(p: RunStartIn) -> dict[str, Any]:
    """An assistant can tune, not only analyze, under the same checks as the command line."""
    from dftune.agents.reasoner import check_model
    from dftune.tools.kb.backup import check_kb
    from dftune.tools.runner.deadline import resolve
    from dftune.tools.runner.spec import load_spec
    from dftune.tools.session.layout import new_run_id, validate_run_id
    from dftune.tools.session.workspace import RunExists, Workspace

    path = Path(p.spec).expanduser().resolve()
    allowed_path(path)
    spec = load_spec(path)  # a bad spec: one line naming the file and the key
    check_model(p.model)
    resolve(p.time_budget, None)  # a malformed budget is refused before anything runs
    check_kb()
    run_id = validate_run_id(p.run_id) if p.run_id else new_run_id(spec.name)
    with _starting:  # one call starts a run id; the others are told it is taken
        taken = Workspace().run_dir(run_id).exists() or driver_state(run_id)[0]
        if taken or not _claim(run_id):  # _claim: another server on this DFTUNE_HOME starts it
            raise RunExists(f"run {run_id!r} already exists (run_show it, or choose another run_id)")
        _start_driver(run_id, p, path)
    return {**_waited(run_id, p.wait_s), "started": True}


def _start_driver(run_id: str, p: RunStartIn, path: Path) -> None:
    args = [
        "run",
        str(path),
        "--run-id",
        run_id,
        "--mode",
        p.mode,
        "--max-experiments",
        str(p.max_experiments),
        "--model",
        p.model,
    ]
    if p.time_budget:
        args += ["--time-budget", p.time_budget]
    if p.replicates is not None:
        args += ["--replicates", str(p.replicates)]
    if p.force:
        args.append("--force")
    if p.declared_only:
        args.append("--declared-only")
    args += ["--verify-pairs", str(p.verify_pairs)]
    spawn_driver(run_id, args)


# --------------------------------------------------------------------------- look


class RunListIn(_In):
    limit: int = Field(50, ge=1, le=1000, description="At most this many runs, newest first.")


@box.tool(
    "run_list",
    RunListIn,
    """Every run (and campaign) under $DFTUNE_HOME, newest first: id, workload, status
       (running, awaiting_approval, completed, interrupted, failed), why, and the step that continues it.""",
)
def run_list_tool(p: RunListIn) -> dict[str, Any]:
    """Which runs exist and which wait for something."""
    from dftune.tools.session.campaigns import list_campaigns
    from dftune.tools.session.workspace import Workspace

    rows = [r.model_dump(mode="json") for r in Workspace().list_runs()][::-1]
    return {
        "schema": "dftune.runs/1",
        "runs": rows[: p.limit],
        "runs_total": len(rows),
        "campaigns": list_campaigns(),
    }


class RunShowIn(_In):
    run_id: str = RunId
    wait_s: int = WaitS


@box.tool(
    "run_show",
    RunShowIn,
    """One run: status, the pending question (the change waiting for a person, with its citation and
       how to answer), verdicts of its experiments, refused proposals, baseline and best median, report path,
       and the next step. wait_s waits for a running run to stop or to ask.""",
)
def run_show_tool(p: RunShowIn) -> dict[str, Any]:
    """Read a run without driving it."""
    return _waited(p.run_id, p.wait_s)


# --------------------------------------------------------------------------- drive


class RunAnswerIn(_In):
    run_id: str = RunId
    decision: str = Field(description="'approve' or 'reject' (nothing else is an answer).")
    reason: str = Field("", description="Why: kept in the run's record and its report.")
    wait_s: int = WaitS


@box.tool(
    "run_answer",
    RunAnswerIn,
    """Answer the question a run waits for (run_show's `pending`): approve or reject the change, with a
       reason; the run then continues in a detached process, as after `dftune approve`. Only an exact
       'approve' or 'reject' is an answer; a run that waits for nothing is refused, unchanged.""",
    read_only=False,
)
def run_answer_tool(p: RunAnswerIn) -> dict[str, Any]:
    """A person's decision reaches the run through the same strict answer and guards as the command line."""
    from dftune.core.domain.run import PatternQuestion
    from dftune.graphs.approval import parse_answer
    from dftune.graphs.runs import run_result

    answer, why = parse_answer({"decision": p.decision, "reason": p.reason})
    if answer is None:
        raise ToolFailure(why)
    _idle(p.run_id)
    before = run_result(p.run_id)  # no driver drives it (``_idle``): its saved result is current
    if not before.pending:  # an approval the run stopped at, else a change kept on trial
        raise ToolFailure(f"run {p.run_id} is not waiting for an answer (status {before.status})")
    first = before.pending[0]
    privilege = getattr(first, "privilege", "no-sudo")
    if answer.decision == "approve" and privilege != "no-sudo":
        raise ToolFailure(
            f"{first.proposal_id} needs {privilege} privileges: a privileged change is approved in a "
            f"terminal only: dftune approve {p.run_id} (run_answer may reject it)"
        )
    args = ["approve", p.run_id, "--reason", answer.reason, "--via-mcp"] + (
        ["--reject"] if answer.decision == "reject" else []
    )
    spawn_driver(p.run_id, args)
    receipt = {
        "proposal_id": first.proposal_id,
        "strategy": None if isinstance(first, PatternQuestion) else first.strategy,
        "kind": first.kind,
        "decision": answer.decision,
        "reason": answer.reason,
    }
    return {**_waited(p.run_id, p.wait_s), "answered": receipt}


class RunResumeIn(_In):
    run_id: str = RunId
    time_budget: str | None = Field(None, description="A new wall-clock budget, e.g. '30m'.")
    wait_s: int = WaitS


@box.tool(
    "run_resume",
    RunResumeIn,
    """Continue an interrupted run (crash, kill, budget) from its last saved state, in a detached process,
       as `dftune resume`; nothing is applied or recorded twice. A run waiting for an answer is refused.""",
    read_only=False,
)
def run_resume_tool(p: RunResumeIn) -> dict[str, Any]:
    """Long runs stop; they go on from where they stopped."""
    from dftune.tools.runner.deadline import resolve

    resolve(p.time_budget, None)
    _idle(p.run_id)
    before = _show(p.run_id)
    if before["status"] == "awaiting_approval":
        raise ToolFailure(f"run {p.run_id} waits for approval: answer it with run_answer")
    args = ["resume", p.run_id] + (["--time-budget", p.time_budget] if p.time_budget else [])
    spawn_driver(p.run_id, args)
    return _waited(p.run_id, p.wait_s)


class RunReportIn(_In):
    run_id: str = RunId
    html: bool = Field(False, description="Also write report.html (plots embedded).")


@box.tool(
    "run_report",
    RunReportIn,
    """(Re)write a finished run's report.md (and report.html with html=true) and return their paths
       (markdown, html) and the markdown's text: what was measured,
       kept, refused, approved, with citations and fix snippets.""",
    read_only=False,
)
def run_report_tool(p: RunReportIn) -> dict[str, Any]:
    """What a person reads in the morning, for the client to summarize or link."""
    from dftune.tools.report.writer import write_reports

    if driver_state(p.run_id)[0]:
        raise ToolFailure(f"run {p.run_id} is still running: run_show(run_id, wait_s=...) first")
    paths = write_reports(p.run_id, html=p.html)
    text = Path(paths["markdown"]).read_text("utf-8")
    forget_driver(p.run_id)  # the run ended and its result is read: its driver's output is done with
    return {
        "schema": "dftune.report/1",
        "run_id": p.run_id,
        **paths,
        "text": text[:REPORT_CHARS],
        "truncated": len(text) > REPORT_CHARS,
    }
