"""What every command shares: the Typer app, the one-line error contract, JSON output, progress."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperCommand, TyperOption

if TYPE_CHECKING:
    from dftune.core.domain.run import RunResult

app = typer.Typer(
    name="dftune",
    help="Find the I/O bottleneck in dftracer traces and tune it, with cited, verified changes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


#: Exit code for bad input (a trace, a path, an option); 1 is left for unexpected failures.
EXIT_BAD_INPUT = 2


#: ``dftune run`` ended with status failed (baseline could not run, tracer unusable, ...)
EXIT_RUN_FAILED = 3


class SettingsCommand(TyperCommand):
    """A command whose options named after a run setting (a field of RunSettings or LLMSettings)
    show that field's description, default and (a chat-model setting) environment variable, read
    from the models when help is shown: said once there, and start-up stays light. Such an option
    is None when not given, so a campaign file and then the model's default apply."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from dftune.agents.reasoner.transport import SETTINGS_ENV
        from dftune.core.domain.run import LLMSettings, RunSettings  # the CLI's one import of the settings

        for opt in (p for p in self.params if isinstance(p, TyperOption)):
            model = next((m for m in (RunSettings, LLMSettings) if opt.name in m.model_fields), None)
            if model is None or opt.name is None:
                continue
            field = model.model_fields[opt.name]
            default = field.get_default(call_default_factory=True)
            opt.help = field.description
            if default is not None and not opt.is_flag:
                opt.show_default = f"{default:g}" if isinstance(default, float) else str(default)
            if model is LLMSettings:
                opt.envvar, opt.show_envvar = SETTINGS_ENV[opt.name], True
        super().format_help(ctx, formatter)


@app.callback()
def _root() -> None:
    """dftune: autonomous, auditable I/O tuning for workloads traced with dftracer."""
    from dftune.core.terminal import trim_output

    trim_output()  # no printed line ends in the spaces Rich pads tables and panels with


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, non-zero exit: the contract for
    every error (data in it cannot drive the terminal)."""
    from dftune.core.safetext import one_line_text

    for printer in _printers:  # a progress line counting in place ends before the error
        printer.clear()
    sys.stderr.write(f"dftune: error: {one_line_text(message)}\n")
    raise typer.Exit(code)


def emit_json(doc: object) -> None:
    """``--json``: one document on stdout and nothing else there (strict JSON: no NaN/Infinity)."""
    from dftune.core import strictjson

    sys.stdout.write(strictjson.dumps(doc, indent=2) + "\n")


@contextmanager
def _bar(label: str, quiet: bool) -> Iterator[Any]:
    """A Rich progress bar on stderr fed by ``tick(done,
    total, what)``; nothing with --json or off a terminal."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def tick(done: int, total: int, what: Any) -> None:
            bar.update(task, completed=done, total=total, description=str(getattr(what, "status", what))[:40])

        yield tick


def refuse_early(message: str | None) -> None:
    """Refuse a missing path or run id before the command imports its engine (one line, fast)."""
    if message:
        fail(message)


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set NAME=VALUE`` options as a dict (one-line error on a malformed one)."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--set {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can fix (every :class:`DftuneError`, and files that cannot be read)
    into :func:`fail`: one line, exit code 2."""
    from dftune.core.errors import DftuneError, one_line, os_error_message

    try:
        yield
    except DftuneError as exc:
        fail(one_line(exc), getattr(exc, "exit_code", EXIT_BAD_INPUT))
    except OSError as exc:
        fail(os_error_message(exc))


def _progress(as_json: bool) -> Any:
    """Progress lines on stderr (Rich), silent with --json."""
    from dftune.agents.context import silent

    if as_json:
        return silent
    from dftune.tools.report.progress_console import ProgressPrinter

    _printers.append(ProgressPrinter(Console(stderr=True)))
    return _printers[-1]


#: the progress printers of this command: their moving line is cleared before the result prints
_printers: list[Any] = []


def _show_run(result: RunResult, as_json: bool, table: bool = False) -> None:
    for printer in _printers:
        printer.clear()
    if as_json:
        emit_json(result.document())
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render(result, table=table)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (schema dftune.run/1).")]


TableOpt = Annotated[
    bool, typer.Option("--table", help="Also print the full proposal table, every experiment and refusal.")
]


BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--time-budget", help="Wall-clock budget, e.g. 90s, 4m, 8h, 1h30m: nothing starts that cannot finish."
    ),
]


DeadlineOpt = Annotated[
    str | None, typer.Option("--deadline", help="Finish (reports written) by this local time, e.g. 06:30.")
]
