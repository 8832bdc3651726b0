"""The bundle's documents: ``bundle.json`` (what it holds, each arm as it re-runs) and
``verify/<host>-<time>.json`` (the gain measured again), with the bundle's one error."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field

from dftune.core.domain.measurements import StagePlan
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.model import StrictModel
from dftune.tools.runner.spec import KnobValue

MANIFEST = "MANIFEST.sha256"
BUNDLE_FILE = "bundle.json"
VERIFY_DIR = "verify"
#: the run's own check of its bundle from a copy at its end (inside the manifest)
CHECK_FILE = "check.json"
#: a campaign's bundle: one bundle per workload beside this index
INDEX_FILE = "index.json"
Verdict = Literal["holds", "smaller", "larger", "gone"]


class BundleError(DftuneError):
    """The bundle cannot be written, or is not one (a file differs from its manifest): one line."""


def _inside(rel: str) -> str:
    """A path the bundle holds: relative, and never out of it."""
    p = Path(rel)
    if not rel or p.is_absolute() or ".." in p.parts:
        raise ValueError(f"{rel!r} is not a path inside the bundle")
    return rel


#: a file of the bundle, relative to its folder
Inside = Annotated[str, AfterValidator(_inside)]


class PatchRef(StrictModel):
    """A source patch of the bundle, applied to a copy of the program's source."""

    path: Inside
    #: ``patch -p<strip>``
    strip: int = Field(default=1, ge=0, le=64)


class Arm(StrictModel):
    """One arm as the bundle re-runs it."""

    settings: dict[str, KnobValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    #: variables whose value is a file the bundle holds (relative to it): a ROMIO hint file the
    #: run wrote under its own folder, carried so the bundle needs nothing from DFTUNE_HOME
    env_files: dict[str, Inside] = Field(default_factory=dict)
    #: the data folder staged to this tier for every run (None: read in place)
    stage: StagePlan | None = None
    #: source patches applied in order to a copy of the program's source
    patches: list[PatchRef] = Field(default_factory=list)

    def environment(self, folder: Path) -> dict[str, str]:
        """The arm's environment with its files where the bundle ``folder`` holds them."""
        return {**self.env, **{k: str(folder / rel) for k, rel in self.env_files.items()}}


class Bundle(StrictModel):
    """``bundle.json``: what the bundle holds, machine-readable (``dftune verify`` reads it)."""

    model_config = ConfigDict(allow_inf_nan=False)

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
    #: how the run started the program: local, mpirun, slurm or flux (scripts/ has its batch script)
    launcher: str = "local"
    #: changes on the system (L3 commands) kept: a person applies them (README), verify does not
    system_changes: list[str] = Field(default_factory=list)
    created: str


class Verification(StrictModel):
    """A re-measurement of the bundle's gain: ``check.json`` (the run's own, from a copy at its
    end) or ``verify/<host>-<time>-here.json`` (``dftune verify``)."""

    model_config = ConfigDict(allow_inf_nan=False)
    schema_: Literal["dftune.verify/1"] = Field(default="dftune.verify/1", alias="schema")
    host: str
    time: str
    #: where it was measured: "here", or "copy" (the run's own check from a copy at its end)
    where: Literal["here", "copy"] = "here"
    pairs: int
    baseline_median: float | None
    tuned_median: float | None
    gain_pct: float | None
    gain_ci: tuple[float, float] | None
    #: the gain the run reported (its arms measured as the run measured them, traced or not)
    original_gain_pct: float | None
    original_gain_ci: tuple[float, float] | None
    #: what the verdict compares with: the run's check from a copy (untraced and paired, as
    #: verify measures) when the bundle holds one, else the run's own gain
    reference: Literal["check", "run"] = "run"
    reference_gain_pct: float | None = None
    reference_gain_ci: tuple[float, float] | None = None
    #: holds (within the reference's CI), smaller or larger (a win below or above it), gone (no win
    #: beyond the noise)
    verdict: Verdict
    comparison: str
    not_applied: list[str] = Field(default_factory=list)

    def line(self) -> str:
        """One line for a terminal or the morning view."""
        gain = f"{self.gain_pct:+.1f}%" if self.gain_pct is not None else "n/a"
        ci = f" (95% CI {self.gain_ci[0]:+.1f}% to {self.gain_ci[1]:+.1f}%)" if self.gain_ci else ""
        ref = self.reference_gain_pct if self.reference_gain_pct is not None else self.original_gain_pct
        whose = "the run's check" if self.reference == "check" else "the run"
        was = f", {whose} {ref:+.1f}%" if ref is not None else ""
        left = f"; not applied: {', '.join(self.not_applied)}" if self.not_applied else ""
        return f"{self.verdict}: {gain}{ci}{was}, {self.pairs} pairs{left}"


class IndexEntry(StrictModel):
    """One workload of a campaign's bundle."""

    workload: str
    run_id: str
    status: str
    #: the workload's bundle, relative to the index (None: the run kept nothing to carry)
    bundle: Inside | None = None
    gain_pct: float | None = None
    gain_ci: tuple[float, float] | None = None
    #: the run's own check of its bundle from a copy, when it made one
    verified: Verdict | None = None
    note: str = ""


class CampaignIndex(StrictModel):
    """``index.json`` of a campaign's bundle: a bundle per workload that kept a change."""

    schema_: Literal["dftune.bundle-index/1"] = Field(default="dftune.bundle-index/1", alias="schema")
    campaign_id: str
    created: str
    workloads: list[IndexEntry]


def write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
