"""The typed domain every layer reads and writes: proposals, measurements, comparisons, guard
decisions and verdicts, experiments, knowledge-base records, diagnoses and the run itself.

Models only (pydantic, validated on creation and on update, see :mod:`dftune.core.model`); the
algorithms that make them live in ``tools/`` and ``agents/``. Import from the module that
defines a model (``from dftune.core.domain.run import TuningState``).
"""
