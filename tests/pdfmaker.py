"""A tiny PDF writer for tests: real, valid PDFs with text pages and document info.

Enough of PDF 1.4 for pypdf to extract text: a catalog, a page tree, Helvetica, one
content stream per page (optionally Flate-compressed) and a correct cross-reference table.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _content(text: str) -> bytes:
    ops = ["BT", "/F1 10 Tf", "14 TL", "50 750 Td"]
    for line in text.splitlines() or [""]:
        ops.append(f"({_escape(line)}) Tj T*")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1", "replace")


def pdf_bytes(
    pages: Iterable[str],
    info: Mapping[str, str] | None = None,
    *,
    compress: bool = False,
    raw_streams: Iterable[bytes] | None = None,
) -> bytes:
    """A PDF whose pages show ``pages`` (one string per page, lines split on newlines).

    ``raw_streams`` replaces the page contents with already Flate-compressed streams (for
    hostile inputs such as decompression bombs)."""
    streams: list[tuple[bytes, bool]] = []
    if raw_streams is not None:
        streams = [(s, True) for s in raw_streams]
    else:
        for text in pages:
            data = _content(text)
            streams.append((zlib.compress(data), True) if compress else (data, False))
    n = len(streams)
    # 1 catalog, 2 pages, 3 font, then (page, content) pairs, then info.
    objs: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, (data, flate) in enumerate(streams):
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        filt = " /Filter /FlateDecode" if flate else ""
        objs.append(f"<< /Length {len(data)}{filt} >>\nstream\n".encode() + data + b"\nendstream")
    info_ref = ""
    if info:
        entries = " ".join(f"/{k} ({_escape(v)})" for k, v in info.items())
        objs.append(f"<< {entries} >>".encode("latin-1", "replace"))
        info_ref = f" /Info {len(objs)} 0 R"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for num, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{num} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R{info_ref} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def write_pdf(path: Path, pages: Iterable[str], info: Mapping[str, str] | None = None, **kw: object) -> Path:
    path.write_bytes(pdf_bytes(pages, info, **kw))  # type: ignore[arg-type]
    return path


def flate_bomb(size: int) -> bytes:
    """A Flate stream that inflates to ``size`` bytes of spaces (compresses ~1000:1)."""
    comp = zlib.compressobj(9)
    block = b" " * (1 << 20)
    parts = [comp.compress(block) for _ in range(size >> 20)]
    parts.append(comp.flush())
    return b"".join(parts)
