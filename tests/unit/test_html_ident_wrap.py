"""Strategy ids and settings in the HTML report wrap only after ``. _ = , /``, never mid-word."""

from __future__ import annotations

import re

from dftune.tools.report.html import render_run_html
from dftune.tools.report.htmlkit import ident
from tests.unit.test_report_links import recorded_report


def test_ident_breaks_only_after_separators_and_escapes() -> None:
    assert ident("l1.read_buffering") == "<code>l1.<wbr>read_<wbr>buffering</code>"
    assert ident("WORKERS=4,PREFETCH=2") == "<code>WORKERS=<wbr>4,<wbr>PREFETCH=<wbr>2</code>"
    assert ident("<script>") == "<code>&lt;script&gt;</code>"


def test_code_in_table_cells_does_not_wrap_anywhere() -> None:
    page = render_run_html(recorded_report(), [])
    assert re.search(r"td code \{[^}]*overflow-wrap: normal", page)
    codes = re.findall(r"<td><code>(.*?)</code>", page)
    assert codes, "the proposal table shows strategy ids as code"
    for c in codes:  # every break opportunity inside an id follows a separator
        for m in re.finditer("<wbr>", c):
            assert c[m.start() - 1] in "._=,/", c
