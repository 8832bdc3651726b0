"""Ingest a folder of PDFs into the paper store: parse safely, find the bibliography, chunk.

Each PDF is parsed by ``pdf_worker.py`` in its own process under memory, CPU-time and
wall-clock limits; a broken, huge, encrypted or hostile file is reported by name and
skipped, and the rest of the folder is ingested. Bibliographic fields come, in order of
trust, from a sidecar (``paper.bib`` / ``paper.json`` next to ``paper.pdf``), the PDF's
metadata, the DOI / arXiv id printed on the first page and -- online only -- the Crossref or
arXiv record of that id, and last a title-like first line. A field nobody established stays
missing.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dftune.core.citation import safe_url
from dftune.core.model import StrictModel
from dftune.core.process import run_command
from dftune.vectorstore.store import PaperStore, Passage, StoredCitation
from dftune.vectorstore.text import chunk

WORKER = Path(__file__).with_name("pdf_worker.py")
DOI_RE = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>,;]+[^\s\"<>,;.)\]])")
ARXIV_RE = re.compile(r"\barXiv:\s*(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class IngestLimits(StrictModel):
    """Resource limits for parsing one PDF (the defaults fit a 2-core, shared machine)."""

    max_bytes: int = 100 * 1024 * 1024
    timeout_s: float = 60.0
    memory_mb: int = 1024
    max_pages: int = 300


class FileReport(StrictModel):
    file: str
    status: Literal["ingested", "unchanged", "skipped"]
    reason: str | None = None
    citation_id: str | None = None
    title: str | None = None
    pages: int = 0
    passages: int = 0
    missing: list[str] = Field(default_factory=list)
    field_sources: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class IngestReport(StrictModel):
    directory: str
    files: list[FileReport] = Field(default_factory=list)

    @property
    def ingested(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "ingested"]

    @property
    def skipped(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "skipped"]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "dftune.papers.ingest/1",
            "directory": self.directory,
            "ingested": len(self.ingested),
            "unchanged": sum(f.status == "unchanged" for f in self.files),
            "skipped": len(self.skipped),
            "files": [f.model_dump(mode="json") for f in self.files],
        }


class ParseError(RuntimeError):
    """The PDF could not be parsed within the limits (the message says why, in one line)."""


# --------------------------------------------------------------------------- parsing


def parse_pdf(path: Path, limits: IngestLimits | None = None) -> dict[str, Any]:
    """Text per page and document info of one PDF, parsed in a limited child process."""
    lim = limits or IngestLimits()
    size = path.stat().st_size
    if size > lim.max_bytes:
        raise ParseError(f"too large ({size} bytes > {lim.max_bytes})")
    with path.open("rb") as fh:
        if b"%PDF-" not in fh.read(1024):
            raise ParseError("not a PDF (no %PDF- header)")
    argv = [
        sys.executable,
        "-I",
        str(WORKER),
        str(path),
        str(lim.max_pages),
        str(lim.memory_mb),
        str(int(lim.timeout_s) + 1),
    ]
    proc = run_command(argv, timeout_s=lim.timeout_s)
    if proc.timed_out:
        raise ParseError(f"parsing took longer than {lim.timeout_s:g} s")
    if proc.error:
        raise ParseError(proc.error)
    if proc.exit_code != 0:
        err = proc.stderr.strip()
        tail = err.splitlines()
        last = tail[-1][:300] if tail else ""
        if proc.exit_code is not None and proc.exit_code < 0:
            raise ParseError(f"parser killed by signal {-proc.exit_code} (limit hit?) {last}".strip())
        if "MemoryError" in err or "failed to map segment" in err:
            raise ParseError(f"parser exceeded the {lim.memory_mb} MiB memory limit")
        raise ParseError(f"unreadable PDF: {last or f'exit {proc.exit_code}'}")
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise ParseError("parser produced no usable output") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pages"), list):
        raise ParseError("parser produced no usable output")
    return doc


# --------------------------------------------------------------------------- bibliography


def parse_bibtex(text: str) -> dict[str, str]:
    """Fields of the first BibTeX entry (braces or quotes, nested braces), lower-case keys."""
    m = re.search(r"@\w+\s*\{\s*[^,]*,", text)
    if not m:
        return {}
    i, out = m.end(), {}
    n = len(text)
    while i < n:
        fm = re.compile(r"\s*([A-Za-z][\w-]*)\s*=\s*").match(text, i)
        if not fm:
            break
        key, i = fm.group(1).lower(), fm.end()
        if i < n and text[i] == "{":
            depth, j = 0, i
            while j < n:
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            value, i = text[i + 1 : j], j + 1
        elif i < n and text[i] == '"':
            j = text.find('"', i + 1)
            j = n if j < 0 else j
            value, i = text[i + 1 : j], j + 1
        else:
            vm = re.compile(r"[^,}\s]+").match(text, i)
            value, i = (vm.group(0), vm.end()) if vm else ("", i)
        out[key] = re.sub(r"\s+", " ", value.replace("{", "").replace("}", "")).strip()
        cm = re.compile(r"\s*,").match(text, i)
        if not cm:
            break
        i = cm.end()
    return out


def _authors(raw: str) -> list[str]:
    """Author list from ``A and B`` (BibTeX), ``A; B`` or ``A, B`` (PDF metadata)."""
    raw = raw.strip()
    if not raw:
        return []
    if re.search(r"\s+and\s+", raw):
        parts = re.split(r"\s+and\s+", raw)
    elif ";" in raw:
        parts = raw.split(";")
    elif raw.count(",") >= 1 and all(" " in p.strip() for p in raw.split(",")):
        parts = raw.split(",")
    else:
        parts = [raw]
    out = []
    for p in parts:
        p = p.strip()
        if "," in p:  # "Last, First" -> "First Last"
            last, _, first = p.partition(",")
            p = f"{first.strip()} {last.strip()}".strip()
        if p:
            out.append(p)
    return out


def _year(v: Any) -> int | None:
    m = re.search(r"\b(19[5-9]\d|20\d\d|2100)\b", str(v or ""))
    return int(m.group(1)) if m else None


def _sidecar(pdf: Path) -> tuple[dict[str, Any], str | None]:
    """Fields from ``<stem>.bib`` or ``<stem>.json`` next to the PDF, and which file."""
    for cand in (pdf.with_suffix(".bib"), pdf.with_name(pdf.name + ".bib")):
        if cand.is_file():
            f = parse_bibtex(cand.read_text(encoding="utf-8", errors="replace"))
            venue = f.get("journal") or f.get("booktitle") or f.get("publisher") or f.get("institution")
            return {
                "title": f.get("title"),
                "authors": _authors(f.get("author", "")),
                "year": _year(f.get("year")),
                "venue": venue,
                "doi": f.get("doi"),
                "url": f.get("url"),
                "arxiv": f.get("eprint") if re.fullmatch(r"\d{4}\.\d{4,5}", f.get("eprint", "")) else None,
            }, cand.name
    for cand in (pdf.with_suffix(".json"), pdf.with_name(pdf.name + ".json")):
        if cand.is_file():
            try:
                d = json.loads(cand.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                return {}, None
            if not isinstance(d, dict):
                return {}, None
            authors = d.get("authors", [])
            return {
                "title": d.get("title") if isinstance(d.get("title"), str) else None,
                "authors": [str(a) for a in authors] if isinstance(authors, list) else _authors(str(authors)),
                "year": _year(d.get("year")),
                "venue": d.get("venue") if isinstance(d.get("venue"), str) else None,
                "doi": d.get("doi") if isinstance(d.get("doi"), str) else None,
                "url": d.get("url") if isinstance(d.get("url"), str) else None,
                "arxiv": d.get("arxiv") if isinstance(d.get("arxiv"), str) else None,
            }, cand.name
    return {}, None


def _first_page_title(text: str) -> str | None:
    """The first line of the first page that looks like a title (not a header or an id)."""
    for line in text.splitlines()[:8]:
        line = line.strip()
        if (
            12 <= len(line) <= 200
            and not re.search(r"arxiv|doi|©|copyright|proceedings|preprint|\d{4}\.\d{4}", line, re.IGNORECASE)
            and re.search(r"[a-z]", line)
        ):
            return line
    return None


#: Fills bibliographic fields for an identifier: (kind "doi" | "arxiv", id) -> fields or None.
#: The literature tools provide the online one (``tools.literature.remote.metadata_lookup``);
#: without it only what the PDF, its sidecar and its first page say is used.
Lookup = Callable[[str, str], dict[str, Any] | None]


def bibliography(pdf: Path, doc: dict[str, Any], lookup: Lookup | None = None) -> StoredCitation:
    """Establish what can be established about the paper; record where each field came from."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def offer(values: dict[str, Any], source: str) -> None:
        for k, v in values.items():
            if k == "url" and v and safe_url(str(v)) is None:
                sources.setdefault("url_refused", source)  # javascript:, file:, ...: never a link
                continue
            if v and k not in fields:
                fields[k] = v
                sources[k] = source

    side, side_name = _sidecar(pdf)
    if side_name:
        offer(side, f"sidecar:{side_name}")
    info = doc.get("info") or {}
    offer(
        {
            "title": _clean(info.get("title")),
            "authors": _authors(_clean(info.get("author")) or ""),
            "doi": _clean(info.get("doi")),
        },
        "pdf-metadata",
    )
    pages = doc.get("pages") or []
    first = "\n".join(str(p) for p in pages[:1])
    dm = DOI_RE.search(first)
    am = ARXIV_RE.search(first)
    offer({"doi": dm.group(1) if dm else None, "arxiv": am.group(1) if am else None}, "first-page")
    if lookup is not None:
        for kind in ("doi", "arxiv"):
            ident = fields.get(kind)
            if ident and any(not fields.get(f) for f in ("title", "authors", "year", "venue")):
                got = lookup(kind, str(ident))
                if got:
                    offer(got, "crossref" if kind == "doi" else "arxiv")
    # The first-line guess comes last: a bibliographic record of the DOI knows better.
    offer({"title": _first_page_title(first)}, "first-page")
    if fields.get("arxiv") and not fields.get("venue") and sources.get("arxiv"):
        fields["venue"], sources["venue"] = f"arXiv preprint arXiv:{fields['arxiv']}", sources["arxiv"]
    cite = StoredCitation(
        id="pdf_" + str(doc.get("sha256", ""))[:16],
        title=fields.get("title"),
        authors=list(fields.get("authors") or []),
        year=fields.get("year"),
        venue=fields.get("venue"),
        doi=fields.get("doi"),
        url=fields.get("url"),
        arxiv=fields.get("arxiv"),
        kind="paper",
        source="pdf",
        field_sources=sources,
    )
    if not cite.url and cite.link():  # the DOI's or arXiv id's page, from the field that gave it
        sources["url"] = sources["doi" if cite.doi else "arxiv"]
        cite = cite.model_copy(update={"url": cite.link(), "field_sources": sources})
    return cite


