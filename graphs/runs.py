"""Drive the tuning graph for one run: start, resume, approve, history, replay.

Each run has its own checkpointer (``runs/<run_id>/checkpoints.sqlite``) and the run id is
the thread id. The graph is streamed with durability ``sync``, so after a crash or a kill
``resume`` continues from the last completed node: the change journal and the KB's dedup
keys make sure nothing is applied or recorded twice.

Every drive (start, resume, approve, replay) goes through :func:`_driving`, the one place that
holds the run's driver lock, checks the KB, kills what a dead driver left running, and, whatever
raised, leaves the run marked ``interrupted`` (a signal, a full or read-only disk: resumable) or
``failed`` with its reason before the process exits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import ValidationError

from dftune.agents.budget import Budget
from dftune.agents.context import Context, ProgressFn, silent
from dftune.agents.literature import make_evidence, make_search
from dftune.agents.optimizer import proposal_table
from dftune.agents.reasoner import check_model, llm_settings, make_reasoner
from dftune.core.domain.levers import Levers
from dftune.core.domain.proposals import REFUSED
from dftune.core.domain.run import (
    REPLAYABLE_FIELDS,
    STATE_VERSION,
    MetricInfo,
    RefusedRow,
    ReplayOrigin,
    RunResult,
    RunSettings,
    RunStatus,
    TuningState,
    VerdictRow,
)
from dftune.core.errors import DftuneError, StorageError, is_storage_error, one_line, storage_error
from dftune.core.fsio import UnreadableFile, atomic_write_bytes, read_regular
from dftune.core.supervise import LEDGER_FILE, DriverInterrupted, supervised
from dftune.graphs.approval import ApprovalAnswer, receipt
from dftune.graphs.checkpointer import CHECKPOINT_FILE, copy_branch, open_checkpointer
from dftune.graphs.pending import answer_first, answer_for, pending_items, question
from dftune.graphs.pipeline import builder
from dftune.tools.kb.backup import backup_kb, check_kb
from dftune.tools.runner import levers
from dftune.tools.runner.levers import with_levers
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.spec import SPEC_BYTES, SpecError, WorkloadSpec, load_spec
from dftune.tools.runner.spec_check import check_runnable
from dftune.tools.session.layout import MAX_RUN_ID_LEN, RUN_BUNDLE
from dftune.tools.session.workspace import RunNotFound, Workspace


class RunError(DftuneError):
    """The run cannot be started or continued as asked: one line, with the reason."""


class RunRefused(RunError):
    """The run is not in a state the request fits (it waits for an approval, it does not, it was
    saved by another dftune): refused, and the run is left exactly as it was."""


class RunInterrupted(RunError):
    """SIGTERM/SIGINT stopped the driver: its programs were killed and the run can be resumed."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


@contextmanager
def _driving(run_id: str, ws: Workspace, progress: ProgressFn) -> Iterator[None]:
    """The one place a run is driven from; see the module docstring.

    A second driver is refused before anything (:class:`RunLocked`); a damaged KB is refused
    before anything is measured. Then leftovers of a dead driver are killed (:func:`_drive` marks
    the run running), and on the way out, whatever raised, its status says what happened and why."""
    resume = f"dftune resume {run_id}"
    with ws.driving(run_id):
        check_kb()
        with supervised(ws.process_owner(run_id), ws.run_dir(run_id) / LEDGER_FILE) as leftovers:
            if leftovers:
                progress(
                    "run",
                    f"killed {len(leftovers)} leftover process(es) of an earlier driver of this "
                    f"run before measuring: {', '.join(leftovers[:5])}",
                )
            try:
                yield
            except RunRefused:
                raise
            except DriverInterrupted as exc:
                why = f"{exc}: its programs were killed; continue with {resume}"
                _mark(ws, run_id, "interrupted", why, resume)
                raise RunInterrupted(f"run {run_id} {why}", exc.signum) from None
            except BaseException as exc:
                if is_storage_error(exc):
                    err = exc if isinstance(exc, StorageError) else storage_error(exc)
                    why = f"{one_line(err)}; free space (or make it writable) and {resume}"
                    _mark(ws, run_id, "interrupted", why, resume)
                    raise StorageError(f"run {run_id}: {why}") from None
                internal = not isinstance(exc, DftuneError | KeyboardInterrupt)
                why = (f"internal error: {type(exc).__name__}: " if internal else "") + one_line(exc)
                _mark(ws, run_id, "failed", why, resume)
                raise
    try:  # a rolling copy of a KB that passed the check (never a damaged one)
        backup_kb()
    except Exception as exc:  # the run itself is done; say why there is no new copy
        progress("kb", f"no backup of the knowledge base this time: {one_line(exc)}")


