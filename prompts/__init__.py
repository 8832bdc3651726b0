"""dftune.prompts (see DESIGN layout)."""
