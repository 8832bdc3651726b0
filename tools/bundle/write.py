"""Write a run's bundle: README.md, bundle.json, spec.toml with absolute paths, the kept changes as
the files a person applies, scripts/ that run each arm, the reports, provenance.json and the
manifest. Everything the arms need is inside it, so it needs nothing from DFTUNE_HOME."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomlkit

from dftune.core.domain.measurements import Measurement
from dftune.core.domain.run import RunReport
from dftune.core.home import dftune_home
from dftune.tools.bundle.manifest import write_manifest
from dftune.tools.bundle.model import BUNDLE_FILE, Arm, Bundle, BundleError, PatchRef, write_text
from dftune.tools.bundle.scripts import SHELL, arm_script, batch_script, command_line, launch
from dftune.tools.report.sections import arm_configuration, kept_configuration, overall
from dftune.tools.runner.spec import WorkloadSpec, load_spec
from dftune.tools.session.layout import RUN_BUNDLE

#: a file an arm's variable names is carried in the bundle up to this size (a hint file, a config)
MAX_ENV_FILE = 1 << 20


def run_bundle(report: RunReport, run_dir: Path) -> Path | None:
    """Write (or write again) the run's own bundle, ``<run dir>/bundle``; None when the run kept
    nothing (no configuration to carry) or measured no baseline."""
    kept = any(e.kept and e.verdict != "pending" for e in report.experiments)
    if not kept or report.baseline is None or report.incumbent is None:
        return None
    out = run_dir / RUN_BUNDLE
    new_folder(out, replace=True)  # the run's own output, from an earlier end of this run (a resume)
    return write_bundle(report, run_dir, out)


def export_bundle(report: RunReport, run_dir: Path, out: Path) -> Path:
    """``dftune bundle``: a copy of the run's own bundle when it has one whose manifest holds (with
    the run's check from a copy, which later verifications compare with), else one written now."""
    from dftune.tools.bundle.manifest import check_manifest

    own = run_dir / RUN_BUNDLE
    try:
        check_manifest(own)
    except BundleError:
        return write_bundle(report, run_dir, out)
    _check_target(out, run_dir)
    if out.exists():
        out.rmdir()  # empty (checked): copytree makes it
    shutil.copytree(own, out, symlinks=True)
    return out


