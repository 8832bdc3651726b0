"""dftune.vectorstore (see DESIGN layout)."""
