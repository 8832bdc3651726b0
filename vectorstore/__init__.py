"""The local paper corpus: a chromadb store of passages, offline embeddings, PDF ingestion.

Importing this package is cheap; chromadb is imported only when a store is opened.
"""

from dftune.vectorstore.embeddings import EmbeddingError, get_embedder
from dftune.vectorstore.store import Hit, PaperStore, Passage, StoredCitation, StoreError