def new_folder(out: Path, *, replace: bool = False) -> None:
    """Refuse ``out`` unless it is a new or empty folder (a link or a file never is); ``replace``:
    dftune's own bundle folder, emptied to be written again."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BundleError(f"{out}: not a folder; a bundle is written into a new folder")
    if out.exists() and any(out.iterdir()):
        if not replace:
            raise BundleError(f"{out}: not empty; a bundle is written into a new folder")
        shutil.rmtree(out)


def _check_target(out: Path, run_dir: Path) -> None:
    new_folder(out)
    if out.resolve().is_relative_to(run_dir.resolve()) and out.resolve() != (run_dir / RUN_BUNDLE).resolve():
        raise BundleError(f"{out}: inside the run's folder {run_dir}; write the bundle elsewhere")


def write_bundle(report: RunReport, run_dir: Path, out: Path) -> Path:
    """Write the bundle of ``report`` (its run folder ``run_dir``) into the new folder ``out``."""
    if report.baseline is None or report.incumbent is None:
        raise BundleError(f"run {report.run_id} measured no baseline: there is nothing to bundle")
    _check_target(out, run_dir)
    spec = _spec(report, run_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scripts").mkdir()
    (out / "changes").mkdir()
    base, inc = report.baseline, report.incumbent
    common, kept_patches = _patches(report, run_dir, out)
    carried = _env_files(run_dir, out, base, inc)
    tuned = _arm(inc, carried, [*common, *kept_patches])
    baseline = _arm(base, carried, common)
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
        launcher=spec.launcher.kind,
        system_changes=commands,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    write_text(out / BUNDLE_FILE, json.dumps(doc.model_dump(mode="json", by_alias=True), indent=1) + "\n")
    write_text(out / "spec.toml", _spec_toml(spec))
    write_text(out / "changes" / "kept.env", _kept_env(spec, baseline, tuned))
    if commands:
        lines = [SHELL, "# system changes kept by the run: run as the account that may, rollback below"]
        for pid in commands:
            c = kinds[pid].change
            lines += [f"# {pid}", shlex.join(c.argv)]
            if c.rollback_argv:
                lines.append(f"# rollback: {shlex.join(c.rollback_argv)}")
        write_text(out / "changes" / "system_changes.sh", "\n".join(lines) + "\n")
    for name, arm in (("baseline", baseline), ("tuned", tuned)):
        script = out / "scripts" / f"{name}.sh"
        write_text(script, arm_script(spec, arm, name, out))
        script.chmod(0o755)
        batch = batch_script(spec, name)
        if batch is not None:
            write_text(out / "scripts" / batch[0], batch[1])
    for name in ("report.md", "report.html"):
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, out / name)
    write_text(out / "README.md", _readme(report, doc, spec, out))
    write_text(out / "provenance.json", json.dumps(_provenance(spec, run_dir), indent=1) + "\n")
    write_manifest(out)
    return out


def _arm(m: Measurement, carried: dict[str, str], patches: list[PatchRef]) -> Arm:
    files = {k: carried[v] for k, v in m.env.items() if v in carried}
    env = {k: v for k, v in m.env.items() if k not in files}
    return Arm(settings=dict(m.settings), env=env, env_files=files, stage=m.stage, patches=patches)


def _env_files(run_dir: Path, out: Path, *arms: Measurement) -> dict[str, str]:
    """The files the arms' variables name that the run wrote (a ROMIO hint file under its folder,
    a merged one beside it), copied to ``changes/files/``: original path -> path in the bundle.
    A file elsewhere is the user's own and stays where it is."""
    mine = (run_dir.resolve(), dftune_home().resolve())
    carried: dict[str, str] = {}
    for value in sorted({v for m in arms for v in m.env.values()}):
        p = Path(value)
        if not p.is_absolute() or not p.is_file() or p.is_symlink():
            continue
        if not any(p.resolve().is_relative_to(r) for r in mine) or p.stat().st_size > MAX_ENV_FILE:
            continue
        rel = f"changes/files/{p.name}"
        n = 1
        while rel in carried.values():
            n += 1
            rel = f"changes/files/{n}-{p.name}"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, out / rel)
        carried[value] = rel
    return carried


def _kept_env(spec: WorkloadSpec, base: Arm, tuned: Arm) -> str:
    """``changes/kept.env``: what the tuned arm sets that the baseline did not, to source."""
    lines = ["# the environment of the tuned arm: source it from the bundle's folder (. changes/kept.env)"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(tuned.env.items()) if base.env.get(k) != v]
    lines += [
        f'export {k}="${{BUNDLE:-$PWD}}"/{shlex.quote(rel)}'
        for k, rel in sorted(tuned.env_files.items())
        if base.env_files.get(k) != rel
    ]
    lines += [
        f"export {k.name}={shlex.quote(str(tuned.settings[k.name]))}"
        for k in spec.knobs
        if k.kind == "env"
        and k.name in tuned.settings
        and tuned.settings[k.name] != base.settings.get(k.name)
    ]
    return "\n".join(lines) + "\n"


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


