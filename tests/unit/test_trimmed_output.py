"""Nothing dftune prints ends a line in spaces (Rich pads tables and panels to the width), while
a progress line rewritten in place keeps the spaces that blank its longer predecessor."""

from __future__ import annotations

import io

from dftune.core.terminal import TrimmedStream
from tests.cli_inproc import dftune


def test_spaces_before_a_line_end_go_even_across_writes() -> None:
    out = io.StringIO()
    s = TrimmedStream(out)
    s.write("a table row   \nnext  ")
    s.write("   \x1b[0m")
    s.write("\nlast\n")
    assert out.getvalue() == "a table row\nnext\x1b[0m\nlast\n"


def test_spaces_that_text_follows_are_kept() -> None:
    out = io.StringIO()
    s = TrimmedStream(out)
    s.write("replicate 1/3: ok      ")
    s.write("\rreplicate 2/3: ok\n")
    s.write("x  ")
    s.write("y\n")
    assert out.getvalue() == "replicate 1/3: ok      \rreplicate 2/3: ok\nx  y\n"


def test_a_command_prints_no_trailing_spaces() -> None:
    res = dftune("runs")  # a table Rich pads to the console's width
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines and not [line for line in lines if line != line.rstrip()]


def test_text_after_a_carriage_return_cannot_pass_for_the_failure_line() -> None:
    from dftune.tools.runner.bench import last_line

    assert last_line("Traceback ...\nValueError: bad input\rALL REPLICATES OK\n") == (
        "ValueError: bad input\\rALL REPLICATES OK"
    )
    assert last_line("one\n\n  two  \n\n") == "two" and last_line("") == ""
