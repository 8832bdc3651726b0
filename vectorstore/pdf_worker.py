"""Parse one PDF in a throw-away process: ``python pdf_worker.py PDF MAX_PAGES MEM_MB CPU_S``.

Run as a script (not ``-m``) so nothing but the standard library and pypdf is imported
before the limits are in place. A hostile or broken PDF can exhaust memory, loop, or crash
the parser; here that only ends this process, and the parent reports the file and moves on.
Prints one JSON document: ``{"pages": [...], "info": {...}, "n_pages": N, "truncated": bool,
"errors": [...]}`` (errors of single pages, which do not sink the paper).
"""

import json
import resource
import sys


def _limit(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value if hard == resource.RLIM_INFINITY else hard))


def main(argv: list[str]) -> int:
    path, max_pages, mem_mb, cpu_s = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    _limit(resource.RLIMIT_AS, mem_mb * 1024 * 1024)
    _limit(resource.RLIMIT_CPU, cpu_s)
    _limit(resource.RLIMIT_FSIZE, 0)  # the parser has no business writing files
    _limit(resource.RLIMIT_CORE, 0)

    import logging

    from pypdf import PdfReader

    logging.disable(logging.WARNING)  # pypdf warns on every odd object; the parent judges
    reader = PdfReader(path, strict=False)
    if reader.is_encrypted:
        try:
            opened = bool(reader.decrypt(""))
        except Exception:
            opened = False
        if not opened:
            sys.stderr.write("encrypted PDF (no empty user password)\n")
            return 3
    n_pages = len(reader.pages)
    pages: list[str] = []
    errors: list[str] = []
    for i in range(min(n_pages, max_pages)):
        try:
            text = reader.pages[i].extract_text() or ""
        except Exception as exc:  # one bad page does not sink the paper
            text = ""
            errors.append(f"page {i + 1}: {type(exc).__name__}: {exc}"[:300])
        pages.append(text[:200_000])
    info: dict[str, str] = {}
    try:
        meta = dict(reader.metadata or {})
        for key in ("/Title", "/Author", "/Subject", "/Keywords", "/doi", "/DOI"):
            value = meta.get(key)
            if value is not None and str(value).strip():
                info[key.lstrip("/").lower()] = str(value).strip()[:2000]
    except Exception:
        pass  # metadata is optional; the parent marks what is missing
    doc = {
        "pages": pages,
        "info": info,
        "n_pages": n_pages,
        "truncated": n_pages > max_pages,
        "errors": errors,
    }
    json.dump(doc, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
