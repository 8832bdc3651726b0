"""dftune.prompts: the reasoner's prompt files, one folder per agent (see docs/architecture.md)."""
