"""Progress lines on stderr for ``dftune run`` (and resume, approve, replay) and ``make demo``.

Milestones scroll, one line each; a :class:`~dftune.tools.runner.progress_text.Transient` line
(a replicate, a pair of a sitting) overwrites the previous one on a terminal, so a 30-second
baseline shows its count moving without pushing the result off the screen. Off a terminal
(a log file, CI) every line is kept, unless ``keep_transient`` is off.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from dftune.core.safetext import one_line_text
from dftune.core.terminal import word_wrapped
from dftune.tools.runner.progress_text import Transient


class ProgressPrinter:
    """Callable ``(node, message)``: the progress function a run is driven with."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        fit: bool = False,
        keep_transient: bool = True,
        milestones: frozenset[str] | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        #: only these nodes' lines scroll, the others are transient (None: every node's)
        self.milestones = milestones
        #: cut every milestone to one screen line (the demo's screen budget); else it wraps
        self.fit = fit
        self.keep_transient = keep_transient
        self._open = False  # a transient line is on screen

    #: where a progress message starts: after the node's name, right-aligned in 10 columns
    INDENT = 11

    def _text(self, node: str, message: str) -> Text:
        return Text.assemble((f"{node:>10}", "dim"), " " + one_line_text(message))

    def __call__(self, node: str, message: str) -> None:
        c = self.console
        line = self._text(node, message)
        if isinstance(message, Transient) or (self.milestones is not None and node not in self.milestones):
            if not c.is_terminal:
                if self.keep_transient:
                    c.print(line, soft_wrap=True)
                return
            plain = line.plain[: max(10, c.width - 1)]
            c.file.write("\r\x1b[2K" + plain)
            c.file.flush()
            self._open = True
            return
        self.clear()
        if self.fit and len(line.plain) > c.width:
            line.truncate(c.width - 1)
            line.append("…")
        c.print(word_wrapped(line, c.width, self.INDENT), soft_wrap=True)

    def clear(self) -> None:
        """Remove the transient line (before a milestone, and before the result is printed)."""
        if self._open:
            self.console.file.write("\r\x1b[2K")
            self.console.file.flush()
            self._open = False
