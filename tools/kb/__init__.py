"""The optimization knowledge base: guarded records of measured changes, lookup by scope, rendering.

``opt_kb_record`` enforces the four guards itself; ``opt_kb_lookup`` partitions findings by
scope (L3 system, L2 software, L1 workload); ``opt_kb_render`` publishes a markdown skill file.
"""

from dftune.tools.kb.models import KbError, default_db_path
from dftune.tools.kb.render import default_render_path, opt_kb_render, render_markdown
from dftune.tools.kb.schema import SCHEMA_VERSION
from dftune.tools.kb.store import (
    opt_kb_get,
    opt_kb_lookup,
    opt_kb_of_experiment,
    opt_kb_record,
    opt_kb_records,
)
from dftune.tools.kb.verdict import WIN_THRESHOLD_PCT, decide
