"""The bundle's manifest: the sha256 of every file, so a changed byte is refused naming the file.

``verify/`` (the verifications appended later) lies outside it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from dftune.tools.bundle.model import MANIFEST, VERIFY_DIR, BundleError, write_text

#: a manifest lists a bundle's few dozen files: far below this
MAX_MANIFEST = 16 << 20


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    """Every entry of the bundle that is not a real folder (files, links, FIFOs, sockets), outside
    ``verify/``: a link is listed, never followed."""
    return sorted(
        p
        for p in folder.rglob("*")
        if not (p.is_dir() and not p.is_symlink())
        and p.name != MANIFEST
        and VERIFY_DIR not in p.relative_to(folder).parts[:1]
    )


def _through_link(folder: Path, rel: str) -> Path | None:
    """The first folder on the way to ``rel`` that is a link (a bundle holds real folders only)."""
    at = folder
    for part in Path(rel).parts[:-1]:
        at = at / part
        if at.is_symlink():
            return at
    return None


def write_manifest(folder: Path) -> None:
    lines = [f"{digest(p)}  {p.relative_to(folder).as_posix()}" for p in _files(folder)]
    write_text(folder / MANIFEST, "\n".join(lines) + "\n")


def check_manifest(folder: Path) -> None:
    """Raise :class:`BundleError` naming the first file that differs from the manifest, is missing,
    is a link, or is not in it (``verify/`` holds the verifications, outside the manifest)."""
    path = folder / MANIFEST
    if not path.is_file() or path.is_symlink():
        raise BundleError(f"{folder}: no {MANIFEST}: not a dftune bundle")
    if path.stat().st_size > MAX_MANIFEST:
        raise BundleError(f"{path}: larger than {MAX_MANIFEST >> 20} MiB: not a dftune bundle's manifest")
    listed: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        hexdigest, _, rel = line.partition("  ")
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts or len(hexdigest) != 64:
            raise BundleError(f"{path}:{n}: not a manifest line (sha256, two spaces, a path inside)")
        listed[rel] = hexdigest
    for rel, hexdigest in listed.items():
        f = folder / rel
        link = _through_link(folder, rel)
        if link is not None:
            raise BundleError(f"{link}: a link where the bundle held a folder: the bundle was changed")
        if f.is_symlink():
            raise BundleError(f"{f}: a link where the bundle held a file: the bundle was changed")
        if not f.is_file():
            raise BundleError(f"{f}: listed in {MANIFEST} but missing: the bundle is damaged")
        if digest(f) != hexdigest:
            raise BundleError(f"{f}: differs from {MANIFEST}: the bundle was changed after it was written")
    extra = [p for p in _files(folder) if p.relative_to(folder).as_posix() not in listed]
    if extra:
        raise BundleError(f"{extra[0]}: not in {MANIFEST}: the bundle was changed after it was written")
