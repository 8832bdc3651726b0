"""dftune.resources: the data the code reads (rules, strategies, citations; see docs/architecture.md)."""