def _mark(ws: Workspace, run_id: str, status: str, reason: str, next_step: str) -> None:
    """Best effort: on a full disk even run.json may not be writable (``dftune runs`` then shows
    the run as interrupted anyway, since no driver holds its lock)."""
    with suppress(Exception):
        ws.set_status(run_id, status, reason=reason, next_step=next_step)


@contextmanager
def _compiled(run_id: str, ws: Workspace) -> Iterator[tuple[Any, RunnableConfig]]:
    saver = open_checkpointer(ws.run_dir(run_id) / CHECKPOINT_FILE)
    try:
        yield builder.compile(checkpointer=saver), {"configurable": {"thread_id": run_id}}
    finally:
        saver.conn.close()


ARCHIVED_SPEC = "workload.toml"
#: The most of a run's own small file (its levers) a replay copies
RUN_FILE_BYTES = 16 << 20


def _context(
    state: TuningState | dict[str, Any],
    ws: Workspace,
    progress: ProgressFn,
    budget: Budget | None = None,
    measurer: Measurer | None = None,
) -> Context:
    """Rebuilt on every start/resume: the spec from the run's archived copy (so a run never changes
    its workload under itself), the reasoner from the state's ``model``, the literature search
    (local store first; remote only when online, see DFTUNE_OFFLINE), the measurer (None: the
    real one, which starts the workload's program)."""
    s = state if isinstance(state, TuningState) else _as_state(state)
    ctx = Context(
        spec=archived_spec(s, ws, progress),
        reasoner=make_reasoner(s.model, settings=s.llm),
        workspace=ws,
        progress=progress,
        search=make_search(),
        evidence=make_evidence(),
        budget=budget,
    )
    if measurer is not None:
        ctx.measurer = measurer
    return ctx


def archived_spec(state: TuningState, ws: Workspace, progress: ProgressFn = silent) -> WorkloadSpec:
    """The spec the run was started with (``runs/<id>/workload.toml``), its relative paths resolved
    where the original lives; a changed original is reported, never used (``replay --set``
    changes a run's inputs)."""
    archived = ws.run_dir(state.run_id) / ARCHIVED_SPEC
    if not archived.is_file():
        raise RunError(f"run {state.run_id} has no archived spec {archived}: it cannot be continued")
    original = Path(state.spec_path)
    try:
        changed = read_regular(original, SPEC_BYTES, "workload spec") != read_regular(
            archived, SPEC_BYTES, "archived workload spec"
        )
    except (OSError, UnreadableFile):  # a spec swapped for a pipe or a device is a changed one
        changed = True
    if changed:
        progress(
            "run",
            f"{original} changed (or went away) since the run started: the run keeps "
            f"using its archived copy {archived}",
        )
    return with_levers(load_spec(archived, located_at=original), levers.saved(archived.parent))


def _drive(graph: CompiledStateGraph, config: RunnableConfig, payload: Any, ctx: Context) -> None:
    """Stream the graph (inside :func:`_driving`): the run is running from here on; when the stream
    ends, run.json says whether it waits for a person."""
    run_id = str(config["configurable"]["thread_id"])
    ctx.workspace.set_status(run_id, "running")
    runnable: Any = graph  # the compiled graph's context type is not generic here
    for _ in runnable.stream(payload, config, context=ctx, durability="sync", stream_mode="updates"):
        pass
    snap = graph.get_state({"configurable": {"thread_id": run_id}})
    if any(t.interrupts for t in snap.tasks):
        ctx.workspace.set_status(run_id, "awaiting_approval", next_step=f"dftune approve {run_id} [--reject]")
        # said here, once the graph has stopped, not in the node (a resumed node runs again)
        ctx.progress("approval", f"waiting for a person: dftune approve {run_id} [--reject]")
    elif snap.next:
        ctx.workspace.set_status(
            run_id,
            "interrupted",
            reason="the graph stopped with work left",
            next_step=f"dftune resume {run_id}",
        )


def _snapshot_state(graph: CompiledStateGraph, config: RunnableConfig) -> tuple[TuningState, Any]:
    snap = graph.get_state(config)
    if not snap.values:
        raise RunError(
            "the run has no saved state yet (it was killed before its first checkpoint); start it again"
        )
    return _as_state(snap.values), snap


