"""``python -m dftune.cli``: the console entry point, as the ``dftune`` script runs it."""

from dftune.cli import main

main()
