"""Tables for the terminal that never cut a cell: a table when it fits, a stacked layout when not.

Rich shrinks a table that is wider than the terminal by cutting cells ("App Imp…") and
squeezing columns to zero width. Here every data table is built from :class:`Col` specs: the
columns marked ``wrap`` may wrap at word boundaries down to their ``min_width``, the others
(ids, numbers, short labels) are never folded. When even that table is wider than the
console, the rows are shown stacked instead: one block per row, its key cells on the first
line and every other cell as ``Header: value``, so every value is shown whole at 80 columns
and the wide table still appears at 200.

Every cell goes through :func:`cell`: data is never read as Rich markup and never carries a
control character to the terminal (see :mod:`dftune.core.safetext`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from dftune.core.safetext import one_line_text

Cell = object  # str, Text, numbers, None ("-")


@dataclass(frozen=True)
class Col:
    """One column: its header, alignment, and whether its text may wrap (ids and numbers never do)."""

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = False
    min_width: int | None = None
    #: a share of the spare width (the description column takes what is left)
    ratio: int | None = None
    style: str = ""


def cell(value: Cell) -> Text:
    """A value as Rich text: never markup, control characters shown as escapes, one line."""
    if isinstance(value, Text):
        return value
    if value is None or value == "":
        return Text("-")
    return Text(one_line_text(value))


def text(value: object, style: str = "") -> Text:
    """Data as a Rich ``Text`` (for ``console.print``): never markup, never a raw control character."""
    return Text(one_line_text(value), style=style)


def word_wrapped(t: Text, width: int, indent: int = 0) -> Text:
    """``t`` broken at spaces to lines of at most ``width`` columns, the lines after the first
    indented by ``indent``; a word longer than a line (a path, a command) stays whole, so it can
    be copied. Print it with ``soft_wrap=True``: Rich's own wrapping folds long words."""
    plain = t.plain
    offsets: list[int] = []
    start, room = 0, width
    for word in re.finditer(r"\S+", plain):
        if word.start() > start and word.end() - start > room:
            offsets.append(word.start())
            start, room = word.start(), max(1, width - indent)
    out = Text()
    for i, piece in enumerate(t.divide(offsets)):
        piece.rstrip()
        if i:
            out.append("\n" + " " * indent)
        out.append_text(piece)
    return out


#: Columns are two spaces apart (collapsed padding, no outer edge).
GAP = 2


def _col_min(c: Col, values: Sequence[Text]) -> int:
    """The narrowest this column can be without cutting: whole cells, or (``wrap``) its longest word."""
    if not c.wrap:
        return max([len(c.header), *(v.cell_len for v in values)])
    words = [len(w) for v in [Text(c.header), *values] for w in v.plain.split()]
    return max([c.min_width or 0, *words])


def min_table_width(cols: Sequence[Col], rows: Sequence[Sequence[Cell]]) -> int:
    """Width the :func:`wide_table` of these rows needs so that no cell is cut."""
    cells = [[cell(r[i]) for r in rows] for i in range(len(cols))]
    return sum(_col_min(c, v) for c, v in zip(cols, cells, strict=True)) + GAP * (len(cols) - 1)


def wide_table(
    title: str | None, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], *, caption: str | None = None
) -> Table:
    t = Table(
        title=title,
        title_justify="left",
        caption=caption,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        expand=False,
    )
    for c in cols:
        t.add_column(
            c.header,
            justify=c.justify,
            no_wrap=not c.wrap,
            min_width=c.min_width,
            ratio=c.ratio,
            overflow="fold" if c.wrap else "ignore",
            style=c.style or None,
        )
    for r in rows:
        t.add_row(*(cell(v) for v in r))
    return t


def _pairs_lines(console: Console, pairs: list[Text], width: int) -> list[Text]:
    """Short ``Header: value`` pairs flowed onto lines of ``width`` (never split inside a pair)."""
    lines: list[Text] = []
    line = Text("  ")
    for p in pairs:
        if len(line) > 2 and line.cell_len + 3 + p.cell_len > width:
            lines.append(line)
            line = Text("  ")
        if len(line) > 2:
            line.append("   ")
        line.append_text(p)
    if len(line) > 2:
        lines.append(line)
    return lines


def responsive(
    console: Console,
    title: str | None,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    *,
    head: Sequence[int] = (0,),
    caption: str | None = None,
    width: int | None = None,
) -> RenderableType:
    """The wide table when it fits the console without cutting, else the stacked layout."""
    w = width or console.width
    if not rows or min_table_width(cols, rows) <= w:
        return wide_table(title, cols, rows, caption=caption)
    return stacked(console, title, cols, rows, head=head, caption=caption, width=w)


def stacked(
    console: Console,
    title: str | None,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    *,
    head: Sequence[int] = (0,),
    caption: str | None = None,
    width: int | None = None,
) -> Group:
    """One block per row: the ``head`` cells on one line, then ``Header: value`` for the others.

    Short values share lines (three spaces apart, flowed to ``width``, never broken inside a
    pair); the value of a ``wrap`` column gets its own indented lines, wrapped at word boundaries."""
    w = width or console.width
    parts: list[RenderableType] = []
    if title:
        parts.append(Text(title, style="italic"))
    for r in rows:
        first = Text()
        for i in head:
            if len(first):
                first.append("  ")
            piece = cell(r[i]).copy()
            if i == head[0]:
                piece.stylize("bold")
                if cols[i].header == "#":
                    piece = Text("#") + piece
            first.append_text(piece)
        first.overflow = "fold"  # a head longer than the terminal (a deep path) folds, never crops
        parts.append(first)
        pairs: list[Text] = []
        for i, (c, v) in enumerate(zip(cols, r, strict=True)):
            if i in head:
                continue
            pair = Text(f"{c.header}: ", style="dim")
            pair.append_text(cell(v))
            if c.wrap:
                parts.extend(_pairs_lines(console, pairs, w))
                pairs = []
                parts.append(Padding(pair, (0, 0, 0, 2)))
            else:
                pairs.append(pair)
        parts.extend(_pairs_lines(console, pairs, w))
    if caption:
        parts.append(Text(caption, style="dim"))
    return Group(*parts)


#: spaces (and the colour codes after them) at the end of a line: Rich pads every line of a table
#: or panel to the console's width, which a file, a diff or a copy-paste then carries along
_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)(?=\r?\n)")
_HELD = re.compile(r"[ \t]+(?:\x1b\[[0-9;]*m)*\Z")


class TrimmedStream:
    """A text stream that writes through to ``inner`` without the spaces at the end of each line.

    Spaces at the end of a write are held until the next one shows whether a line ends there (then
    they go) or more text follows (then they are written): a progress line rewritten in place with
    a carriage return keeps the spaces that blank its earlier, longer text."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self._held = ""

    def write(self, s: str) -> int:
        text = _TRAILING.sub(r"\1", self._held + s)
        held = _HELD.search(text)
        self._held = text[held.start() :] if held else ""
        self.inner.write(text[: held.start()] if held else text)  # type: ignore[attr-defined]
        return len(s)

    def flush(self) -> None:
        self.inner.flush()  # type: ignore[attr-defined]

    def isatty(self) -> bool:
        return bool(getattr(self.inner, "isatty", lambda: False)())

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def trim_output() -> None:
    """Route this process's stdout and stderr through :class:`TrimmedStream` (once)."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, TrimmedStream):
            setattr(sys, name, TrimmedStream(stream))
