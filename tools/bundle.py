"""What a person takes away from a run: one folder with the kept configuration that re-runs and
re-verifies itself anywhere, needing nothing from DFTUNE_HOME.

``write_bundle`` lays it out (README.md, bundle.json, spec.toml with absolute paths, the kept
changes as files, scripts/baseline.sh and scripts/tuned.sh, the reports, provenance.json and a
MANIFEST.sha256); ``check_manifest`` refuses a bundle a byte of which changed; ``verify`` measures
the baseline and tuned arms again, untraced, paired and interleaved, and says whether the gain
holds within the original's confidence interval, is smaller, or is gone (appended to the bundle
as ``verify/<host>-<time>.json``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import Field

from dftune.core import strictjson
from dftune.core.domain.measurements import StagePlan
from dftune.core.domain.run import RunReport
from dftune.core.domain.stats import pct_change
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.model import StrictModel
from dftune.tools.report.sections import arm_configuration, gain_ci, kept_configuration, overall
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.paired import ArmPlan, paired_bench
from dftune.tools.runner.spec import SOURCE_COPY_IGNORE, KnobValue, WorkloadSpec, load_spec
from dftune.tools.runner.stats import compare
from dftune.tools.session.layout import RUN_BUNDLE

MANIFEST = "MANIFEST.sha256"
BUNDLE_FILE = "bundle.json"
VERIFY_DIR = "verify"


class BundleError(DftuneError):
    """The bundle cannot be written, or is not one (a file differs from its manifest): one line."""


class Arm(StrictModel):
    """One arm as the bundle re-runs it."""

    settings: dict[str, KnobValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    #: the data folder staged to this tier for every run (None: read in place)
    stage: StagePlan | None = None
    #: source patches (relative to the bundle) applied in order to a copy of the program's source
    patches: list[str] = Field(default_factory=list)


class Bundle(StrictModel):
    """``bundle.json``: what the bundle holds, machine-readable (``dftune verify`` reads it)."""

    schema_: Literal["dftune.bundle/1"] = Field(default="dftune.bundle/1", alias="schema")
    run_id: str
    workload: str
    metric: str
    unit: str = ""
    lower_is_better: bool = True
    baseline_median: float | None
    tuned_median: float | None
    gain_pct: float | None
    gain_ci: tuple[float, float] | None = None
    baseline: Arm
    tuned: Arm
    #: changes on the system (L3 commands) kept: a person applies them (README), verify does not
    system_changes: list[str] = Field(default_factory=list)
    created: str


# --------------------------------------------------------------------------- write


def run_bundle(report: RunReport, run_dir: Path) -> Path | None:
    """Write (or write again) the run's own bundle, ``<run dir>/bundle``; None when the run kept
    nothing (no configuration to carry) or measured no baseline."""
    kept = any(e.kept and e.verdict != "pending" for e in report.experiments)
    if not kept or report.baseline is None or report.incumbent is None:
        return None
    out = run_dir / RUN_BUNDLE
    if out.exists():
        shutil.rmtree(out)  # the run's own output, from an earlier end of this run (a resume)
    return write_bundle(report, run_dir, out)


def write_bundle(report: RunReport, run_dir: Path, out: Path) -> Path:
    """Write the bundle of ``report`` (its run folder ``run_dir``) into the new folder ``out``."""
    if report.baseline is None or report.incumbent is None:
        raise BundleError(f"run {report.run_id} measured no baseline: there is nothing to bundle")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: not empty; a bundle is written into a new folder")
    spec = _spec(report, run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scripts").mkdir()
    (out / "changes").mkdir()
    base, inc = report.baseline, report.incumbent
    common, kept_patch = _patches(report, run_dir, out)
    tuned = Arm(
        settings=dict(inc.settings), env=dict(inc.env), stage=inc.stage, patches=[*common, *kept_patch]
    )
    baseline = Arm(settings=dict(base.settings), env=dict(base.env), stage=base.stage, patches=common)
    total = overall(report)
    kinds = {p.id: p for p in report.proposals}
    commands = [
        e.proposal_id
        for e in report.experiments
        if e.kept
        and e.verdict != "pending"
        and (p := kinds.get(e.proposal_id))
        and p.change.kind == "command"
    ]
    doc = Bundle(
        run_id=report.run_id,
        workload=report.workload or spec.name,
        metric=report.metric.name,
        unit=report.metric.unit,
        lower_is_better=report.metric.lower_is_better,
        baseline_median=base.median,
        tuned_median=inc.median,
        gain_pct=total.pct if total else None,
        gain_ci=total.ci if total else None,
        baseline=baseline,
        tuned=tuned,
        system_changes=commands,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write(out / BUNDLE_FILE, json.dumps(doc.model_dump(mode="json", by_alias=True), indent=1) + "\n")
    _write(out / "spec.toml", _spec_toml(spec))
    env_lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(_changed(base.env, inc.env).items())]
    env_lines += [
        f"export {k.name}={shlex.quote(str(inc.settings[k.name]))}"
        for k in spec.knobs
        if k.kind == "env" and k.name in inc.settings and inc.settings[k.name] != base.settings.get(k.name)
    ]
    _write(
        out / "changes" / "kept.env",
        "# the environment of the tuned arm (source it)\n" + "\n".join(env_lines) + "\n",
    )
    if commands:
        lines = ["#!/bin/sh", "# system changes kept by the run: run as the account that may, rollback below"]
        for pid in commands:
            c = kinds[pid].change
            lines += [f"# {pid}", shlex.join(c.argv)]
            if c.rollback_argv:
                lines.append(f"# rollback: {shlex.join(c.rollback_argv)}")
        _write(out / "changes" / "system_changes.sh", "\n".join(lines) + "\n")
    for name, arm in (("baseline", baseline), ("tuned", tuned)):
        script = out / "scripts" / f"{name}.sh"
        _write(script, _arm_script(spec, arm, name, out))
        script.chmod(0o755)
    for name in ("report.md", "report.html"):
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, out / name)
    _write(out / "README.md", _readme(report, doc, spec))
    _write(out / "provenance.json", json.dumps(_provenance(spec, run_dir), indent=1) + "\n")
    write_manifest(out)
    return out


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _changed(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in after.items() if before.get(k) != v}


def _spec(report: RunReport, run_dir: Path) -> WorkloadSpec:
    """The run's spec as it ran: its archived copy, paths resolved where the original lived, with
    the levers the run drafted (tools/runner/levers.py)."""
    from dftune.tools.runner import levers

    archived = run_dir / "workload.toml"
    if not archived.is_file():
        raise BundleError(f"run {report.run_id} has no archived spec {archived}")
    spec = load_spec(archived, located_at=report.spec_path)
    found = levers.saved(run_dir)
    if found is not None and found.found:
        spec = levers.with_levers(spec, found.model_copy(update={"source_copy": ""}))
    return spec


def _spec_toml(spec: WorkloadSpec) -> str:
    """The spec with every path absolute (it runs from the bundle wherever it is copied)."""
    data = spec.model_dump(mode="json", exclude={"spec_path"}, exclude_none=True)
    data["cwd"] = str(spec.resolve(spec.cwd))
    data["source_dir"] = str(spec.resolve(spec.source_dir))
    if "{" not in spec.data_dir:
        data["data_dir"] = str(spec.resolve(spec.data_dir))
    if spec.app_python:
        data["app_python"] = str(spec.resolve(spec.app_python))
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"The workload as run {spec.name} ran it; paths are absolute"))
    doc.update(data)
    return tomlkit.dumps(doc)


def _patches(report: RunReport, run_dir: Path, out: Path) -> tuple[list[str], list[str]]:
    """The source patches as files of the bundle: the levers' env-gated patch (every arm of the
    run ran it: without its variable the program is unchanged), and the kept patch proposals'
    diffs (the tuned arm only)."""
    from dftune.tools.runner import levers

    found = levers.saved(run_dir)
    common: list[str] = []
    if found is not None and found.patch and Path(found.patch).is_file():
        shutil.copy2(found.patch, out / "changes" / "levers.patch")
        common.append("changes/levers.patch")
    kinds = {p.id: p for p in report.proposals}
    kept = [
        Path(p.change.patch_file)
        for e in report.experiments
        if e.kept and (p := kinds.get(e.proposal_id)) and p.change.kind == "patch" and p.change.patch_file
    ]
    texts = [s.read_text(encoding="utf-8") for s in kept if s.is_file()]
    if not texts:
        return common, []
    _write(out / "changes" / "source.patch", "".join(texts))
    return common, ["changes/source.patch"]


#: stands for the arm's scratch folder while a command is rendered for a script
_MARK = "__DFTUNE_WORKDIR__"


def _fill(spec: WorkloadSpec, arm: Arm, name: str, out: Path) -> list[str]:
    """The arm's command line with its settings: run folders as ``$WORKDIR``, a configuration file
    a config knob sets as the bundle's copy with the arm's values (``$HERE/changes/<arm>-config``)."""
    settings = {
        **spec.settings(),
        **{k: v for k, v in arm.settings.items() if any(k == kn.name for kn in spec.knobs)},
    }
    with tempfile.TemporaryDirectory(prefix="dftune-bundle-") as scratch:
        work = Path(scratch) / _MARK
        argv = spec.render(spec.command, settings, workdir=work, trace_dir=work / "traces")
        rendered = work / "dftune-config"
        configs = out / "changes" / f"{name}-config"
        for f in sorted(rendered.iterdir()) if rendered.is_dir() else []:
            configs.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, configs / f.name)
        return [
            a.replace(str(rendered), f"__HERE__/changes/{name}-config").replace(str(work), _MARK)
            for a in argv
        ]


def _shell_word(arg: str) -> str:
    """One argument for sh: its literal parts quoted, the bundle's and the scratch folder's
    places as ``"$HERE"`` and ``"$WORKDIR"``."""
    shown = {"__HERE__": '"$HERE"', _MARK: '"$WORKDIR"'}
    parts = re.split(f"(__HERE__|{_MARK})", arg)
    return "".join(shown.get(p) or shlex.quote(p) for p in parts if p) or "''"


def _arm_script(spec: WorkloadSpec, arm: Arm, name: str, out: Path) -> str:
    argv = _fill(spec, arm, name, out)
    quoted = " ".join(_shell_word(a) for a in argv)
    lines = [
        "#!/bin/sh",
        f"# the {name} arm of {spec.name}, as the run ran it (WORKDIR: a scratch folder)",
        "set -e",
        'WORKDIR="${WORKDIR:-$(mktemp -d)}"',
        'HERE="$(cd "$(dirname "$0")/.." && pwd)"',
        f"cd {shlex.quote(str(spec.resolve(spec.cwd)))}",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted({**spec.env, **arm.env}.items())]
    lines += [
        f"export {k.name}={shlex.quote(str(arm.settings[k.name]))}"
        for k in spec.knobs
        if k.kind == "env" and k.name in arm.settings
    ]
    if arm.patches:
        src = spec.resolve(spec.source_dir)
        cwd = spec.resolve(spec.cwd)
        inside = cwd.relative_to(src) if cwd.is_relative_to(src) else Path(".")
        skip = [f"--exclude={shlex.quote(x)}" for x in _left_out(spec)]
        lines.append('mkdir -p "$WORKDIR/source"')
        lines.append(
            f"(cd {shlex.quote(str(src))} && tar {' '.join(skip)} -cf - .) | "
            '(cd "$WORKDIR/source" && tar -xf -)'
        )
        lines += [f'patch -s -d "$WORKDIR/source" -p1 < "$HERE/{p}"' for p in arm.patches]
        lines.append(f'cd "$WORKDIR/source/{inside.as_posix()}"')
    if arm.stage is not None:
        lines.append(f"# the run staged the data folder to {arm.stage.tier} for each run (see README.md)")
    lines.append(f"exec {quoted}")
    return "\n".join(lines) + "\n"


def _left_out(spec: WorkloadSpec) -> list[str]:
    """What a copy of the source leaves out (as the run's copies did): caches, version control, and
    the data folder when it lies inside the source tree (the program reads it where it is)."""
    out = [f"./{x}" for x in SOURCE_COPY_IGNORE if x.isidentifier() or x.startswith(".")]
    src = spec.resolve(spec.source_dir)
    if "{" not in spec.data_dir and spec.resolve(spec.data_dir).is_relative_to(src):
        out.append("./" + spec.resolve(spec.data_dir).relative_to(src).as_posix())
    return out


def _readme(r: RunReport, b: Bundle, spec: WorkloadSpec) -> str:
    unit = f" {b.unit}" if b.unit else ""
    ci = f" (95% CI {b.gain_ci[0]:+.1f}% to {b.gain_ci[1]:+.1f}%)" if b.gain_ci else ""
    gain = f"{b.gain_pct:+.1f}%" if b.gain_pct is not None else "no change kept"
    refused = [
        f"- {x.id} ({x.strategy}): {x.status}: {x.reason}"
        for x in r.proposals
        if x.status in ("refused", "unsupported", "rejected")
    ]
    kept = [
        f"- {e.proposal_id} ({e.strategy}, opt{e.iteration}): {e.change_pct:+.1f}%"
        for e in r.experiments
        if e.kept and e.change_pct is not None
    ]
    pending = [f"- {e.proposal_id}: {e.question or e.verdict_reason}" for e in r.pending]
    lines = [
        f"# {b.workload}: the configuration dftune kept (run {b.run_id})",
        "",
        f"**Result:** {b.metric} {b.baseline_median:.4g}{unit} -> {b.tuned_median:.4g}{unit}: {gain}{ci}.",
        "",
        f"**Kept:** {kept_configuration(r)}.",
        "",
        "## What was kept and why",
        "",
        *(kept or ["- nothing"]),
        "",
        "## Refused by the guards",
        "",
        *(refused or ["- nothing"]),
        "",
        "## Waiting for a person",
        "",
        *(pending or ["- nothing"]),
        "",
        "## How to apply it",
        "",
        f"- The baseline ran with: {arm_configuration(r, r.baseline)}.",
        f"- The tuned arm runs with: {arm_configuration(r, r.incumbent, best=True)}.",
        "- `scripts/tuned.sh` runs the program exactly so; `scripts/baseline.sh` the baseline.",
        "- `changes/kept.env`: the environment to source before the program (`. changes/kept.env`).",
    ]
    for patch in b.tuned.patches:
        lines.append(
            f"- `{patch}`: a source patch; apply it to a copy of the source (`patch -p1 < {patch}`)."
        )
    if b.system_changes:
        lines.append("- `changes/system_changes.sh`: the system changes kept, each with its rollback.")
    if b.tuned.stage is not None:
        lines.append(
            f"- The data folder was copied to {b.tuned.stage.tier} before each run and outputs back."
        )
    lines += [
        "- Under Slurm, Flux or mpirun: put the `export` lines of `changes/kept.env` in the batch script",
        "  before the launch line, and the command of `scripts/tuned.sh` after the launcher.",
        "",
        "## Check it here",
        "",
        "```",
        "dftune verify .          # the manifest, then baseline and tuned measured again, paired",
        "```",
        "",
        f"Command of the run: `{shlex.join(spec.command)}`.",
        "",
    ]
    return "\n".join(lines)


def _provenance(spec: WorkloadSpec, run_dir: Path) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from dftune.core.process import run_command

    def ver(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    src = spec.resolve(spec.source_dir)
    git = (
        run_command(["git", "-C", str(src), "rev-parse", "HEAD"], timeout_s=10)
        if shutil.which("git")
        else None
    )
    fs = None
    try:
        from dftune.tools.diagnose.fs import detect

        fs = detect(str(spec.resolve(spec.data_dir)) if "{" not in spec.data_dir else str(src)).fs_type
    except Exception:  # a machine without /proc: the field stays empty
        fs = None
    archived = (run_dir / "workload.toml").read_bytes()
    return {
        "dftune": ver("dftune"),
        "python": sys.version.split()[0],
        "dftracer": ver("dftracer") or ver("pydftracer"),
        "libraries": {n: ver(n) for n in ("torch", "h5py", "zarr", "numpy", "mpi4py") if ver(n)},
        "machine": {"host": platform.node(), "system": platform.platform(), "cores": os.cpu_count()},
        "data_filesystem": fs,
        "program_git_commit": git.stdout.strip() if git is not None and git.ok else None,
        "spec_sha256": hashlib.sha256(archived).hexdigest(),
    }


# --------------------------------------------------------------------------- manifest


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.name != MANIFEST and VERIFY_DIR not in p.relative_to(folder).parts[:1]
    )


def write_manifest(folder: Path) -> None:
    lines = [f"{_digest(p)}  {p.relative_to(folder).as_posix()}" for p in _files(folder)]
    _write(folder / MANIFEST, "\n".join(lines) + "\n")


def check_manifest(folder: Path) -> None:
    """Raise :class:`BundleError` naming the first file that differs from the manifest, is missing,
    or is not in it (``verify/`` holds the verifications, outside the manifest)."""
    path = folder / MANIFEST
    if not path.is_file():
        raise BundleError(f"{folder}: no {MANIFEST}: not a dftune bundle")
    listed: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, rel = line.partition("  ")
        if digest and rel:
            listed[rel] = digest
    for rel, digest in listed.items():
        f = folder / rel
        if not f.is_file():
            raise BundleError(f"{f}: listed in {MANIFEST} but missing: the bundle is damaged")
        if _digest(f) != digest:
            raise BundleError(f"{f}: differs from {MANIFEST}: the bundle was changed after it was written")
    extra = [p for p in _files(folder) if p.relative_to(folder).as_posix() not in listed]
    if extra:
        raise BundleError(f"{extra[0]}: not in {MANIFEST}: the bundle was changed after it was written")


# --------------------------------------------------------------------------- verify


class Verification(StrictModel):
    """``verify/<host>-<time>.json``: the gain measured again here."""

    schema_: Literal["dftune.verify/1"] = Field(default="dftune.verify/1", alias="schema")
    host: str
    time: str
    pairs: int
    baseline_median: float | None
    tuned_median: float | None
    gain_pct: float | None
    gain_ci: tuple[float, float] | None
    original_gain_pct: float | None
    original_gain_ci: tuple[float, float] | None
    #: holds (within the original's CI), smaller (a win below it), gone (no win beyond the noise)
    verdict: Literal["holds", "smaller", "larger", "gone"]
    comparison: str
    not_applied: list[str] = Field(default_factory=list)


def verify(folder: Path, *, rounds: int = 5, measurer: Measurer | None = None) -> Verification:
    """Check the manifest, then measure both arms again here, paired and interleaved."""
    check_manifest(folder)
    b = Bundle.model_validate_json((folder / BUNDLE_FILE).read_bytes())
    spec = load_spec(folder / "spec.toml")
    with tempfile.TemporaryDirectory(prefix="dftune-verify-") as scratch:
        work = Path(scratch)
        specs = {
            name: _patched(spec, arm, folder, work / f"{name}-source") if arm.patches else spec
            for name, arm in (("baseline", b.baseline), ("tuned", b.tuned))
        }
        plans = [
            ArmPlan(
                s,
                work / name,
                {k: str(v) for k, v in arm.settings.items() if any(k == kn.name for kn in s.knobs)},
                dict(arm.env),
                stage=arm.stage,
            )
            for name, s, arm in (
                ("baseline", specs["baseline"], b.baseline),
                ("tuned", specs["tuned"], b.tuned),
            )
        ]
        result = paired_bench(
            plans[0], plans[1], max_pairs=rounds, lower_is_better=b.lower_is_better, measurer=measurer
        )
    base, tuned = result.reference, result.candidate
    gain = pct_change(base.median, tuned.median, lower_is_better=b.lower_is_better)
    try:
        cmp = compare(base.values(), tuned.values(), lower_is_better=b.lower_is_better)
        ci, said = gain_ci(cmp.ci95, b.lower_is_better), cmp.reason or cmp.verdict
        won = cmp.verdict == "win"
    except ValueError as exc:
        ci, said, won = None, f"not compared: {exc}", False
    verdict: Literal["holds", "smaller", "larger", "gone"] = "gone"
    if won and gain is not None:
        lo, hi = b.gain_ci or (b.gain_pct or gain, b.gain_pct or gain)
        overlaps = ci is None or (ci[1] >= lo and ci[0] <= hi)
        verdict = "holds" if overlaps else ("smaller" if ci is not None and ci[1] < lo else "larger")
    now = datetime.now(UTC)
    doc = Verification(
        host=platform.node() or "host",
        time=now.isoformat(timespec="seconds"),
        pairs=result.pairs,
        baseline_median=base.median,
        tuned_median=tuned.median,
        gain_pct=gain,
        gain_ci=ci,
        original_gain_pct=b.gain_pct,
        original_gain_ci=b.gain_ci,
        verdict=verdict,
        comparison=said,
        not_applied=b.system_changes,
    )
    out = folder / VERIFY_DIR
    out.mkdir(exist_ok=True)
    name = f"{doc.host}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    strictjson.write_file(out / name, doc.model_dump(mode="json", by_alias=True), indent=1)
    return doc


def _patched(spec: WorkloadSpec, arm: Arm, folder: Path, copy: Path) -> WorkloadSpec:
    """The spec run from a copy of its source with the arm's patches applied (the original is
    never touched)."""
    from dftune.tools.runner.changes import FilePatch, preview_patch

    src = spec.resolve(spec.source_dir)
    skip = {src / x.removeprefix("./") for x in _left_out(spec)}
    shutil.copytree(
        src, copy, symlinks=True, ignore=lambda d, names: {n for n in names if Path(d) / n in skip}
    )
    for patch in arm.patches:
        diff = (folder / patch).read_text(encoding="utf-8")
        change = FilePatch(id="bundle", strategy="bundle", root=copy, diff=diff, strip=1)
        for rel, after in preview_patch(change).items():
            target = copy / rel
            target.unlink(missing_ok=True)  # a link in the copy is replaced, never written through
            if after is not None:
                target.write_bytes(after)
    return spec.relocated(copy)
