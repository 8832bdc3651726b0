"""Every change dftune applies to a workload: journaled before it happens, reversible after.

One kind of change per level of the L1/L2/L3 ladder (workload, software, system; dftracer-io-optimization):

- :class:`EnvChange` (L2) sets environment variables. They go into the iteration's
  ``opt_l2_env.sh`` (``export NAME='value'`` lines, sourced before every run) and, through
  :meth:`Journal.env_overlay`, into the workload's subprocess environment.
- :class:`FilePatch` (L1) applies a unified diff to a *copy* of the source tree
  (``opt<n>/source``). The applier is strict: every hunk must match its context exactly at
  the line its header names; a path that could leave the tree (``..``, absolute paths,
  symlinks anywhere on the way) is refused before anything is touched.
- :class:`CommandChange` (L3) runs a system command (argv, never a shell string). The
  value it changes is read first with ``read_current``; the ``rollback`` template can use
  that value as ``{current}``. It runs only when ``approved=True`` is passed, and
  ``admin-only`` commands never run: they are recorded as manual recommendations.

The :class:`Journal` is an append-only JSON-lines file, fsync'd after every record. A
change is written as ``intent`` (with everything needed to undo it: previous bytes or
"absent", previous mode, the captured value and the rendered rollback) *before* anything
is touched, then ``applied`` or ``failed``. Reverting writes ``reverting`` then
``reverted`` (or ``revert_failed``). After a crash, :meth:`Journal.recover` looks at the
world for every change left in ``intent`` or ``reverting`` and records what is true:
``applied`` if the effect is there (it is never applied a second time), ``aborted`` if it is
not; a half-written patch is first put back to its previous bytes. Only ``applied`` counts as
done: an id whose last attempt ended ``aborted`` or ``failed`` may be applied again (a new
intent); any other id already in the journal is refused, so nothing is ever applied twice.

States: ``intent`` → ``applied`` | ``failed`` | ``aborted``; ``applied`` → ``reverting`` →
``reverted`` | ``revert_failed`` (still in effect, revert can be retried); ``manual`` for
admin-only recommendations. A failed apply restores the previous state before it is
recorded as ``failed``; if even that fails the change is left ``revert_failed``.
"""

from dftune.core.process import CommandResult
from dftune.tools.runner.changes.command import render_rollback
from dftune.tools.runner.changes.envfile import ENV_FILE_NAME, quote_sh, read_env_file, render_env_file
from dftune.tools.runner.changes.journal import Journal
from dftune.tools.runner.changes.models import (
    IN_EFFECT,
    JOURNAL_FORMAT,
    PENDING,
    RETRYABLE,
    ApprovalRequired,
    Change,
    ChangeError,
    CommandChange,
    ConflictError,
    DuplicateChange,
    EnvChange,
    FilePatch,
    JournalError,
    JournalRecord,
    PatchError,
    Privilege,
    State,
    UnsafePathError,
)
from dftune.tools.runner.changes.patch import preview_patch
from dftune.tools.runner.changes.unidiff import FileDiff, Hunk, apply_hunks, parse_unified_diff
