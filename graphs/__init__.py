"""dftune.graphs (see DESIGN layout)."""
