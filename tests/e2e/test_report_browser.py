"""A real run's HTML report, opened in a real headless Chromium: it renders, with its plots, offline."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.e2e.main_job import SMALL_READS_GROUP, FinishedRun, dftune_cli

pytestmark = pytest.mark.e2e

#: solid fills the report's plots use: matplotlib's first series colour, and the read family's bars
PLOT_COLORS = ((0x1F, 0x77, 0xB4), (0x2B, 0x6C, 0xB0))


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium here: .ci/run installs the Debian package `chromium`; apt-get could not run")


@pytest.mark.xdist_group(SMALL_READS_GROUP)
def test_small_reads_report_renders_in_headless_chromium(
    tmp_path: Path, small_reads_main_job: FinishedRun
) -> None:
    browser = _chromium()
    run = small_reads_main_job
    res = dftune_cli("report", run.run_id, "--html", "--json", home=run.home)
    assert res.returncode == 0, res.stderr[-2000:]
    page = Path(json.loads(res.stdout)["html"])
    text = page.read_text()
    assert text.count("data:image/svg+xml;base64,") == 5  # every plot drawn from the real trace

    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,4000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert shot.is_file(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (4000, 1280)
    non_white = (img.sum(axis=2) < 3 * 245).mean()
    assert non_white > 0.03, f"the page looks blank ({non_white:.1%} non-white pixels)"
    plot_px = sum(int((np.abs(img - np.array(c)).sum(axis=2) <= 6).sum()) for c in PLOT_COLORS)
    assert plot_px > 500, f"the embedded plots did not render ({plot_px} plot-coloured pixels)"
