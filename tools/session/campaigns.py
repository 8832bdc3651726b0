"""Campaigns on disk: ``$DFTUNE_HOME/campaigns/<id>/`` with its metadata, event log and reports.

A campaign tunes several workloads in one night; each workload keeps its own run under
``runs/<run_id>`` (its opt<n> layout, KB records and report). The campaign folder holds what
belongs to the whole: ``campaign.json`` (settings, deadline, each member's run id, status and
coverage), ``events.jsonl`` (its history) and the combined ``report.md`` / ``report.html``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from dftune.core import strictjson
from dftune.core.fsio import UnreadableFile, append_line, read_regular
from dftune.core.home import dftune_home
from dftune.core.model import StrictModel
from dftune.core.supervise import pid_alive
from dftune.tools.runner.deadline import clock
from dftune.tools.session.layout import RunNotFound, WorkspaceError, validate_run_id

CAMPAIGNS_DIRNAME = "campaigns"
META = "campaign.json"
EVENTS = "events.jsonl"
SCHEMA = "dftune.campaign/1"
#: The most of ``campaign.json`` read (a few KiB per member) and of ``events.jsonl`` (a few lines
#: per member and event): a link to a device or a runaway file is refused, never read whole
META_BYTES = 16 << 20
EVENTS_BYTES = 64 << 20
CampaignStatus = Literal["running", "completed", "interrupted", "failed"]


class Member(StrictModel):
    """One workload of the campaign and what became of its run."""

    spec_path: str
    workload: str
    run_id: str
    #: pending (not started), running, then the run's own status (completed, failed, not_worth_tuning,
    #: awaiting_approval) or interrupted (the deadline came before its baseline was ready)
    status: str = "pending"
    reason: str = ""
    coverage: dict[str, Any] | None = None
    #: what waits for a person in its run (the run JSON's ``pending``: approvals, changes kept on trial)
    pending: list[dict[str, Any]] = Field(default_factory=list)


class CampaignMeta(StrictModel):
    schema_: str = Field(SCHEMA, alias="schema")
    id: str
    name: str
    created: datetime
    updated: datetime | None = None
    ended: datetime | None = None
    status: CampaignStatus = "running"
    status_reason: str = ""
    #: epoch seconds; None: no wall-clock budget
    deadline: float | None = None
    budget: str = ""
    #: the settings every member run gets (mode, max_experiments, replicates, model, ...)
    settings: dict[str, Any] = Field(default_factory=dict)
    members: list[Member]
    #: the process driving it (a campaign whose driver is gone shows as interrupted)
    pid: int | None = None

    def member(self, run_id: str) -> Member:
        for m in self.members:
            if m.run_id == run_id:
                return m
        raise KeyError(run_id)


class CampaignStore:
    """Campaign folders under ``<home>/campaigns``."""

    def __init__(self, home: str | Path | None = None) -> None:
        self._home = Path(home) if home is not None else None

    @property
    def root(self) -> Path:
        """Where the campaigns live; made by the first :meth:`create` (reading makes nothing, so a
        read-only home can still be listed)."""
        return (self._home if self._home is not None else dftune_home()) / CAMPAIGNS_DIRNAME

    def dir(self, campaign_id: str) -> Path:
        return self.root / validate_run_id(campaign_id)

    def exists(self, campaign_id: str) -> bool:
        try:
            return (self.dir(campaign_id) / META).is_file()
        except WorkspaceError:
            return False

    def create(self, meta: CampaignMeta) -> None:
        path = self.dir(meta.id)
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            raise WorkspaceError(f"campaign {meta.id!r} already exists at {path}") from None
        self.write(meta)

    def read(self, campaign_id: str) -> CampaignMeta:
        path = self.dir(campaign_id) / META
        try:
            return CampaignMeta.model_validate_json(read_regular(path, META_BYTES, "campaign metadata"))
        except FileNotFoundError:
            raise RunNotFound(f"no campaign {campaign_id!r} under {self.root}") from None
        except UnreadableFile as exc:
            raise WorkspaceError(str(exc)) from None
        except ValidationError as exc:
            raise WorkspaceError(f"{path} is not valid campaign metadata: {exc.errors()[0]['msg']}") from None

    def write(self, meta: CampaignMeta) -> None:
        meta.updated = datetime.now(UTC)
        strictjson.write_file(self.dir(meta.id) / META, meta.model_dump(mode="json", by_alias=True), indent=2)

    def log(self, campaign_id: str, event: str, message: str, **data: Any) -> None:
        line = {
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "event": event,
            "message": message,
            **data,
        }
        path = self.dir(campaign_id) / EVENTS
        text = strictjson.dumps_checked(line, path, default=str) + "\n"
        append_line(path, text, "campaign events")

    def events(self, campaign_id: str) -> list[dict[str, Any]]:
        path = self.dir(campaign_id) / EVENTS
        if not self.exists(campaign_id):
            raise RunNotFound(f"no campaign {campaign_id!r} under {self.root}")
        try:
            text = read_regular(path, EVENTS_BYTES, "campaign event log").decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except UnreadableFile as exc:
            raise WorkspaceError(str(exc)) from None
        lines = text.splitlines()
        out = []
        for line in lines:
            try:
                out.append(strictjson.loads(line))
            except ValueError:
                continue  # a line cut by a crash
        return out

    def list(self) -> list[CampaignMeta]:
        out: list[CampaignMeta] = []
        if not self.root.is_dir():
            return out
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and self.exists(entry.name):
                try:
                    out.append(self.read(entry.name))
                except WorkspaceError:
                    continue
        return out


def driver_alive(meta: CampaignMeta) -> bool:
    """Whether the process that drives a running campaign still exists (this host)."""
    return meta.pid is not None and pid_alive(meta.pid)


def list_campaigns(store: CampaignStore | None = None) -> list[dict[str, Any]]:
    """Every campaign with its status (a running one whose driver is gone shows as interrupted)."""
    out = []
    for meta in (store or CampaignStore()).list():
        status = meta.status
        if status == "running" and not driver_alive(meta):
            status = "interrupted"
        out.append(
            {
                "id": meta.id,
                "status": status,
                "deadline": meta.deadline,
                "deadline_text": clock(meta.deadline) if meta.deadline else None,
                "members": [m.model_dump() for m in meta.members],
                "resume_with": f"dftune resume {meta.id}" if status == "interrupted" else None,
            }
        )
    return out
