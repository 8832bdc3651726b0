"""Layer shares say what they sum: a column past 100% (nested categories, overlapping threads) is
explained where it is shown, on a real DLIO trace whose shares reach past 1,000%."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from dftune.tools.trace import analyze
from dftune.tools.trace.render import AnalysisRenderer, layer_share_caption

#: a DLIO trace of the recorded public set beside the checkout (../shared/traces)
DLIO = "dlio-legacy-strings/dlio-1proc.pfw.gz"


def test_the_caption_says_what_is_summed() -> None:
    assert "does not add to 100%" in layer_share_caption([40.0, 30.0])
    assert "threads of one process overlap" not in layer_share_caption([40.0, 30.0])
    assert "threads of one process overlap" in layer_share_caption([194.6])


def test_a_real_trace_past_100_percent_is_explained_in_both_tables(shared_traces: Path) -> None:
    a = analyze([str(shared_traces / DLIO)], views=["summary", "layer"])
    assert max(layer.share_of_job_pct for layer in a.layers) > 100.0
    c = Console(width=120, record=True, color_system=None)
    AnalysisRenderer(c).render(a, ["summary", "layer"])
    out = " ".join(c.export_text().split())
    assert out.count("threads of one process overlap") == 2
    assert "% of job" not in out
