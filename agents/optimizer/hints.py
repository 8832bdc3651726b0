"""ROMIO hints as proposals, for a program whose stack is MPI-IO on ROMIO, with no knob declared.

The catalog's ROMIO strategies (l2.romio_cb, l2.romio_ds, l2.romio_cb_nodes) list the values each
hint takes; the literature has both directions. Collective buffering (two-phase I/O) and data
sieving turn many small noncontiguous requests into few large ones (Thakur, Gropp and Lusk,
Frontiers '99), but they cost an exchange between ranks, or a locked read-modify-write, for every
call; the ROMIO Users Guide documents ``disable`` for exactly that case. ROMIO's ``automatic``
default already aggregates interleaved accesses, so for them the untried direction is ``disable``,
which comes first; ``enable`` follows.

Each proposal is offered in the form the program reads:

- a hint file named by ``ROMIO_HINTS`` (ROMIO applies it at every MPI_File_open, for keys the
  program's own MPI_Info does not set);
- for a program that builds its MPI_Info from the environment (IOR's ``IOR_HINT__MPI__<key>``),
  those variables too, since the program's own hints win over a hint file key by key;
- ``ROMIO_PRINT_HINTS=1``: ROMIO prints the hints in effect at every open, which the verifier
  compares with what was asked (a hint the program overrode is never counted).
"""

from __future__ import annotations

import re
from pathlib import Path

from dftune.core import strictjson
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.facts.stacks import env_hint_prefixes
from dftune.tools.catalog import Catalog
from dftune.tools.diagnose.stack import hints_printed, overridden
from dftune.tools.runner.bench import BenchError, bench
from dftune.tools.runner.changes.layering import HINTS_VAR, hint_file_text, read_hint_file
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.spec import WorkloadSpec

HINTS_DIR = "hints"
PRINT_HINTS = {"ROMIO_PRINT_HINTS": "1"}
#: (strategy, the hints one proposal sets together, read and write alike)
_PAIRS = (
    ("l2.romio_cb", ("romio_cb_write", "romio_cb_read")),
    ("l2.romio_ds", ("romio_ds_write", "romio_ds_read")),
)


def hint_sets(catalog: Catalog, ranks: int) -> list[tuple[str, dict[str, str]]]:
    """The hint combinations to try, in order: every non-default value of the catalog's
    collective-buffering and data-sieving hints (``disable`` first, see the module's docstring),
    then the aggregators' buffer size and count."""
    out: list[tuple[str, dict[str, str]]] = []
    by_value: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for sid, keys in _PAIRS:
        s = catalog.strategies.get(sid)
        if s is None:
            continue
        params = {p.name: p for p in s.parameters}
        values = params[keys[0]].values or []
        for v in values:
            if v != params[keys[0]].default:
                by_value.setdefault(str(v), []).append((sid, {k: str(v) for k in keys}))
    for v in ("disable", "enable", *sorted(set(by_value) - {"disable", "enable"})):
        out += by_value.get(v, [])
    cb = catalog.strategies.get("l2.romio_cb")
    size = next((p for p in cb.parameters if p.name == "cb_buffer_size"), None) if cb else None
    if size is not None and isinstance(size.recommended, int) and size.recommended != size.default:
        out.append(("l2.romio_cb", {"cb_buffer_size": str(size.recommended)}))
    if ranks > 1 and "l2.romio_cb_nodes" in catalog.strategies:  # one aggregator per rank; on one host
        out.append(
            ("l2.romio_cb_nodes", {"cb_nodes": str(ranks), "cb_config_list": f"*:{ranks}"})
        )  # "*:1" caps it
    return out


def _slug(text: str) -> str:
    """A proposal id (the same spelling as plan.slug, which builds on this module)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-")[:80]


def ranks_of(spec: WorkloadSpec) -> int:
    """The ranks a run starts: the spec's launcher, or ``-n``/``-np`` of an mpirun in its command."""
    if spec.launcher.kind != "local":
        return spec.launcher.ranks
    argv = spec.command
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-n", "-np", "--np", "-c") and argv[i + 1].isdigit():
            return int(argv[i + 1])
    return 1


def hint_proposals(
    catalog: Catalog, software: list[str], ranks: int, run_dir: Path, *, write: bool = True
) -> list[Proposal]:
    """One proposal per hint set when the stack is MPI-IO on ROMIO (see :func:`hint_sets`).

    ``write=False`` derives them again without touching the hint files (``trust`` checks a
    checkpoint's proposal against them)."""
    if "romio" not in software:
        return []
    out = []
    env_form = env_hint_prefixes(software)
    for sid, hints in hint_sets(catalog, ranks):
        s = catalog.strategies[sid]
        shown = ",".join(f"{k}={v}" for k, v in hints.items())
        pid = _slug(f"romio:{shown}")
        path = run_dir / HINTS_DIR / f"{pid}.txt"
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = hint_file_text(hints)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
        env = {"ROMIO_HINTS": str(path), **PRINT_HINTS}
        env.update({f"{prefix}{k}": v for prefix in env_form for k, v in hints.items()})
        form = "a ROMIO hint file" + "".join(f" and the program’s {p}<key> variables" for p in env_form)
        out.append(
            Proposal(
                id=pid,
                strategy=sid,
                strategy_name=s.name,
                layer="L2",
                checklist=s.checklist,
                description=f"{s.name}: {shown} (through {form}; the hints in effect are checked)",
                change=Change(kind="env", env=env, params=hints),
                privilege=s.privilege,
            )
        )
    return out


