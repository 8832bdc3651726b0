"""A model's actions as proposals: a new knob value, catalog L2 settings, a drafted source patch.

Each builder checks one answer against what the spec and the catalog declare (the knob's type
and range, the strategy's parameters and the variables it sets, a patch that applies cleanly to
the incumbent's source) and raises ``ValueError`` with the reason, which goes back to the model.
What comes out is an ordinary :class:`Proposal` with the strategy's citation: the guards screen
it and the verifier measures it like any other. :mod:`.trust` calls the same builders to derive
a model's proposal again before it is applied, so an edited checkpoint is refused as before.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from dftune.agents.optimizer.plan import knob_id, slug
from dftune.core.domain.proposals import Change, Proposal
from dftune.tools.catalog import Catalog, Strategy
from dftune.tools.catalog.models import CONTEXT_VARS, Parameter, placeholders
from dftune.tools.runner.changes import ChangeError, FilePatch, preview_patch
from dftune.tools.runner.spec import WorkloadSpec

#: a drafted patch larger than this is refused (a model's patch is read by a person later)
MAX_DIFF_CHARS = 20_000
#: where a run keeps its drafted patches
DRAFTS = "drafts"
_SAFE_VALUE = re.compile(r"[\w.:/-]{1,64}")


def _base(s: Strategy, who: str) -> dict[str, object]:
    return dict(
        strategy=s.id,
        strategy_name=s.name,
        layer=s.layer,
        checklist=s.checklist,
        privilege=s.privilege,
        proposed_by=f"model:{who}",
    )


def knob_value_proposal(
    spec: WorkloadSpec, catalog: Catalog, knob_name: str, value: float, who: str
) -> Proposal:
    """A value of a ranged knob that is not in its value list, of the knob's declared type."""
    names = [k.name for k in spec.knobs]
    if knob_name not in names:
        raise ValueError(f"{knob_name!r} is not a knob of this workload ({', '.join(names)})")
    knob = spec.knob(knob_name)
    if not knob.ranged:
        raise ValueError(f"knob {knob_name} declares no range: only its listed values {knob.values} are run")
    kind = knob.value_type()
    if kind is int and float(value) != int(value):
        raise ValueError(f"knob {knob_name} takes integers, not {value:g}")
    v: int | float = int(value) if kind is int else float(value)
    if v in knob.values:
        raise ValueError(f"{knob_name}={v} is already in its value list {knob.values}: propose a new value")
    if not knob.allows(v):
        raise ValueError(f"{knob_name}={v} is outside its declared range [{knob.min}, {knob.max}]")
    s = catalog.strategies.get(knob.strategy or "")
    if s is None:
        raise ValueError(f"knob {knob_name} names no catalog strategy: nothing cites a new value of it")
    return Proposal(
        id=knob_id(knob_name, v),
        **_base(s, who),
        description=f"{s.name}: {knob_name}={v} instead of {knob.default} (a value the model proposed "
        f"inside the declared range [{knob.min}, {knob.max}])",
        change=Change(kind="knob", settings={knob_name: str(v)}),
    )


def _check_param(p: Parameter, raw: str) -> str:
    """One parameter value as the catalog declares it: one of its values, or a number in its range."""
    if p.values is not None:
        allowed = {str(v).lower() if isinstance(v, bool) else str(v): v for v in p.values}
        if raw not in allowed:
            raise ValueError(f"{p.name}={raw!r} is not one of {list(allowed)}")
        return raw
    if p.min is None and p.max is None:
        raise ValueError(f"{p.name} declares neither values nor a range: the model may not set it")
    integral = all(isinstance(x, int) for x in (p.min, p.max, p.default, p.recommended) if x is not None)
    try:
        num = int(raw) if integral else float(raw)
    except ValueError:
        raise ValueError(f"{p.name}={raw!r} is not {'an integer' if integral else 'a number'}") from None
    if (p.min is not None and num < p.min) or (p.max is not None and num > p.max):
        raise ValueError(f"{p.name}={raw} is outside its declared range [{p.min}, {p.max}]")
    return str(num)


def l2_proposal(s: Strategy, params: dict[str, str], context: dict[str, str], who: str) -> Proposal:
    """A catalog strategy's environment, rendered from parameter values the model chose."""
    a = s.apply
    if s.forbidden or a is None or s.layer != "L2" or a.kind != "env":
        raise ValueError(f"{s.id} is not an L2 strategy applied through the environment")
    declared = {p.name: p for p in s.parameters}
    used = placeholders(*a.env.values())
    unknown = sorted(set(params) - (used & set(declared)))
    if unknown:
        raise ValueError(
            f"{s.id} declares no settable parameter {', '.join(unknown)} "
            f"(its parameters: {', '.join(sorted(used & set(declared))) or 'none'})"
        )
    values = {k: _check_param(declared[k], str(v).strip()) for k, v in sorted(params.items())}
    missing = sorted(used - set(values) - (set(context) & CONTEXT_VARS))
    if missing:
        raise ValueError(f"{s.id} needs a value for {', '.join(missing)}")
    bad = [k for k, v in values.items() if not _SAFE_VALUE.fullmatch(v)]
    if bad:
        raise ValueError(f"the value of {bad[0]} is not a plain word")
    env = {k: t.format_map({**context, **values}) for k, t in a.env.items()}
    shown = ",".join(f"{k}={v}" for k, v in values.items())
    return Proposal(
        id=slug(f"{s.id}:{shown}"),
        **_base(s, who),
        description=f"{s.name}: {', '.join(f'{k}={v}' for k, v in env.items())} (values the model chose)",
        change=Change(kind="env", env=env, params=values),
    )


def draft_path(run_dir: Path, strategy: str, diff: str) -> Path:
    """Where a drafted patch is kept: named by its strategy and the digest of its text."""
    digest = hashlib.sha256(diff.encode()).hexdigest()[:10]
    return run_dir / DRAFTS / f"{slug(strategy)}-{digest}.diff"


def draft_proposal(
    s: Strategy, diff: str, source_root: Path, run_dir: Path, who: str, *, check: bool = True
) -> Proposal:
    """A source patch for a source-change strategy; refused unless it applies cleanly to ``source_root``.

    ``check=False`` (:mod:`.trust`, deriving a kept draft again) neither previews nor writes it."""
    a = s.apply
    if s.forbidden or a is None or a.kind != "source_patch":
        raise ValueError(f"{s.id} is not a source-change strategy")
    if len(diff) > MAX_DIFF_CHARS:
        raise ValueError(f"the patch has {len(diff):,} characters; at most {MAX_DIFF_CHARS:,}")
    text = diff if diff.endswith("\n") else diff + "\n"
    try:
        if check:
            preview_patch(FilePatch(id="draft-check", strategy=s.id, root=source_root, diff=text, strip=1))
    except (ChangeError, ValueError) as exc:
        raise ValueError(
            f"the patch does not apply cleanly to the source tree: {' '.join(str(exc).split())[:300]}"
        ) from None
    path = draft_path(run_dir, s.id, text)
    if check:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Proposal(
        id=slug(f"patch:{path.stem}"),
        **_base(s, who),
        description=f"{s.name}: a source patch the model drafted ({path.name})",
        change=Change(kind="patch", patch_file=str(path), strip=1),
    )
