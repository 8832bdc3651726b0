"""Knowledge catalogs as validated data: strategies, citations and the 12-category checklist.

The records live in ``resources/strategies``, ``resources/citations`` and
``resources/checklist`` (TOML); this package only validates and queries them.
"""

from dftune.tools.catalog.load import (
    Catalog,
    CatalogError,
    default_catalog,
    load_catalog,
    load_checklist,
    load_citations,
    load_strategies,
    strategies_for,
    validate_references,
)
from dftune.tools.catalog.models import (
    Apply,
    CatalogCitation,
    ChecklistCategory,
    Claim,
    Parameter,
    Rollback,
    Strategy,
)