def _current(state: TuningState) -> TuningState:
    """A run saved by a dftune whose state had another shape cannot be continued safely."""
    if state.state_version != STATE_VERSION:
        raise RunRefused(
            f"run {state.run_id} was saved by an older dftune (state version {state.state_version}, this one "
            f"reads {STATE_VERSION}): it cannot be resumed, approved or replayed; its report.md stays "
            "readable as it was written, and a new run starts from its knowledge base"
        )
    return state


def _as_state(values: dict[str, Any] | TuningState) -> TuningState:
    if isinstance(values, TuningState):
        return values
    return TuningState(**{k: v for k, v in values.items() if k in TuningState.model_fields})


def _bundle_check(bundle: Path) -> str | None:
    """The newest check of the run's bundle made from a copy at the run's end, as one line."""
    from dftune.tools.bundle import verifications

    checks = [v for v in verifications(bundle) if v.where == "copy"] if bundle.is_dir() else []
    return checks[-1].line() if checks else None


def _result(run_id: str, ws: Workspace) -> RunResult:
    with _compiled(run_id, ws) as (graph, config):
        state, snap = _snapshot_state(graph, config)
        asked = [i.value for t in snap.tasks for i in t.interrupts]
    status: RunStatus = "awaiting_approval" if asked else state.status
    if not asked and snap.next:
        status = "interrupted"
    bundle = ws.run_dir(run_id) / RUN_BUNDLE
    return RunResult(
        run_id=run_id,
        status=status,
        status_reason=state.status_reason,
        workload=state.workload,
        spec_path=state.spec_path,
        pending=pending_items(state, asked),
        proposal_table=proposal_table(state.proposals),
        verdicts=[VerdictRow.of(e) for e in state.experiments],
        refused=[
            RefusedRow(proposal=p.id, strategy=p.strategy, status=p.status, reason=p.reason)
            for p in state.proposals
            if p.status in REFUSED
        ],
        kb_records=state.kb_records,
        report=state.report_path,
        bundle=str(bundle) if bundle.is_dir() else None,
        bundle_check=_bundle_check(bundle),
        kb_skill=state.kb_skill_path,
        baseline_median=state.baseline.median if state.baseline else None,
        best_median=state.incumbent.median if state.incumbent else None,
        run_dir=str(ws.run_dir(run_id)),
        metric=_metric(state, ws),
        levers=state.levers,
    )


def _metric(state: TuningState, ws: Workspace) -> MetricInfo | None:
    """The run's metric with its unit and direction (from its archived spec)."""
    from dftune.tools.report.sections import metric_info

    try:
        spec = load_spec(ws.run_dir(state.run_id) / ARCHIVED_SPEC, located_at=state.spec_path)
        return metric_info(spec)
    except DftuneError:
        return None


def _user() -> str:
    """The account answering (recorded with the answer); empty when the system cannot say."""
    import getpass

    try:
        return getpass.getuser()[:200]
    except (OSError, KeyError):
        return ""


def _where(run_id: str, snap: Any, state: TuningState) -> str:
    """Where a run stands at a saved state: step, checkpoint, time, what runs next, experiments so far."""
    meta = snap.metadata or {}
    cid = snap.config["configurable"].get("checkpoint_id", "?")
    nxt = ", ".join(snap.next) or "nothing (it has ended)"
    return (
        f"run {run_id} at step {meta.get('step', '?')} "
        f"(checkpoint {cid}, saved {str(snap.created_at)[:19]}): "
        f"next {nxt}; {len(state.experiments)} experiment(s) so far"
    )


def start_run(
    spec_path: str | Path,
    *,
    settings: RunSettings | None = None,
    run_id: str | None = None,
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    budget: Budget | None = None,
    measurer: Measurer | None = None,
    **overrides: Any,
) -> RunResult:
    """Create the run and drive the graph until it ends or waits for a person (or the budget ends it).

    ``settings``: how the run is driven (RunSettings); ``overrides`` are RunSettings fields that win
    over it (``start_run(spec, max_experiments=2)``), validated the same way."""
    ws = workspace or Workspace()
    path = Path(spec_path).resolve()
    spec = load_spec(path)  # a bad spec fails here, before a run folder exists
    check_runnable(spec)  # so does a program or a folder that is not there
    s = run_settings_of(settings, overrides)
    # so does an unusable --model: provider, package, key, base URL, before anything runs
    check_model(s.model)
    check_kb()  # a damaged KB refuses the run before a run folder exists
    meta = ws.create_run(run_id, spec.name)
    with _driving(meta.id, ws, progress):
        atomic_write_bytes(
            ws.run_dir(meta.id) / ARCHIVED_SPEC, read_regular(path, SPEC_BYTES, "workload spec")
        )
        found = _drafted(spec, ws.run_dir(meta.id), progress) if not s.declared_only else None
        state = TuningState(
            run_id=meta.id, spec_path=str(path), state_version=STATE_VERSION, levers=found, **dict(s)
        )
        with _compiled(meta.id, ws) as (graph, config):
            _drive(graph, config, state, _context(state, ws, progress, budget, measurer))
    return _result(meta.id, ws)


