"""The bundle tools: where a run's (or campaign's) kept configuration is, what it holds and how its
checks went, and a verification started in a detached process (``dftune verify``; it takes as
long as the arms' runs, longer than a client waits for one call)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from dftune.core.domain.stats import MIN_DECIDING_PAIRS
from dftune.mcp_server.registry import Toolbox, ToolFailure, _In
from dftune.mcp_server.run_tools import allowed_path, driver_state, last_error, spawn_driver

box = Toolbox()
#: characters of the bundle's README.md returned (the whole file is at the returned path)
README_CHARS = 8_000


class BundleIn(_In):
    run_id: str = Field(min_length=1, description="Run or campaign id (see run_list).")


def _own_bundle(run_id: str) -> Path:
    """The bundle a run or campaign wrote at its end (a ToolFailure saying why there is none)."""
    from dftune.graphs.campaign import is_campaign
    from dftune.tools.session.campaigns import CampaignStore
    from dftune.tools.session.layout import RUN_BUNDLE
    from dftune.tools.session.workspace import Workspace

    if is_campaign(run_id):
        folder = CampaignStore().dir(run_id) / RUN_BUNDLE
    else:
        ws = Workspace()
        ws.read_meta(run_id)  # an unknown run: RunNotFound, one line
        folder = ws.run_dir(run_id) / RUN_BUNDLE
    if folder.is_symlink():
        raise ToolFailure(f"{folder}: a link where the run keeps its bundle; refused, never followed")
    if not folder.is_dir():
        raise ToolFailure(
            f"{run_id} has no bundle: a run writes one when it ends having kept a change "
            "(run_show says whether it ended and what it kept)"
        )
    return folder


def _key(folder: Path) -> str:
    """The detached verification's name (its driver files in mcp-drivers/)."""
    return "verify-" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]


def _describe(folder: Path) -> dict[str, Any]:
    from dftune.tools.bundle import read_bundle, verifications
    from dftune.tools.bundle.campaign import read_index
    from dftune.tools.bundle.model import INDEX_FILE

    running, code = driver_state(_key(folder))
    out: dict[str, Any] = {"bundle": str(folder), "verifying": running}
    if code not in (None, 0) and not running:
        out["last_verification_error"] = last_error(_key(folder))
    readme = folder / "README.md"
    if readme.is_file():
        out["readme"] = readme.read_text(encoding="utf-8", errors="replace")[:README_CHARS]
    if (folder / INDEX_FILE).is_file():
        out["index"] = read_index(folder).model_dump(mode="json", by_alias=True)
        return out
    doc = read_bundle(folder)  # a changed byte: refused, naming the file
    out.update(
        gain_pct=doc.gain_pct,
        gain_ci=doc.gain_ci,
        launcher=doc.launcher,
        system_changes=doc.system_changes,
        verifications=[v.model_dump(mode="json", by_alias=True) for v in verifications(folder)],
    )
    return out


@box.tool(
    "run_bundle",
    BundleIn,
    """The kept configuration of an ended run (or campaign) as a folder a person carries away:
       its path, README (how to apply it), gain and CI, and every verification made of it (the
       run's own check from a copy included); `verifying` while bundle_verify runs.""",
)
def run_bundle_tool(p: BundleIn) -> dict[str, Any]:
    """A client can hand a person the configuration, not only the report."""
    return {"run_id": p.run_id, **_describe(_own_bundle(p.run_id))}


class VerifyIn(_In):
    run_id: str | None = Field(None, min_length=1, description="Verify this run's (or campaign's) bundle.")
    path: str | None = Field(
        None,
        min_length=1,
        description="Or a copied bundle folder, inside the folders this server was allowed "
        "(dftune mcp --allow DIR).",
    )
    rounds: int = Field(5, ge=MIN_DECIDING_PAIRS, le=20, description="Pairs of baseline and tuned runs.")

    @model_validator(mode="after")
    def _one(self) -> VerifyIn:
        if (self.run_id is None) == (self.path is None):
            raise ValueError("give run_id or path, not both")
        return self


@box.tool(
    "bundle_verify",
    VerifyIn,
    """Start `dftune verify` of a bundle in a detached process: its manifest checked, then its baseline
       and tuned arms measured again, paired, with the run's launcher. Returns at once; run_bundle
       shows the verification when it ends (holds, smaller, larger or gone).""",
    read_only=False,
)
def bundle_verify_tool(p: VerifyIn) -> dict[str, Any]:
    """Verifying runs the bundle's programs: only a run's own bundle, or one inside the allowed folders."""
    from dftune.tools.bundle import check_manifest

    if p.run_id is not None:
        folder = _own_bundle(p.run_id)
    else:
        folder = Path(p.path or "").expanduser().resolve()
        allowed_path(folder)
        if not folder.is_dir():
            raise ToolFailure(f"{folder}: not a folder (a bundle is the folder dftune bundle wrote)")
    from dftune.tools.bundle.model import INDEX_FILE

    if not (folder / INDEX_FILE).is_file():
        check_manifest(folder)  # refused here, naming the file, rather than in the detached process
    key = _key(folder)
    if driver_state(key)[0]:
        raise ToolFailure(f"{folder}: a verification of it already runs (run_bundle shows it)")
    spawn_driver(key, ["verify", str(folder), "--rounds", str(p.rounds)])
    return {"bundle": str(folder), "started": True, "rounds": p.rounds}
