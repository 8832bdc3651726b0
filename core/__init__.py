"""dftune.core: what every layer shares (errors, vocabulary, the citation model, DFTUNE_HOME, atomic
files). It imports nothing else of dftune, so anything may import it."""
