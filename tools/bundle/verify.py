"""Verify a bundle: check its manifest, then measure its baseline and tuned arms again, untraced,
paired and interleaved, with the spec's launcher (here, under mpirun, or as Slurm or Flux jobs),
and say whether the gain holds within the original's confidence interval, is smaller or larger,
or is gone. The result is appended as ``verify/<host>-<time>.json``."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from dftune.core import strictjson
from dftune.core.domain.stats import pct_change
from dftune.core.errors import DftuneError
from dftune.core.fsio import read_regular
from dftune.tools.bundle.manifest import check_manifest, write_manifest
from dftune.tools.bundle.model import (
    BUNDLE_FILE,
    CHECK_FILE,
    VERIFY_DIR,
    Arm,
    Bundle,
    BundleError,
    Verdict,
    Verification,
    write_text,
)
from dftune.tools.bundle.scripts import left_out
from dftune.tools.report.sections import gain_ci
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.paired import ArmPlan, paired_bench
from dftune.tools.runner.spec import WorkloadSpec, load_spec
from dftune.tools.runner.stats import compare

#: bundle.json and a verification are a few KiB; far below this
MAX_DOCUMENT = 16 << 20


def read_bundle(folder: Path) -> Bundle:
    """``bundle.json`` of a bundle whose manifest holds."""
    check_manifest(folder)
    try:
        return Bundle.model_validate_json(read_regular(folder / BUNDLE_FILE, MAX_DOCUMENT, "bundle document"))
    except ValueError as exc:
        raise BundleError(f"{folder / BUNDLE_FILE}: not a bundle document: {exc}") from None


def verify(
    folder: Path,
    *,
    rounds: int = 5,
    measurer: Measurer | None = None,
    where: Literal["here", "copy"] = "here",
    local: bool = False,
) -> Verification:
    """Check the manifest, then measure both arms again, paired and interleaved; ``local``: on
    this machine even when the run submitted its programs to a batch scheduler (its ranks
    started by mpirun)."""
    b = read_bundle(folder)
    spec = load_spec(folder / "spec.toml")
    if local and spec.launcher.kind in ("slurm", "flux"):
        kind = "mpirun" if spec.launcher.ranks > 1 else "local"
        spec = spec.model_copy(update={"launcher": spec.launcher.model_copy(update={"kind": kind})})
    with tempfile.TemporaryDirectory(prefix="dftune-verify-") as scratch:
        work = Path(scratch)
        arms = (("baseline", b.baseline), ("tuned", b.tuned))
        plans = []
        for name, arm in arms:
            s = _patched(spec, arm, folder, work / f"{name}-source") if arm.patches else spec
            settings = {k: str(v) for k, v in arm.settings.items() if any(k == kn.name for kn in s.knobs)}
            plans.append(ArmPlan(s, work / name, settings, arm.environment(folder), stage=arm.stage))
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
    check = run_check(folder) if where == "here" else None
    ref_pct, ref_ci = (check.gain_pct, check.gain_ci) if check else (b.gain_pct, b.gain_ci)
    verdict: Verdict = "gone"
    if won and gain is not None:
        lo, hi = ref_ci or (ref_pct or gain, ref_pct or gain)
        overlaps = ci is None or (ci[1] >= lo and ci[0] <= hi)
        verdict = "holds" if overlaps else ("smaller" if ci is not None and ci[1] < lo else "larger")
    now = datetime.now(UTC)
    doc = Verification(
        host=platform.node() or "host",
        time=now.isoformat(timespec="seconds"),
        where=where,
        pairs=result.pairs,
        baseline_median=base.median,
        tuned_median=tuned.median,
        gain_pct=gain,
        gain_ci=ci,
        original_gain_pct=b.gain_pct,
        original_gain_ci=b.gain_ci,
        reference="check" if check else "run",
        reference_gain_pct=ref_pct,
        reference_gain_ci=ref_ci,
        verdict=verdict,
        comparison=said,
        not_applied=b.system_changes,
    )
    if where == "here":
        record(folder, doc)
    return doc


def run_check(folder: Path) -> Verification | None:
    """The run's own check from a copy (``check.json``), when the bundle holds one that shows a gain:
    measured as ``verify`` measures (untraced, paired), so a later verification compares with it."""
    path = folder / CHECK_FILE
    try:
        doc = (
            Verification.model_validate_json(read_regular(path, MAX_DOCUMENT, "check"))
            if path.is_file()
            else None
        )
    except (OSError, ValueError, DftuneError):
        return None
    return doc if doc is not None and doc.verdict != "gone" else None


def record(folder: Path, doc: Verification) -> Path:
    """Append a verification to the bundle (``verify/``, outside its manifest)."""
    out = folder / VERIFY_DIR
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BundleError(f"{out}: not a folder of the bundle (a link or a file): the bundle was changed")
    out.mkdir(exist_ok=True)
    stamp = doc.time.replace("-", "").replace(":", "").removesuffix("+0000")
    text = strictjson.dumps(doc.model_dump(mode="json", by_alias=True), indent=1) + "\n"
    for n in range(1, 1000):  # verifications that end in the same second each keep their own file
        path = out / f"{doc.host}-{stamp}-{doc.where}{'' if n == 1 else f'-{n}'}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path
    raise BundleError(f"{out}: a thousand verifications in one second; not recorded")


def verifications(folder: Path) -> list[Verification]:
    """The run's check and the verifications appended to a bundle, oldest first (an unreadable
    one is skipped)."""
    files = [folder / CHECK_FILE] if (folder / CHECK_FILE).is_file() else []
    if (folder / VERIFY_DIR).is_dir():
        files += sorted((folder / VERIFY_DIR).glob("*.json"))
    out = []
    for f in files:
        try:
            out.append(Verification.model_validate_json(read_regular(f, MAX_DOCUMENT, "verification")))
        except (OSError, ValueError, DftuneError):
            continue
    return sorted(out, key=lambda v: v.time)


def verify_copy(bundle: Path, *, rounds: int, measurer: Measurer | None = None) -> Verification:
    """The run's own check (as the reference pipeline validates its final report): copy the bundle
    to a new place and verify the copy; the result becomes the bundle's ``check.json`` (inside its
    manifest, so the bundle carries it and a later verification compares with it) and a line of
    its README."""
    with tempfile.TemporaryDirectory(prefix="dftune-bundle-copy-") as scratch:
        copy = Path(scratch) / "bundle"
        shutil.copytree(bundle, copy, symlinks=True)
        doc = verify(copy, rounds=rounds, measurer=measurer, where="copy")
    strictjson.write_file(bundle / CHECK_FILE, doc.model_dump(mode="json", by_alias=True), indent=1)
    readme = bundle / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8")
        line = f"**Checked from a copy at the run's end** (untraced, paired): {doc.line()}."
        head, sep, rest = text.partition("\n\n**Kept:**")
        write_text(readme, f"{head}\n\n{line}{sep}{rest}" if sep else f"{text}\n{line}\n")
    write_manifest(bundle)
    return doc


def _patched(spec: WorkloadSpec, arm: Arm, folder: Path, copy: Path) -> WorkloadSpec:
    """The spec run from a copy of its source with the arm's patches applied (the original is
    never touched)."""
    from dftune.tools.runner.changes import FilePatch, preview_patch

    src = spec.resolve(spec.source_dir)
    skip = {src / x.removeprefix("./") for x in left_out(spec)}
    shutil.copytree(
        src, copy, symlinks=True, ignore=lambda d, names: {n for n in names if Path(d) / n in skip}
    )
    for patch in arm.patches:
        diff = (folder / patch.path).read_text(encoding="utf-8")
        change = FilePatch(id="bundle", strategy="bundle", root=copy, diff=diff, strip=patch.strip)
        for rel, after in preview_patch(change).items():
            target = copy / rel
            target.unlink(missing_ok=True)  # a link in the copy is replaced, never written through
            if after is not None:
                target.write_bytes(after)
    return spec.relocated(copy)
