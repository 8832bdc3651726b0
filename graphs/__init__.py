"""dftune.graphs: the LangGraph state machine over the agents and guard nodes (see docs/architecture.md)."""