def _drafted(spec: WorkloadSpec, run_dir: Path, progress: ProgressFn) -> Levers | None:
    """The program's own levers, for a spec that declares no knob and no patch (saved with the run)."""
    if spec.knobs or spec.patches:
        return None
    found = levers.draft_levers(spec, run_dir)
    try:
        with_levers(spec, found)
    except SpecError as exc:  # a draft that does not fit: the run goes on with the spec as declared
        found = Levers(command=list(spec.command), note=f"{exc}: {levers.DECLARE_HINT}")
    levers.save(run_dir, found)
    for lv in found.found:
        progress("levers", f"found {lv.knob} ({lv.flag}, {lv.origin}): values {lv.values}")
    if not found.found:
        progress("levers", found.note)
    return found


def run_settings_of(settings: RunSettings | None, overrides: dict[str, Any]) -> RunSettings:
    """``overrides`` over ``settings`` over the defaults, as one validated RunSettings (one-line errors)."""
    if settings is None and overrides.get("llm") is None:
        overrides = {**overrides, "llm": llm_settings()}  # DFTUNE_LLM_* or the built-in defaults
    try:
        RunSettings.check(overrides)
        return RunSettings.layered(overrides, settings)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            name = "--" + "-".join(str(x) for x in err["loc"]).replace("_", "-")
            raise RunError(f"{name} {err.get('input')!r}: {err['msg']}") from None
        raise RunError(str(exc)) from None


def run_result(run_id: str, workspace: Workspace | None = None) -> RunResult:
    """The run's result document as start/resume/approve return it (status, pending question, verdicts),
    read from its saved state, for front ends that look at a run without driving it."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    return _result(run_id, ws)


def load_state(run_id: str, workspace: Workspace | None = None) -> TuningState:
    """The run's last saved graph state (what the benchmarks and the tests read after a run)."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    with _compiled(run_id, ws) as (graph, config):
        return _snapshot_state(graph, config)[0]


def _existing(run_id: str, ws: Workspace) -> None:
    if not (ws.run_dir(run_id) / CHECKPOINT_FILE).is_file():
        raise RunNotFound(f"no run {run_id!r} with saved graph states under {ws.root}")


def resume_run(
    run_id: str,
    *,
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    budget: Budget | None = None,
    measurer: Measurer | None = None,
) -> RunResult:
    """Continue after a crash or kill from the last checkpoint; never re-applies or re-records."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    with _driving(run_id, ws, progress), _compiled(run_id, ws) as (graph, config):
        state, snap = _snapshot_state(graph, config)
        _current(state)
        if any(t.interrupts for t in snap.tasks):
            raise RunRefused(f"run {run_id} waits for approval: dftune approve {run_id} [--reject]")
        if snap.next:
            progress("resume", "resuming " + _where(run_id, snap, state))
            _drive(graph, config, None, _context(state, ws, progress, budget, measurer))
        else:
            progress("resume", f"nothing to resume: {_where(run_id, snap, state)}")
    return _result(run_id, ws)


def approve_run(
    run_id: str,
    *,
    reject: bool = False,
    reason: str = "",
    channel: Literal["terminal", "mcp"] = "terminal",
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    measurer: Measurer | None = None,
) -> RunResult:
    """Answer the first pending item and continue the run: the approval the graph waits at, else the
    oldest change kept on trial (also after the run finished: a refusal measures again what stood on it)."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    answer = ApprovalAnswer(
        decision="reject" if reject else "approve", reason=reason, user=_user(), channel=channel
    )
    with _driving(run_id, ws, progress), _compiled(run_id, ws) as (graph, config):
        state, snap = _snapshot_state(graph, config)
        _current(state)
        if any(t.interrupts for t in snap.tasks):
            asked = question(next(i.value for t in snap.tasks for i in t.interrupts))
            progress("approve", receipt(asked, answer) + f"; continuing {_where(run_id, snap, state)}")
            resumed: Command[Any] = Command(resume=answer.model_dump())
            _drive(graph, config, resumed, _context(state, ws, progress, None, measurer))
        elif state.pending and not snap.next:
            first = state.pending[0]
            trial = f"opt{first.iteration} {first.proposal_id} (kept on trial)"
            progress("approve", receipt(trial, answer) + "; settling it, then continuing where the run ended")
            first_answer = answer_for(
                state, answer.decision, answer.reason, user=answer.user, channel=answer.channel
            )
            settle_config = answer_first(graph, config, state, first_answer)
            _drive(graph, settle_config, None, _context(state, ws, progress, None, measurer))
        elif state.pending:
            raise RunRefused(
                f"run {run_id} stopped with work left: dftune resume {run_id} first, then approve"
            )
        else:
            raise RunRefused(f"run {run_id} is not waiting for an approval (status {state.status})")
    return _result(run_id, ws)


