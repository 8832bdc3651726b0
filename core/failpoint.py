"""Named points where a test can make dftune die for real, to prove that recovery works there.

``DFTUNE_FAILPOINT=<name>`` makes the process kill itself with SIGKILL when it reaches that
point (``<name>:raise`` raises :class:`FailpointError` instead, an internal error). Unset, a
failpoint costs one dictionary lookup. The points sit at the side-effect boundaries recovery
must handle: ``journal.intent`` (a change journaled, nothing done yet), ``patch.mid`` (the first
file of a patch written, the others not), ``apply.done`` (a change applied, the graph not yet
saved), ``kb.inserted`` (a KB record committed, the graph not yet saved).
"""

from __future__ import annotations

import os
import signal

ENV = "DFTUNE_FAILPOINT"


class FailpointError(RuntimeError):
    """Raised at a failpoint set with ``:raise``: stands for any unexpected error there."""


def failpoint(name: str) -> None:
    """Die here (SIGKILL) or raise, when ``DFTUNE_FAILPOINT`` names this point."""
    want = os.environ.get(ENV)
    if not want:
        return
    point, _, action = want.partition(":")
    if point != name:
        return
    if action == "raise":
        raise FailpointError(f"failpoint {name} reached")
    os.kill(os.getpid(), signal.SIGKILL)
