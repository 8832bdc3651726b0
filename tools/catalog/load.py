"""Load and cross-check the catalogs in ``resources/`` (strategies, citations, checklist).

The data ship as package data and are read with :mod:`importlib.resources`; every loader also
accepts a file or directory path (tests point them at temporary files). A bad file raises
:class:`CatalogError` naming the file and the offending entry.
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dftune.core.errors import DftuneError
from dftune.core.vocabulary import CATEGORIES, CHECKLIST, FS_TYPES
from dftune.tools.catalog.models import CatalogCitation, ChecklistCategory, Claim, Strategy

PathArg = str | os.PathLike[str] | None
M = TypeVar("M", bound=BaseModel)

#: Top-level array-of-tables key each kind of catalog file uses.
_TABLES = {"strategies": "strategy", "citations": "citation", "checklist": "category"}


class CatalogError(DftuneError, ValueError):
    """A catalog file is missing, is not valid TOML, or has an invalid entry."""


def _read_sources(path: PathArg, subdir: str) -> list[tuple[str, bytes]]:
    """(label, bytes) of every ``*.toml`` file of a catalog, sorted by name."""
    if path is None:
        root = files("dftune.resources") / subdir
        if not root.is_dir():
            raise CatalogError(f"resources/{subdir}: catalog directory missing from the package")
        entries = sorted((e for e in root.iterdir() if e.name.endswith(".toml")), key=lambda e: e.name)
        found = [(f"resources/{subdir}/{e.name}", e.read_bytes()) for e in entries]
    else:
        p = Path(path)
        if p.is_dir():
            found = [(str(f), f.read_bytes()) for f in sorted(p.glob("*.toml"))]
        elif p.is_file():
            found = [(str(p), p.read_bytes())]
        else:
            raise CatalogError(f"{p}: no such file or directory")
    if not found:
        where = f"resources/{subdir}" if path is None else str(path)
        raise CatalogError(f"{where}: no .toml files")
    return found


def _parse(label: str, data: bytes) -> dict[str, Any]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{label}: invalid TOML: {exc}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(entry)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _entries(path: PathArg, kind: str, model: type[M]) -> Iterable[tuple[str, int, M]]:
    table = _TABLES[kind]
    for label, data in _read_sources(path, kind):
        doc = _parse(label, data)
        extra = set(doc) - {table}
        if extra:
            raise CatalogError(
                f"{label}: unknown top-level keys {sorted(extra)} (expected [[{table}]] entries)"
            )
        raw_entries = doc.get(table, [])
        if not isinstance(raw_entries, list) or not all(isinstance(r, dict) for r in raw_entries):
            raise CatalogError(f"{label}: {table!r} must be an array of tables ([[{table}]])")
        for i, raw in enumerate(raw_entries, start=1):
            key = raw.get("id", raw.get("number", "?"))
            try:
                yield label, i, model.model_validate(raw)
            except ValidationError as exc:
                raise CatalogError(f"{label}: [[{table}]] entry {i} ({key!r}): {_describe(exc)}") from None


def _by_id(path: PathArg, kind: str, model: type[M], table: str) -> dict[str, M]:
    """Entries of one catalog keyed by their ``id``; a repeated id names both files."""
    out: dict[str, M] = {}
    where: dict[str, str] = {}
    for label, i, entry in _entries(path, kind, model):
        key = entry.id  # type: ignore[attr-defined]
        if key in out:
            raise CatalogError(
                f"{label}: [[{table}]] entry {i} ({key!r}): duplicate id (also in {where[key]})"
            )
        out[key], where[key] = entry, label
    return out


def load_strategies(path: PathArg = None) -> dict[str, Strategy]:
    """All strategies, by id, from ``resources/strategies/*.toml`` or ``path`` (file or dir)."""
    return _by_id(path, "strategies", Strategy, "strategy")


def load_citations(path: PathArg = None) -> dict[str, CatalogCitation]:
    """All citations, by id, from ``resources/citations/*.toml`` or ``path`` (file or dir)."""
    return _by_id(path, "citations", CatalogCitation, "citation")


def load_checklist(path: PathArg = None) -> dict[int, ChecklistCategory]:
    """The 12 checklist categories, by number; exactly 1..12 must be present."""
    out: dict[int, ChecklistCategory] = {}
    labels: list[str] = []
    for label, i, c in _entries(path, "checklist", ChecklistCategory):
        labels.append(label)
        if c.number in out:
            raise CatalogError(f"{label}: [[category]] entry {i} ({c.number!r}): duplicate number")
        out[c.number] = c
    missing = sorted(set(CHECKLIST) - set(out))
    if missing:
        raise CatalogError(f"{', '.join(sorted(set(labels)))}: checklist categories missing: {missing}")
    return dict(sorted(out.items()))


def validate_references(strategies: dict[str, Strategy], citations: dict[str, CatalogCitation]) -> list[str]:
    """Cross-file problems: unknown citation ids, citations without a claim for the strategy
    that cites them, and claims about strategies that do not exist or do not cite them."""
    problems: list[str] = []
    for s in strategies.values():
        for cid in s.citations:
            c = citations.get(cid)
            if c is None:
                problems.append(f"strategy {s.id!r}: unknown citation id {cid!r}")
            elif not c.claims_for(s.id):
                problems.append(f"strategy {s.id!r}: citation {cid!r} has no claim for it")
    for c in citations.values():
        for claim in c.claims:
            if claim.strategy is None:
                continue
            cited = strategies.get(claim.strategy)
            if cited is None:
                problems.append(f"citation {c.id!r}: claim about unknown strategy {claim.strategy!r}")
            elif c.id not in cited.citations:
                problems.append(f"citation {c.id!r}: claim about {claim.strategy!r}, which does not cite it")
    return problems


@dataclass(frozen=True)
class Catalog:
    strategies: dict[str, Strategy]
    citations: dict[str, CatalogCitation]
    checklist: dict[int, ChecklistCategory]

    def verified_claims(self, strategy_id: str) -> list[tuple[CatalogCitation, Claim]]:
        """The (citation, claim) pairs that back a strategy and were checked against the source."""
        s = self.strategies[strategy_id]
        return [
            (c, cl)
            for c in (self.citations[i] for i in s.citations)
            for cl in c.claims_for(s.id)
            if cl.verified
        ]

    def is_supported(self, strategy_id: str) -> bool:
        """True when at least one cited claim for the strategy was verified (dftracer-io-optimization skill:
        a proposal without a verifiable citation is UNSUPPORTED)."""
        return bool(self.verified_claims(strategy_id))


def load_catalog(strategies: PathArg = None, citations: PathArg = None, checklist: PathArg = None) -> Catalog:
    """Load all three catalogs and check the references between them."""
    cat = Catalog(load_strategies(strategies), load_citations(citations), load_checklist(checklist))
    problems = validate_references(cat.strategies, cat.citations)
    if problems:
        raise CatalogError("catalog references are inconsistent:\n  " + "\n  ".join(problems))
    return cat


@functools.cache
def default_catalog() -> Catalog:
    """The catalog shipped in ``dftune.resources`` (loaded once per process)."""
    return load_catalog()


def strategies_for(
    category: str, fs_type: str, catalog: Catalog | None = None, *, supported_only: bool = False
) -> list[Strategy]:
    """Strategies that target ``category`` and may be offered on ``fs_type``.

    Forbidden strategies are never returned, nor strategies whose ``valid_fs`` excludes the
    filesystem or whose ``harmful_on`` includes it. With ``supported_only`` only strategies
    backed by at least one verified claim are returned. Sorted by layer, checklist number, id.
    """
    if category not in CATEGORIES:
        raise ValueError(f"unknown bottleneck category {category!r}; expected one of {CATEGORIES}")
    if fs_type not in FS_TYPES:
        raise ValueError(f"unknown filesystem type {fs_type!r}; expected one of {FS_TYPES}")
    cat = catalog if catalog is not None else default_catalog()
    hits = [
        s
        for s in cat.strategies.values()
        if not s.forbidden
        and category in s.bottlenecks
        and s.valid_on(fs_type)
        and (not supported_only or cat.is_supported(s.id))
    ]
    return sorted(hits, key=lambda s: (s.layer, s.checklist, s.id))
