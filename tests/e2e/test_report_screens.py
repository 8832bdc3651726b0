"""Report pages as a reader sees them: rendered by a real headless Chromium from real traces and a
real run, every plot measured inside its axes, the heatmap drawn for dftracer traces, nothing cut
at the page's right edge.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dftune.tools.report.loader import load_report
from dftune.tools.report.plots import OVER_COLOR, build_plots
from tests.e2e.main_job import SMALL_READS_GROUP, FinishedRun
from tests.plotcheck import artists_outside_axes

pytestmark = pytest.mark.e2e
WIDTH = 1100
#: viridis at 0% (an idle process's cell) and the colour of cells above 100% of the window
VIRIDIS_LOW = (0x44, 0x01, 0x54)
OVER = tuple(int(OVER_COLOR[i : i + 2], 16) for i in (1, 3, 5))


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium here (apt-get install -y chromium)")


def _dftune(*args: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "DFTUNE_OFFLINE": "1"},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _screenshot(page: Path, tmp_path: Path, height: int) -> np.ndarray:
    shot = tmp_path / f"{page.stem}.png"
    proc = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            f"--window-size={WIDTH},{height}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert shot.is_file(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return np.asarray(Image.open(shot).convert("RGB")).astype(int)


def _pixels(img: np.ndarray, rgb: tuple[int, ...], tol: int = 12) -> int:
    return int((np.abs(img - np.array(rgb)).sum(axis=2) <= tol).sum())


def _nothing_at_the_right_edge(img: np.ndarray) -> None:
    """Below the header band, the last columns are page background: no caption or table runs off."""
    body = img[200:, -6:, :]
    dark = (body.sum(axis=2) < 3 * 200).sum()
    assert dark == 0, f"{dark} dark pixels at the right edge: something is cut at the page edge"


@pytest.mark.parametrize("trace", ["dlio-unet3d-8ranks-legacy", "cm1-48ranks-legacy"])
def test_dftracer_trace_report_shows_the_rank_heatmap(
    trace: str, shared_traces: Path, tmp_path: Path
) -> None:
    out = tmp_path / f"{trace}.html"
    doc = _dftune("report", str(shared_traces / trace), "--output", str(out))
    page = Path(str(doc["html"]))
    text = page.read_text()
    assert text.count("data:image/svg+xml;base64,") == 4  # sizes, time split, timeline, heatmap
    assert "HEATMAP module" not in text and '<section id="processes">' in text
    img = _screenshot(page, tmp_path, 6000)
    _nothing_at_the_right_edge(img)
    assert _pixels(img, VIRIDIS_LOW, tol=30) > 2000, "the heatmap did not render"
    if trace.startswith("dlio"):  # its reader threads overlap: cells above 100% are drawn red
        assert _pixels(img, OVER, tol=20) > 200


@pytest.mark.xdist_group(SMALL_READS_GROUP)
def test_run_report_plots_stay_inside_their_axes(
    tmp_path: Path, small_reads_main_job: FinishedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DFTUNE_HOME", str(small_reads_main_job.home))
    run_id = small_reads_main_job.run_id
    _, doc = load_report(run_id)
    plots = build_plots(doc)
    drawn = [p for p in plots if p.figure is not None]
    assert {p.key for p in drawn} >= {"heatmap", "timeline", "xfer", "families", "experiments"}
    for p in drawn:
        assert artists_outside_axes(p.figure) == [], p.key
    page = Path(str(_dftune("report", run_id, "--html")["html"]))
    text = page.read_text()
    assert 'id="fixes"' in text and '<pre class="snippet">' in text
    img = _screenshot(page, tmp_path, 9000)
    _nothing_at_the_right_edge(img)
