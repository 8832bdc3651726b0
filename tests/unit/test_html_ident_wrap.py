"""Strategy ids and settings in the HTML report wrap only after ``. _ = , /``, never mid-word."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dftune.tools.report.html import render_run_html
from dftune.tools.report.htmlkit import ident

RECORDED = Path(__file__).parent / "recorded" / "run_small_reads.json"


def test_ident_breaks_only_after_separators_and_escapes() -> None:
    assert ident("l1.read_buffering") == "<code>l1.<wbr>read_<wbr>buffering</code>"
    assert ident("WORKERS=4,PREFETCH=2") == "<code>WORKERS=<wbr>4,<wbr>PREFETCH=<wbr>2</code>"
    assert ident("<script>") == "<code>&lt;script&gt;</code>"


def test_code_in_table_cells_does_not_wrap_anywhere() -> None:
    page = render_run_html(json.loads(RECORDED.read_text())["run"], [])
    assert re.search(r"td code \{[^}]*overflow-wrap: normal", page)
    codes = re.findall(r"<td><code>(.*?)</code>", page)
    assert codes, "the proposal table shows strategy ids as code"
    for c in codes:  # every break opportunity inside an id follows a separator
        for m in re.finditer("<wbr>", c):
            assert c[m.start() - 1] in "._=,/", c