def requested_hints(p: Proposal) -> dict[str, str]:
    """The ROMIO hints a proposal asks for (empty for any other change)."""
    return dict(p.change.params) if p.change.kind == "env" and HINTS_VAR in p.change.env else {}


def arm_hints(env: dict[str, str]) -> dict[str, str]:
    """The ROMIO hints an arm's environment asks for: its hint file's (the kept ones merged with the
    new one, tools/runner/changes/layering.py), then the program's MPI_Info variables (they win)."""
    out: dict[str, str] = {}
    path = env.get(HINTS_VAR)
    if path and Path(path).is_file():
        out.update(read_hint_file(path))
    for prefix in env_hint_prefixes():
        out.update({k.removeprefix(prefix): v for k, v in env.items() if k.startswith(prefix)})
    return out


#: the hints a report shows before and after (the ones the proposals set)
SHOWN_KEYS = (
    "romio_cb_write",
    "romio_cb_read",
    "romio_ds_write",
    "romio_ds_read",
    "cb_buffer_size",
    "cb_nodes",
    "cb_config_list",
)


def hints_before(spec: WorkloadSpec, run_dir: Path, measurer: Measurer) -> str:
    """The hints in effect before any change: one untraced run with ROMIO_PRINT_HINTS=1 (once per run)."""
    record = run_dir / HINTS_DIR / "before.json"
    if record.is_file():
        return str(strictjson.read_file(record).get("said", ""))
    try:
        result = bench(
            spec,
            replicates=1,
            trace=False,
            env=PRINT_HINTS,
            workdir=run_dir / HINTS_DIR / "before",
            measurer=measurer,
        )
    except BenchError as exc:
        return f"hints in effect before any change: unknown (the probe run failed: {exc})"
    blocks = hints_in_effect(Path(result.workdir))
    if not blocks:
        said = "hints in effect before any change: unknown (the MPI library printed none)"
    else:
        shown = {k: sorted({b[k] for b in blocks if k in b}) for k in SHOWN_KEYS}
        said = "hints in effect before any change: " + ", ".join(
            f"{k}={'|'.join(v)}" for k, v in shown.items() if v
        )
    record.parent.mkdir(parents=True, exist_ok=True)
    strictjson.write_file(record, {"said": said, "blocks": blocks}, indent=1)
    return said


def hints_in_effect(workdir: Path) -> list[dict[str, str]]:
    """Every hint block ROMIO printed in an arm's replicates (``logs/r<i>.out``; ROMIO_PRINT_HINTS=1)."""
    blocks: list[dict[str, str]] = []
    for out in sorted((workdir / "logs").glob("r*.out")):
        try:
            blocks += hints_printed(out.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return blocks


def incumbent_hints(run_dir: Path, incumbent: Measurement | None) -> list[dict[str, str]]:
    """The hint blocks in effect in the incumbent: those its own replicates printed (an experiment's
    arms run with ROMIO_PRINT_HINTS=1), else the probe's before any change with the hints its
    environment asks for on top; empty when ROMIO printed none."""
    if incumbent is None:
        return []
    own = hints_in_effect(Path(incumbent.workdir))
    if own:
        return own
    record = run_dir / HINTS_DIR / "before.json"
    blocks = strictjson.read_file(record).get("blocks", []) if record.is_file() else []
    asked = arm_hints(incumbent.env)
    return [{**b, **asked} for b in blocks if isinstance(b, dict)]


def override_check(p: Proposal, workdir: Path, asked: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(why the arm does not count, or None; what was in effect) for an arm that asks for ROMIO hints.

    ``asked`` is every hint the arm asks for (the kept ones and the new one, :func:`arm_hints`);
    by default the proposal's own. A hint the program set itself (its own MPI_Info) wins over a hint
    file: the arm then measured the program's value, not the one asked for, and counting it would
    credit a change that never took effect."""
    asked = requested_hints(p) if asked is None else asked
    if not asked:
        return None, ""
    blocks = hints_in_effect(workdir)
    if not blocks:
        return None, "hints in effect unknown: the MPI library printed none (ROMIO_PRINT_HINTS is ROMIO's)"
    seen = {k: sorted({b[k] for b in blocks if k in b}) for k in asked}
    shown = ", ".join(f"{k}={'|'.join(v) if v else '?'}" for k, v in seen.items())
    lost = overridden(asked, blocks)
    if not lost:
        return None, f"hints in effect at all {len(blocks)} open(s): {shown}"
    said = "; ".join(
        f"{k}: asked {asked[k]}, in effect {'|'.join(sorted(v))}" for k, v in sorted(lost.items())
    )
    return (
        f"not counted: the program overrode the hint ({said}); its own MPI_Info hints win over "
        "ROMIO_HINTS key by key, so this arm measured the program's value"
    ), shown
