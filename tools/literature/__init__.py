"""Literature search: the dftracer-io-optimization skill's tools, local first, remote when there is a network.

Search order (the skill's): papers already in the run's context, :func:`rag_search` (local),
:func:`search_arxiv`, :func:`search_papers_combined`, :func:`get_arxiv_paper`.
"""

from dftune.core.network import offline_forced
from dftune.tools.literature.claims import (
    Evidence,
    evidence_for,
    guard_accepts,
    remember_papers,
    supporting_passage,
)
from dftune.tools.literature.context import SearchContext, context_of, session_search_optimization_context
from dftune.tools.literature.models import Attempt, Paper, SearchResult, Support
from dftune.tools.literature.net import Offline, Remote, RemoteError
from dftune.tools.literature.remote import (
    get_arxiv_paper,
    search_arxiv,
    search_crossref,
    search_openalex,
    search_papers_combined,
    search_semantic_scholar,
)
from dftune.tools.literature.search import MAX_ATTEMPTS, LiteratureSearch, rag_search
