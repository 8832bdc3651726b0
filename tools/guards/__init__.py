"""The guards: code, not prompts, stands in front of every knowledge-base record.

Four guards, each returning a :class:`GuardDecision` with a reason a person can check (with
the numbers):

- citation (``citation.py``): a proposal is applied only with a verifiable citation (authors,
  title, venue/year, URL) whose claim for this strategy was verified; otherwise UNSUPPORTED;
- non-degradation (``degradation.py``): a system-scoped result needs the paired application
  metric, and an application regression over 2% forces the verdict ``regression``;
- no-doing-less (``work.py``): measured: the experiment's logical work against the baseline's,
  its calls and bytes against the incumbent's;
- access-pattern (``pattern.py``): measured: the same files, byte ranges, order and transfer
  sizes as the incumbent, whatever the strategy id says.

The two measuring guards are short loops over ``resources/guards.toml``: the signals they look
for, and the allowances (the ways of serving the same requests differently) that explain a
signal with their evidence and budget (``evidence.py``); ``inconclusive`` where only a person
can tell.
"""

from dftune.tools.guards.arms import Arm, Totals
from dftune.tools.guards.citation import citation_guard, names_technique, reference_guard
from dftune.tools.guards.degradation import non_degradation_guard
from dftune.tools.guards.pattern import access_pattern_guard, pattern_by_definition
from dftune.tools.guards.rules import GuardRules, GuardRulesError, guard_rules
from dftune.tools.guards.work import doing_less_by_definition, no_doing_less_guard, work_done
