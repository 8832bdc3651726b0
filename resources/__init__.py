"""dftune.resources (see DESIGN layout)."""
