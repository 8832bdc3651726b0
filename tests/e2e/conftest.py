"""End-to-end fixtures shared across modules."""

from __future__ import annotations

import pytest

from tests.e2e.main_job import FinishedRun, run_main_job


@pytest.fixture(scope="session")
def small_reads_main_job(tmp_path_factory: pytest.TempPathFactory) -> FinishedRun:
    """The main job on the bundled small_reads workload, under its own DFTUNE_HOME.

    Three checks read the same real run: its verdicts and KB records, its HTML report in headless
    Chromium, and its plots' axes. One tuning run (about two minutes here), not three; the tests
    share the xdist group ``SMALL_READS_GROUP`` so one worker makes it.
    """
    pytest.importorskip("dftracer")
    return run_main_job("small_reads", home=tmp_path_factory.mktemp("small_reads_home"))
