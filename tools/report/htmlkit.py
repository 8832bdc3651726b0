"""The HTML report's small parts: escaping, http(s)-only links, tags, tables (shared by its sections)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

from dftune.core.safetext import printable, safe_url


def e(value: Any) -> str:
    """Escape anything from the run for HTML text and attribute values."""
    return html.escape(
        "-" if value is None or value == "" else printable(value, keep_newlines=True), quote=True
    )


#: Where an id or a setting may wrap: after these characters, never inside a word.
_ID_BREAKS = re.compile(r"([._=,/])")


def ident(value: Any) -> str:
    """An id or a setting (``l1.read_buffering``, ``WORKERS=4``) as code that wraps only after
    ``. _ = , /`` (a ``<wbr>`` there, and CSS keeps code whole otherwise), never mid-word."""
    return "<code>" + _ID_BREAKS.sub(r"\1<wbr>", e(value)) + "</code>"


def link(url: Any, text: Any = None) -> str:
    """A link only for http(s) URLs; anything else is shown as text."""
    u = safe_url(url)
    if u is not None:
        return f'<a href="{e(u)}" rel="noreferrer">{e(text if text is not None else u)}</a>'
    return e(text if text is not None else url)


def tag(value: Any, cls: Any = None) -> str:
    klass = "".join(ch for ch in str(cls if cls is not None else value) if ch.isalnum() or ch in "_-")
    return f'<span class="tag {klass}">{e(value)}</span>'


def num(x: Any, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def ci(interval: Sequence[float] | None) -> str:
    return "-" if not interval else f"[{interval[0]:.4g}, {interval[1]:.4g}]"


def table(head: Iterable[str], rows: Iterable[Iterable[str]], num: Sequence[int] = ()) -> str:
    """Cells are HTML already (escape with :func:`e` first); ``num`` are right-aligned column indexes."""
    out = ["<table><thead><tr>", *(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = [f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>" for i, c in enumerate(row)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)
