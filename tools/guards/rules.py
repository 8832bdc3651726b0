"""The measuring guards' rules as data (``resources/guards.toml``), validated once: thresholds with
their sources, the signals of doing less and of a changed access pattern, and the allowances."""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dftune.core import resource
from dftune.core.domain.verdicts import GuardName
from dftune.core.errors import DftuneError


class GuardRulesError(DftuneError):
    """resources/guards.toml is not what the guards need."""


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Threshold(_Rule):
    value: float
    why: str = Field(min_length=1)
    source: str = Field(min_length=1)


class Signal(_Rule):
    """Something a comparison of two arms can show that is doing less or a pattern change."""

    id: str
    guard: GuardName
    #: the arm it is measured against
    against: Literal["baseline", "incumbent"]
    what: str
    #: only a person can settle it (the trace cannot tell the two readings apart)
    person: bool = False


class Allowance(_Rule):
    """A way of serving the same requests differently, and what it may explain."""

    id: str
    #: how a reason names it
    name: str
    explains: tuple[str, ...]
    #: the checklist categories whose strategies may use it (empty: any strategy)
    categories: tuple[int, ...] = ()
    #: names of evidence (tools/guards/evidence.py): any one settles it; none: the numbers alone
    evidence: tuple[str, ...] = ()
    #: the name of its budget (tools/guards/evidence.py): how much of a signal it may explain
    budget: str | None = None
    #: without the evidence a person decides (else the signal stands)
    ask: bool = False
    #: even with the evidence only a person can tell (it only says the allowance could apply)
    person: bool = False
    reason: str
    source: str = Field(min_length=1)

    def permits(self, checklist: int | None) -> bool:
        return not self.categories or checklist in self.categories


class Category(_Rule):
    why: str


class GuardRules(_Rule):
    source: str
    threshold: dict[str, Threshold]
    category: dict[int, Category]
    signal: tuple[Signal, ...]
    allowance: tuple[Allowance, ...]

    @model_validator(mode="after")
    def _consistent(self) -> GuardRules:
        signals = {s.id for s in self.signal}
        for a in self.allowance:
            if bad := [s for s in a.explains if s not in signals]:
                raise ValueError(f"allowance {a.id} explains unknown signals: {', '.join(bad)}")
            if unknown := [c for c in a.categories if c not in self.category]:
                raise ValueError(f"allowance {a.id} names unknown categories: {unknown}")
        return self

    def __getattr__(self, name: str) -> Any:
        """A threshold's value by name (``rules.tolerance``): one place for every number."""
        if name.startswith("_"):
            return super().__getattr__(name)  # type: ignore[misc]
        threshold = self.__dict__.get("threshold", {}).get(name)
        if threshold is None:
            raise AttributeError(f"no threshold {name!r} in resources/guards.toml")
        return threshold.value

    def why(self, checklist: int | None) -> str:
        """What a category's strategies do (for reasons), or that there is none."""
        c = self.category.get(checklist) if checklist is not None else None
        return c.why if c is not None else "no category: nothing may change"

    def allowances(self, signal: str, checklist: int | None) -> list[Allowance]:
        """The allowances a strategy of ``checklist`` may use to explain ``signal``, in file order."""
        return [a for a in self.allowance if signal in a.explains and a.permits(checklist)]

    def allows(self, allowance: str, checklist: int | None) -> bool:
        return any(a.id == allowance and a.permits(checklist) for a in self.allowance)

    def signal_of(self, signal: str) -> Signal:
        return next(s for s in self.signal if s.id == signal)


@functools.cache
def guard_rules() -> GuardRules:
    return resource.load("guards.toml", GuardRules, GuardRulesError)
