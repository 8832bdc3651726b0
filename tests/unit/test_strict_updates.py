"""State and KB updates are validated where they are made (core/model.py StrictModel).

``Experiment.model_copy(update={"verdict": "wins", "verdcit_reason": "typo"})`` was accepted
silently (pydantic's model_copy skips validation) and could reach a checkpoint and the KB.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dftune.core.domain.experiments import Experiment
from dftune.core.domain.kb import KbLookup, KbRecord, KbRecordIn
from dftune.core.domain.measurements import Measurement
from dftune.core.model import StrictModel


def test_every_state_and_kb_model_shares_the_strict_base() -> None:
    from dftune.core.domain import experiments, kb, measurements, proposals, run

    models = [
        v
        for mod in (run, proposals, measurements, experiments, kb)
        for v in vars(mod).values()
        if isinstance(v, type)
        and issubclass(v, __import__("pydantic").BaseModel)
        and v.__module__ == mod.__name__
    ]
    assert models and all(issubclass(m, StrictModel) for m in models), [
        m for m in models if not issubclass(m, StrictModel)
    ]
    assert {Experiment, KbRecord, KbRecordIn, KbLookup} <= set(models)


def _experiment() -> Experiment:
    ref = Measurement(
        settings={},
        values=[1.0, 1.0, 1.0],
        median=1.0,
        ci95=None,
        ok=3,
        replicates=3,
        traced=False,
        workdir="/tmp/x",
    )
    return Experiment(iteration=1, proposal_id="p", strategy="l1.write_buffering", reference=ref)


def test_a_misspelt_field_fails_at_the_update() -> None:
    e = _experiment()
    with pytest.raises(ValueError, match="Experiment has no field 'verdcit_reason'"):
        e.model_copy(update={"verdict": "win", "verdcit_reason": "typo"})


def test_an_invalid_value_fails_at_the_update() -> None:
    e = _experiment()
    with pytest.raises(ValidationError, match="verdict"):
        e.model_copy(update={"verdict": "wins"})
    with pytest.raises(ValidationError, match="iteration"):
        e.model_copy(update={"iteration": "first"})


def test_a_valid_update_copies_and_leaves_the_original() -> None:
    e = _experiment()
    e2 = e.model_copy(update={"kept": True})
    assert e2.kept is True and e.kept is not True and "kept" in e2.model_fields_set
    assert e2.model_copy() == e2
