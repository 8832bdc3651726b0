"""The optimizer agent: the whole option space, the proposal table, one change at a time.

``plan`` turns the workload's knobs and the diagnosis's candidate strategies into
proposals (the guards screen them next, so a forbidden strategy never reaches the table).
``choose`` gives every checklist category a verdict, writes the proposal table and asks the
reasoner for the next proposal. ``apply`` creates the next ``opt<n>`` iteration and applies
the change there through the change journal, so it is applied once and can be rolled back.
"""

from dftune.agents.optimizer.apply import apply_change, copy_source, journal_for, keep_layout, next_iteration
from dftune.agents.optimizer.artifacts import write_layer_artifacts
from dftune.agents.optimizer.checklist import checklist_verdicts
from dftune.agents.optimizer.choose import ACTIONABLE, choose
from dftune.agents.optimizer.estimate import estimate
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.impact import estimate_proposals, renewed
from dftune.agents.optimizer.plan import (
    catalog_proposal,
    knob_proposals,
    plan,
    plan_proposals,
    requirement_gap,
)
from dftune.agents.optimizer.table import UncitedProposal, cited_proposal, proposal_table
