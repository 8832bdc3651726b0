"""Text from data (trace file names, knob values, PDF metadata, model output) made safe to show.

Data is never markup. A file name may carry ANSI/OSC escape sequences (colours, a terminal
hyperlink, a title change) or Rich markup (``app[/]``); a knob value or a paper title may carry
``<script>``. Every renderer passes such text through one of these functions:

* :func:`printable` for a terminal: control characters (C0, DEL, C1, and the Unicode bidi
  overrides that reorder what a reader sees) are shown as visible ``\\xNN`` / ``\\u....``
  escapes, so no byte of the data reaches the terminal as a command.
* :func:`md_text` for Markdown: the same, and the characters that start HTML, a link, a code
  span or a table cell (``< > [ ] ` | \\``) are backslash-escaped, so the text reads literally
  in any Markdown viewer; :func:`md_link` makes a link only of an http(s) URL.
"""

from __future__ import annotations

import re

#: C0 controls (tab and newline are handled by the caller's ``keep``), DEL, C1 controls, and
#: the bidirectional overrides/isolates (Trojan-source style reordering).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: What could make Markdown of data: raw HTML and autolinks (< >), links and images ([ ]), code spans
#: (`), table cells (|) and escapes themselves (\). Emphasis characters stay: they cannot run anything.
_MD_SPECIAL = re.compile(r"([\\`\[\]|<>])")


def _visible(m: re.Match[str]) -> str:
    c = m.group(0)
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(value: object, *, keep_newlines: bool = False) -> str:
    """``value`` as text with every control character shown as an escape (``\\x1b``), never sent raw."""
    text = "" if value is None else str(value)
    if keep_newlines:
        return _CONTROL.sub(_visible, text.replace("\r\n", "\n").replace("\t", "    "))
    return _CONTROL_ALL.sub(_visible, text)


def one_line_text(value: object) -> str:
    """:func:`printable` on one line: a line break (and the blanks around it) or a tab becomes one space."""
    text = "" if value is None else str(value)
    return printable(re.sub(r"[ \t]*[\r\n\v\f]+[ \t]*|\t", " ", text))


def md_text(value: object) -> str:
    """Untrusted text as literal Markdown on one line: no HTML, no link, no code span, no table break."""
    return _MD_SPECIAL.sub(r"\\\1", one_line_text(value))


def md_prose(value: object) -> str:
    """Prose from a model as inert Markdown: :func:`md_text`, and no emphasis, heading or list either
    (a model's words must not look like the report's own structure)."""
    out = re.sub(r"([*~])", r"\\\1", md_text(value))
    out = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", out)
    out = re.sub(r"^(\d+)([.)])", r"\1\\\2", out)
    return re.sub(r"^([#+=-])", r"\\\1", out)


def md_code(value: object) -> str:
    """Untrusted text as an inline code span (ids, settings): a fence longer than any backtick run inside."""
    text = one_line_text(value)
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def safe_url(url: object) -> str | None:
    """The URL when it is a plain http(s) URL without spaces or control characters, else None."""
    u = "" if url is None else str(url).strip()
    if not re.match(r"(?i)https?://[^\s<>\"'`]+$", u) or _CONTROL_ALL.search(u):
        return None
    return u


def md_link(url: object, text: object = None) -> str:
    """A Markdown link for an http(s) URL; anything else (``javascript:``, ``data:``) is literal text."""
    u = safe_url(url)
    label = md_text(text if text is not None else (url or ""))
    if u is None:
        return label
    target = u.replace("(", "%28").replace(")", "%29")
    return f"[{label}]({target})" if text is not None else f"<{target}>"
