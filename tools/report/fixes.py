"""Severity levels and fix snippets for the reports, the way Drishti presents its insights.

Drishti (Bez et al., PDSW 2022) labels each insight HIGH (a critical issue), WARN (worth a
look), OK (checked and fine) or INFO (context), and gives a code or configuration snippet
under each recommendation. dftune's bottleneck scores (1..5) map onto those levels, and the
snippets come from the strategy catalog (``[strategy.snippet]``, or the environment variable
or command the strategy sets).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any, Literal

Severity = Literal["HIGH", "WARN", "OK", "INFO"]

#: Badge colours, after Drishti's console (HIGH red, WARN orange, OK green, INFO blue).
SEVERITY_CSS = """
.tag.sev-HIGH { background: #fed7d7; color: #742a2a; font-weight: 600; }
.tag.sev-WARN { background: #feebc8; color: #7b341e; }
.tag.sev-OK { background: #c6f6d5; color: #22543d; }
.tag.sev-INFO { background: #bee3f8; color: #2a4365; }
pre.snippet { background: #f7fafc; border: 1px solid #e2e8f0; padding: 8px 10px; overflow-x: auto;
  font-size: 12px; white-space: pre-wrap; word-break: break-word; }
pre.snippet code { padding: 0; background: none; }
"""

SEVERITY_LEGEND = (
    "Severity as in Drishti: HIGH = a bottleneck scored 4-5 (fix first), WARN = scored 2-3, "
    "INFO = scored 1 (context, rarely worth a change alone), OK = checked and nothing found."
)


def severity(score: int | None) -> Severity:
    """A bottleneck score (1..5) as a Drishti level."""
    if score is None:
        return "INFO"
    if score >= 4:
        return "HIGH"
    if score >= 2:
        return "WARN"
    return "INFO"


def severity_html(level: str) -> str:
    return f'<span class="tag sev-{html.escape(level)}">{html.escape(level)}</span>'


def snippet_of(strategy_id: str) -> dict[str, Any] | None:
    """{strategy, name, language, code} of a catalog strategy's fix, None when it has none."""
    from dftune.tools.catalog import default_catalog

    strategy = default_catalog().strategies.get(strategy_id)
    if strategy is None:
        return None
    snip = strategy.fix_snippet()
    if snip is None:
        return None
    return {"strategy": strategy_id, "name": strategy.name, "language": snip.language, "code": snip.code}


def snippets(strategy_ids: Iterable[str]) -> list[dict[str, Any]]:
    """Snippets of the given strategies, each once, in the order given."""
    seen: set[str] = set()
    out = []
    for sid in strategy_ids:
        if sid in seen:
            continue
        seen.add(sid)
        s = snippet_of(sid)
        if s is not None:
            out.append(s)
    return out


def snippet_html(s: dict[str, Any], applied: str = "") -> str:
    """One fix: its name, what dftune applied (when it did), and the snippet."""
    e = html.escape
    done = f" <span class='note'>dftune measured it as: <code>{e(applied)}</code></span>" if applied else ""
    return (
        f"<h4><code>{e(s['strategy'])}</code>: {e(s['name'])}{done}</h4>"
        f'<pre class="snippet"><code class="language-{e(s["language"])}">{e(s["code"])}</code></pre>'
    )


def snippet_markdown(s: dict[str, Any], applied: str = "") -> list[str]:
    fence = "````" if "```" in s["code"] else "```"
    lang = {"shell": "bash"}.get(s["language"], s["language"])
    head = f"#### `{s['strategy']}`: {s['name']}" + (
        f" (dftune measured it as `{applied}`)" if applied else ""
    )
    return [head, "", fence + lang, s["code"], fence, ""]