def _clean(v: Any) -> str | None:
    if not isinstance(v, str):
        return None
    v = _CONTROL.sub("", v).strip()
    return v or None


# --------------------------------------------------------------------------- ingestion


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ingest_file(
    path: Path, store: PaperStore, *, limits: IngestLimits | None = None, lookup: Lookup | None = None
) -> FileReport:
    """Ingest one PDF; never raises for a bad file (the report says why it was skipped)."""
    rep = FileReport(file=str(path), status="skipped")
    try:
        sha = _sha256(path)
        cid = "pdf_" + sha[:16]
        if store.has_citation(cid):
            rep.status, rep.citation_id = "unchanged", cid
            return rep
        doc = parse_pdf(path, limits)
    except ParseError as exc:
        rep.reason = str(exc)
        return rep
    except OSError as exc:
        rep.reason = f"cannot read: {exc.strerror or exc}"
        return rep
    doc["sha256"] = sha
    cite = bibliography(path, doc, lookup)
    passages: list[Passage] = []
    pages = [(_CONTROL.sub("", str(t))) for t in doc["pages"]]
    ctx = cite.title or ""
    for pno, text in enumerate(pages, start=1):
        for j, piece in enumerate(chunk(text)):
            passages.append(
                Passage(
                    id=f"{cid}:p{pno}:{j}",
                    text=piece,
                    citation=cite,
                    kind="page",
                    page=pno,
                    context=ctx,
                    file=path.name,
                )
            )
    page_errors = [str(e) for e in doc.get("errors") or []]
    if not passages:
        why = f": {page_errors[0]}" if page_errors else " (scanned images or empty pages)"
        rep.reason = f"no extractable text{why}"
        return rep
    rep.warnings += page_errors[:5]
    store.add(passages)
    if doc.get("truncated"):
        rep.warnings.append(f"only the first {len(pages)} of {doc.get('n_pages')} pages were read")
    rep.status, rep.citation_id, rep.title = "ingested", cid, cite.title
    rep.pages, rep.passages = len(pages), len(passages)
    rep.missing, rep.field_sources = cite.missing, cite.field_sources
    return rep


def ingest_dir(
    directory: Path,
    store: PaperStore,
    *,
    limits: IngestLimits | None = None,
    lookup: Lookup | None = None,
    recursive: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> IngestReport:
    """Ingest every ``*.pdf`` under ``directory``; bad files are reported and skipped.

    ``progress(done, total, file)`` is called after each file (the CLI draws a bar with it)."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a directory")
    pattern = "**/*" if recursive else "*"
    pdfs = sorted(p for p in root.glob(pattern) if p.is_file() and p.suffix.lower() == ".pdf")
    report = IngestReport(directory=str(root))
    for i, pdf in enumerate(pdfs, 1):
        report.files.append(ingest_file(pdf, store, limits=limits, lookup=lookup))
        if progress is not None:
            progress(i, len(pdfs), pdf.name)
    return report
