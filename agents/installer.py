"""The installer agent: is dftracer usable here, and what can it not see?

It checks that the ``dftracer`` package imports and its preload library exists (installing
the PyPI package when the user allowed it), traces a tiny smoke program that makes known
POSIX calls, and reports every expected call missing from the trace as a pitfall: a blind
spot later diagnoses must not mistake for "the application does not do this".
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.core.domain.run import Pitfall, TracerFacts, TuningState, Update, log, update
from dftune.core.process import run_command, run_process
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.trace.selftrace import SelfTracing, detect
from dftune.tools.trace.tracer import TracerUnavailable, preload_library, trace_env

#: What the smoke program calls, by the name dftracer would record.
SMOKE_CALLS = (
    "open64",
    "read",
    "write",
    "pread64",
    "preadv",
    "lseek64",
    "close",
    "stat",
    "fstat",
    "mkdir",
    "unlink",
    "opendir",
)
_SMOKE = textwrap.dedent(
    """
    import os, sys
    d = sys.argv[1]
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    p = os.path.join(d, "sub", "smoke.bin")
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x" * 8192)
    os.lseek(fd, 0, 0)
    os.read(fd, 4096)
    os.pread(fd, 4096, 0)
    os.preadv(fd, [bytearray(4096)], 0)
    os.fstat(fd)
    os.close(fd)
    os.stat(p)
    os.listdir(os.path.join(d, "sub"))
    os.unlink(p)
    """
)
INSTALL_TIMEOUT_S = 600


def _pip_install() -> str:
    res = run_command(
        [sys.executable, "-m", "pip", "install", "--quiet", "dftracer>=2.0,<3"], timeout_s=INSTALL_TIMEOUT_S
    )
    if res.timed_out:
        return f"pip install dftracer timed out after {INSTALL_TIMEOUT_S} s"
    return "" if res.ok else f"pip install dftracer failed: {(res.error or res.stderr).strip()[-300:]}"


def traced_names(trace_dir: Path) -> dict[str, int]:
    """Call names and counts in a (small) trace folder; the smoke trace only, not a hot path."""
    counts: dict[str, int] = {}
    for path in sorted(trace_dir.glob("*.pfw*")):
        opener: Any = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    line = line.strip().rstrip(",")
                    if not line.startswith("{"):
                        continue
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    if str(ev.get("cat", "")).upper() in ("POSIX", "STDIO"):
                        counts[ev.get("name", "?")] = counts.get(ev.get("name", "?"), 0) + 1
        except (OSError, EOFError):
            continue
    return counts


def check_tracer(work: Path, *, allow_install: bool) -> tuple[TracerFacts, list[Pitfall]]:
    """Check dftracer and trace the smoke program in ``work``; the facts and the pitfalls found."""
    pitfalls: list[Pitfall] = []
    try:
        lib = preload_library()
    except TracerUnavailable as exc:
        if not allow_install:
            return TracerFacts(
                python=sys.executable, reason=f"{exc} (run with --allow-install to let dftune install it)"
            ), pitfalls
        why = _pip_install()
        if why:
            return TracerFacts(python=sys.executable, reason=why), pitfalls
        lib = preload_library()
        installed = "dftracer installed from PyPI"
    else:
        installed = ""
    facts = TracerFacts(python=sys.executable, installed=installed, preload_library=str(lib))
    work.mkdir(parents=True, exist_ok=True)
    script = work / "smoke.py"
    script.write_text(_SMOKE, encoding="utf-8")
    traces = work / "traces"
    traces.mkdir(exist_ok=True)
    data = work / "data"
    data.mkdir(exist_ok=True)
    env = {**_base_env(), **trace_env(traces / "smoke", data_dir="all", mode="preload")}
    res = run_process(
        [sys.executable, str(script), str(data)],
        cwd=work,
        env=env,
        timeout_s=120,
        log_dir=work / "logs",
        label="smoke",
    )
    if res.status != "ok":
        said = res.stderr_tail[-300:].strip()
        why = f"the traced smoke program {res.status} ({res.reason})" + (f": {said}" if said else "")
        return facts.model_copy(update={"reason": why}), pitfalls
    seen = traced_names(traces)
    facts = facts.model_copy(update={"smoke_calls_traced": seen})
    if not seen:
        return facts.model_copy(
            update={"reason": "the traced smoke program left no POSIX events in its trace"}
        ), pitfalls
    facts = facts.model_copy(update={"usable": True})
    for call in SMOKE_CALLS:
        aliases = {call, call.rstrip("64"), f"{call}64", f"__x{call}", f"__x{call}64", f"{call}at"}
        if not aliases & set(seen):
            pitfalls.append(
                Pitfall(
                    id=f"untraced:{call}",
                    message=f"{call} is not traced here: the smoke program "
                    "called it and the trace has no such event",
                    detail="counts of this call (and the metadata time "
                    "it costs) are missing from every trace on "
                    "this machine; do not read its absence as 'the application does not do this'",
                )
            )
    return facts, pitfalls


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("DFTRACER_", "LD_PRELOAD"))}


def workload_traces_itself(spec: WorkloadSpec) -> SelfTracing:
    """Whether the workload's program initializes dftracer on its own (DLIO, annotated apps)."""
    with tempfile.TemporaryDirectory(prefix="dftune-probe-") as scratch:
        argv = spec.render(spec.command, spec.settings(), workdir=Path(scratch))
    return detect(argv, spec.resolve(spec.cwd), spec.env)


def installer(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: check the tracer once per run; a run that needs traces stops here when it is unusable."""
    ctx = runtime.context
    ctx.progress("installer", "checking dftracer and tracing a smoke program")
    # a scratch folder: the smoke trace is not part of the run's layout (traces live in traces/raw only)
    with tempfile.TemporaryDirectory(prefix="dftune-smoke-") as scratch:
        facts, pitfalls = check_tracer(Path(scratch), allow_install=state.allow_install)
    events = [
        log(
            "installer",
            "dftracer usable" if facts.usable else f"dftracer unusable: {facts.reason}",
            preload_library=facts.preload_library,
        )
    ]
    events += [log("installer", p.message) for p in pitfalls]
    out: dict[str, Any] = {"tracer": facts, "pitfalls": pitfalls, "events": events}
    spec = ctx.workload_spec
    own = workload_traces_itself(spec)
    if own and spec.tracing.mode != "off":
        events.append(
            log(
                "installer",
                f"the workload initializes dftracer itself ({own.reason}): it is traced in "
                "FUNCTION mode without the preload library, its own trace files collected",
            )
        )
    if not facts.usable and spec.tracing.mode != "off":
        out.update(
            status="failed", status_reason=f"tracing is required ({spec.tracing.mode}) but {facts.reason}"
        )
    return update(out)