def history(run_id: str, *, workspace: Workspace | None = None) -> list[dict[str, Any]]:
    """Every saved checkpoint, oldest first: id, step, the node that produced it, time, what comes next."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    with _compiled(run_id, ws) as (graph, config):
        snaps = list(graph.get_state_history(config))[::-1]
    out = []
    previous_next: tuple[str, ...] = ()
    decided: dict[str, int] = {}  # checkpoint id -> decisions recorded up to it (forks have their own)
    for s in snaps:
        meta = s.metadata or {}
        values = s.values if isinstance(s.values, dict) else {}
        cid = s.config["configurable"]["checkpoint_id"]
        parent = (s.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        decisions = [_plain(d) for d in values.get("decisions", []) or []]
        decided[cid] = len(decisions)
        out.append(
            {
                "checkpoint_id": s.config["configurable"]["checkpoint_id"],
                "parent_id": (s.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
                "step": meta.get("step"),
                "source": meta.get("source"),
                "node": ",".join(previous_next)
                if meta.get("source") == "loop" and previous_next
                else meta.get("source"),
                "time": s.created_at,
                "next": list(s.next),
                "status": values.get("status"),
                "experiments": len(values.get("experiments", []) or []),
                # the judgments this step made: who decided (model or rules, and why), tokens, latency
                "decisions": decisions[decided.get(parent, 0) if parent else 0 :],
                "tokens_spent": sum(int(d.get("tokens") or 0) for d in decisions),
                "experiment": _experiment_label(values),
            }
        )
        previous_next = tuple(s.next)
    origin = _as_state(snaps[-1].values).replay_of if snaps and snaps[-1].values else None
    return _branches(out, origin)


def _experiment_label(values: dict[str, Any]) -> str:
    """The experiment a step belongs to: ``opt2 WORKERS=4``, or the proposal about to become one."""
    exps = values.get("experiments") or []
    last = _plain(exps[-1]) if exps else None
    current = values.get("current")
    if current and (last is None or last.get("proposal_id") != current):
        return f"next: {current}"
    return f"opt{last['iteration']} {last['proposal_id']}" if last else ""


def _branches(rows: list[dict[str, Any]], origin: ReplayOrigin | None = None) -> list[dict[str, Any]]:
    """Mark each step's branch: ``main``, or ``fork 1 (from
    step 12)`` for a fork inside the run (runs saved before replays made runs of their own); a
    replay's steps up to its fork point are ``run R`` (copied from the run it replays), the ones
    after it ``replay``."""
    children: dict[str | None, list[str]] = {}
    for r in rows:
        children.setdefault(r["parent_id"], []).append(r["checkpoint_id"])
    step_of = {r["checkpoint_id"]: r["step"] for r in rows}
    branch: dict[str, str] = {}
    forks = 0
    inherited = origin is not None and any(r["checkpoint_id"] == origin.checkpoint_id for r in rows)
    for r in rows:
        if inherited and origin is not None:
            r["branch"] = branch[r["checkpoint_id"]] = f"run {origin.run_id}"
            inherited = r["checkpoint_id"] != origin.checkpoint_id
            continue
        parent = r["parent_id"]
        if parent in branch and children[parent][0] != r["checkpoint_id"]:
            forks += 1
            branch[r["checkpoint_id"]] = f"fork {forks} (from step {step_of.get(parent)})"
        else:
            label = branch.get(parent, "main") if parent else "main"
            branch[r["checkpoint_id"]] = "replay" if origin and label == f"run {origin.run_id}" else label
        r["branch"] = branch[r["checkpoint_id"]]
    return rows


def _plain(value: Any) -> dict[str, Any]:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else dict(value)


def _replay_values(state: TuningState, sets: dict[str, str]) -> dict[str, Any]:
    """The replay's ``--set`` values, validated as run settings on top of the saved state's."""
    for name in sets:
        if name not in REPLAYABLE_FIELDS:
            raise RunError(
                f"--set {name}: only {', '.join(sorted(REPLAYABLE_FIELDS))} can be changed on replay"
            )
    try:
        settings = RunSettings.layered(dict(sets), state.settings)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        raise RunError(f"--set {name}={sets.get(name)}: {err['msg']}") from None
    return {name: getattr(settings, name) for name in sets}


def replay_run(
    run_id: str,
    checkpoint_id: str,
    sets: dict[str, str] | None = None,
    *,
    new_run_id: str | None = None,
    progress: ProgressFn = silent,
    workspace: Workspace | None = None,
    measurer: Measurer | None = None,
) -> RunResult:
    """Fork a new run from a saved state of ``run_id`` (optionally changing inputs) and run it to
    its end. The fork has its own id (``<run>-r<n>`` unless given), folder and checkpoints, which
    start with the saved states leading to ``checkpoint_id``; the original run, its reports and
    its knowledge-base records are only read."""
    ws = workspace or Workspace()
    _existing(run_id, ws)
    with _compiled(run_id, ws) as (graph, _config):
        snap = graph.get_state(
            {"configurable": {"thread_id": run_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        )
        if not snap.values:
            raise RunRefused(
                f"run {run_id} has no checkpoint {checkpoint_id!r} (see dftune history {run_id})"
            )
        state = _current(_as_state(snap.values))
        where = _where(run_id, snap, state)
        step = (snap.metadata or {}).get("step")
        if not snap.next and not any(t.interrupts for t in snap.tasks):
            raise RunRefused(
                f"checkpoint {checkpoint_id} is where run {run_id} ended: nothing follows it to replay; "
                f"choose an earlier step (dftune history {run_id})"
            )
    values = _replay_values(state, sets or {})
    fork_id = new_run_id or _fork_id(run_id, ws)
    origin = ReplayOrigin(
        run_id=run_id,
        checkpoint_id=checkpoint_id,
        step=step if isinstance(step, int) else None,
        changed={k: str(v) for k, v in (sets or {}).items()},
    )
    meta = ws.create_run(
        fork_id, state.workload or ws.read_meta(run_id).workload, parent=(run_id, checkpoint_id, origin.step)
    )
    parent_dir, fork_dir = ws.run_dir(run_id), ws.run_dir(meta.id)
    for name in (ARCHIVED_SPEC, levers.LEVERS_FILE):  # the fork runs the spec and levers the run had
        if (parent_dir / name).is_file():
            atomic_write_bytes(fork_dir / name, read_regular(parent_dir / name, RUN_FILE_BYTES))
    # the fork numbers its iterations above the original's, so no opt<n> the state names is reused
    values.update(
        run_id=meta.id,
        replay_of=origin,
        iteration_floor=max([state.iteration_floor, *ws.iterations(run_id)], default=0),
    )
    with _driving(meta.id, ws, progress), _compiled(meta.id, ws) as (graph, _config):
        copy_branch(parent_dir / CHECKPOINT_FILE, run_id, checkpoint_id, graph.checkpointer, meta.id)
        progress(
            "replay",
            f"run {meta.id} forks {where}; {origin.line().partition('; ')[2]}; its experiments are "
            f"opt{values['iteration_floor'] + 1} on",
        )
        target: RunnableConfig = {
            "configurable": {"thread_id": meta.id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
        }
        fork = graph.update_state(target, values)
        ctx_state = _as_state({**state.__dict__, **values})
        _drive(graph, fork, None, _context(ctx_state, ws, progress, None, measurer))
    return _result(meta.id, ws)


def _fork_id(run_id: str, ws: Workspace) -> str:
    """``<run>-r1``, ``-r2``, ...: the first one no run folder has (a long id is shortened)."""
    taken = {r.id for r in ws.list_runs()}
    n = 1
    while f"{run_id[: MAX_RUN_ID_LEN - 8]}-r{n}" in taken:
        n += 1
    return f"{run_id[: MAX_RUN_ID_LEN - 8]}-r{n}"
