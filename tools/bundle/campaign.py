"""A campaign's bundle: one bundle per workload whose run kept a change (a copy of the run's own
bundle, with the checks it holds), and an index (``index.json``, ``README.md``) that names every
workload, what it gained and whether its check from a copy held; ``dftune verify`` of the folder
verifies each workload's bundle in turn."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from dftune.core import strictjson
from dftune.core.errors import DftuneError, one_line
from dftune.core.safetext import md_code, md_text
from dftune.tools.bundle.model import INDEX_FILE, BundleError, CampaignIndex, IndexEntry, write_text
from dftune.tools.bundle.verify import read_bundle, verifications
from dftune.tools.bundle.write import new_folder, write_bundle
from dftune.tools.report.loader import load_report
from dftune.tools.session.campaigns import CampaignMeta
from dftune.tools.session.layout import RUN_BUNDLE
from dftune.tools.session.workspace import Workspace


def _folder_name(workload: str, taken: set[str]) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", workload).strip(".-") or "workload"
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}-{n}"
    taken.add(out)
    return out


def write_campaign_bundle(meta: CampaignMeta, ws: Workspace, out: Path, *, replace: bool = False) -> Path:
    """Write the campaign's bundle into ``out`` (a new folder; ``replace``: the campaign's own
    folder, written again at each end)."""
    new_folder(out, replace=replace)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    entries = []
    for m in meta.members:
        entry = IndexEntry(workload=m.workload, run_id=m.run_id, status=m.status)
        run_dir = ws.run_dir(m.run_id)
        own = run_dir / RUN_BUNDLE
        target = out / _folder_name(m.workload, taken)
        try:
            if own.is_dir():
                shutil.copytree(own, target, symlinks=True)
            else:
                _, report = load_report(m.run_id, ws)
                if not any(e.kept and e.verdict != "pending" for e in report.experiments):
                    raise BundleError("its run kept no change")
                write_bundle(report, run_dir, target)
            doc = read_bundle(target)
        except (DftuneError, OSError) as exc:
            shutil.rmtree(target, ignore_errors=True)
            entries.append(entry.model_copy(update={"note": one_line(exc)}))
            continue
        checks = [v for v in verifications(target) if v.where == "copy"]
        entries.append(
            entry.model_copy(
                update={
                    "bundle": target.name,
                    "gain_pct": doc.gain_pct,
                    "gain_ci": doc.gain_ci,
                    "verified": checks[-1].verdict if checks else None,
                }
            )
        )
    index = CampaignIndex(
        campaign_id=meta.id, created=datetime.now(UTC).isoformat(timespec="seconds"), workloads=entries
    )
    strictjson.write_file(out / INDEX_FILE, index.model_dump(mode="json", by_alias=True), indent=1)
    write_text(out / "README.md", _readme(index))
    return out


def read_index(folder: Path) -> CampaignIndex:
    try:
        return CampaignIndex.model_validate_json((folder / INDEX_FILE).read_bytes())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{folder / INDEX_FILE}: not a campaign bundle's index: {exc}") from None


def index_targets(folder: Path) -> list[tuple[str, Path]]:
    """(workload, bundle folder) of each workload of a campaign's bundle, once each: a folder the
    index names must be a real folder inside it (a link is refused, never followed)."""
    out: dict[str, tuple[str, Path]] = {}
    for w in read_index(folder).workloads:
        if not w.bundle or w.bundle in out:
            continue
        target = folder / w.bundle
        if target.is_symlink() or not target.is_dir() or target.parent != folder:
            raise BundleError(f"{target}: not a folder of this campaign bundle (a link, or missing)")
        out[w.bundle] = (w.workload, target)
    return list(out.values())


def _readme(index: CampaignIndex) -> str:
    lines = [
        f"# Campaign {md_text(index.campaign_id)}: the configurations dftune kept",
        "",
        "Each folder is one workload's bundle (its own README.md says how to apply it);",
        "`dftune verify .` verifies each of them here.",
        "",
        "| workload | run | kept | gain (95% CI) | checked from a copy |",
        "|---|---|---|---|---|",
    ]
    for w in index.workloads:
        ci = f" ({w.gain_ci[0]:+.1f}% to {w.gain_ci[1]:+.1f}%)" if w.gain_ci else ""
        gain = f"{w.gain_pct:+.1f}%{ci}" if w.gain_pct is not None else "-"
        kept = md_code(w.bundle + "/") if w.bundle else md_text(w.note or w.status)
        lines.append(
            f"| {md_text(w.workload)} | {md_code(w.run_id)} | {kept} | {gain} | {w.verified or '-'} |"
        )
    return "\n".join(lines) + "\n"
