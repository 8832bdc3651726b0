"""The measuring guards' rules as data (``resources/guards.toml``), validated once."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dftune.core.errors import DftuneError

Family = Literal["read", "write", "metadata", "sync"]


class GuardRulesError(DftuneError):
    """resources/guards.toml is not what the guards need."""


class Allowed(BaseModel):
    """What one checklist category's strategies may change (see guards.toml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    why: str
    fewer_calls: tuple[Family, ...] = ()
    larger_calls: bool = False
    serve_rereads: bool = False
    extend_ranges: bool = False
    new_files: bool = False
    interleave: bool = False
    reorder: bool = False
    rmw_reads: bool = False
    relayout: bool = False


class GuardRules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    tolerance: float = Field(ge=0, le=0.5)
    order_tolerance: float = Field(ge=0, le=1)
    visit_order_tolerance: float = Field(ge=0, le=2)
    min_files_for_order: int = Field(ge=2)
    size_ratio: tuple[float, float]
    category: dict[int, Allowed]

    def allowed(self, checklist: int | None) -> Allowed:
        """What a category may change; an unknown category (or none) may change nothing."""
        nothing = Allowed(why="no category: nothing may change")
        return self.category.get(checklist, nothing) if checklist is not None else nothing


@functools.cache
def guard_rules() -> GuardRules:
    path = resources.files("dftune.resources") / "guards.toml"
    try:
        return GuardRules.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise GuardRulesError(f"resources/guards.toml: {' '.join(str(exc).split())[:300]}") from None
