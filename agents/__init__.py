"""dftune.agents (see DESIGN layout)."""