def _patches(report: RunReport, run_dir: Path, out: Path) -> tuple[list[PatchRef], list[PatchRef]]:
    """The source patches as files of the bundle: the levers' env-gated patch (every arm of the
    run ran it: without its variable the program is unchanged), and each kept patch proposal's
    diff with its ``-p`` strip (the tuned arm only, in the order the run kept them)."""
    from dftune.tools.runner import levers

    found = levers.saved(run_dir)
    common: list[PatchRef] = []
    if found is not None and found.patch and Path(found.patch).is_file():
        shutil.copyfile(found.patch, out / "changes" / "levers.patch")
        common.append(PatchRef(path="changes/levers.patch"))
    kinds = {p.id: p for p in report.proposals}
    kept = [
        p.change
        for e in report.experiments
        if e.kept and (p := kinds.get(e.proposal_id)) and p.change.kind == "patch" and p.change.patch_file
    ]
    refs: list[PatchRef] = []
    for n, change in enumerate(kept, 1):
        diff = Path(change.patch_file)
        if not diff.is_file():
            raise BundleError(f"{diff}: the kept patch is gone; the bundle cannot carry it")
        rel = "changes/source.patch" if len(kept) == 1 else f"changes/source-{n}.patch"
        shutil.copyfile(diff, out / rel)
        refs.append(PatchRef(path=rel, strip=change.strip))
    return common, refs


def _launch_lines(spec: WorkloadSpec) -> list[str]:
    """How to apply the configuration in a job of the run's launcher."""
    how = launch(spec)
    if how is None:
        return []
    batch = batch_script(spec, "tuned")
    lines = [
        f"- The run started the program with {spec.launcher.kind} "
        f"({spec.launcher.ranks} rank(s), {spec.launcher.nodes} node(s)). In a batch script, put "
        "the `export` lines of `changes/kept.env` before the launch line, then launch the "
        "command of `scripts/tuned.sh`.",
    ]
    if batch is not None:
        lines.append(
            f"- `scripts/{batch[0]}` is such a batch script: from the bundle's folder, "
            f"`{how.submit} scripts/{batch[0]}`."
        )
    return lines


def _readme(r: RunReport, b: Bundle, spec: WorkloadSpec, out: Path) -> str:
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
    traced = bool(r.baseline and r.baseline.traced) or bool(r.incumbent and r.incumbent.traced)
    lines = [
        f"# {b.workload}: the configuration dftune kept (run {b.run_id})",
        "",
        f"**Result:** {b.metric} {b.baseline_median:.4g}{unit} -> {b.tuned_median:.4g}{unit}: {gain}{ci}"
        + (" (the run traced its arms; dftune verify measures them untraced)." if traced else "."),
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
        "- `scripts/tuned.sh` runs the program exactly so; `scripts/baseline.sh` the baseline. Its "
        "command line (`$WORKDIR`: a scratch folder, `$HERE`: this folder):",
        "",
        "  ```sh",
        f"  {command_line(spec, b.tuned, 'tuned', out)}",
        "  ```",
        "",
        "- `changes/kept.env`: the environment to source before the program, from this folder "
        "(`. changes/kept.env`; elsewhere, set `BUNDLE` to this folder first).",
    ]
    for var, rel in sorted(b.tuned.env_files.items()):
        lines.append(f"- `{rel}`: the file `{var}` names (kept.env points `{var}` at it).")
    for patch in b.tuned.patches:
        lines.append(
            f"- `{patch.path}`: a source patch; apply it to a copy of the source "
            f"(`patch -p{patch.strip} < {patch.path}`, in the source's top folder)."
        )
    for name in sorted(p.name for p in (out / "changes").glob("*-config")):
        lines.append(f"- `changes/{name}/`: the configuration file with the arm's values.")
    if b.system_changes:
        lines.append("- `changes/system_changes.sh`: the system changes kept, each with its rollback.")
    if b.tuned.stage is not None:
        lines.append(
            f"- The data folder was copied to {b.tuned.stage.tier} before each run and its outputs "
            "copied back (`scripts/tuned.sh` does the same)."
        )
    lines += _launch_lines(spec)
    lines += [
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

    from dftune.core.facts.stacks import distributions
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
        "libraries": {n: v for n in distributions() if (v := ver(n))},
        "launcher": spec.launcher.kind,
        "machine": {"host": platform.node(), "system": platform.platform(), "cores": os.cpu_count()},
        "data_filesystem": fs,
        "program_git_commit": git.stdout.strip() if git is not None and git.ok else None,
        "spec_sha256": hashlib.sha256(archived).hexdigest(),
    }
