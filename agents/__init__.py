"""dftune.agents: the five agents and the typed state they share (see docs/architecture.md)."""
