"""Run reports: what was wrong, what was tried, what worked, by how much, on whose evidence."""

from dftune.tools.report.markdown import render_run_markdown
