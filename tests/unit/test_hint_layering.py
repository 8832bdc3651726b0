"""A new ROMIO hint proposal on top of kept ones: one merged hint file, the newer value winning a conflict.

ROMIO reads the one file ROMIO_HINTS names, so an arm that pointed ROMIO_HINTS at the new
proposal's file alone would run without the kept hints (measured on the bundled MPI-IO example:
tests/e2e/test_hint_layering_mpiio.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.agents.optimizer.hints import arm_hints, override_check
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import RunReport, log
from dftune.tools.report.hints import hint_rows
from dftune.tools.runner.changes import ChangeError
from dftune.tools.runner.changes.layering import (
    combined_hint_path,
    layer_env,
    read_hint_file,
    replaced_text,
)


def _hint_env(folder: Path, name: str, hints: dict[str, str], *, info_env: bool = False) -> dict[str, str]:
    """The environment of a hint proposal: its own hint file (as agents/optimizer/hints.py writes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.txt"
    path.write_text("".join(f"{k} {v}\n" for k, v in hints.items()))
    env = {"ROMIO_HINTS": str(path), "ROMIO_PRINT_HINTS": "1"}
    if info_env:
        env.update({f"IOR_HINT__MPI__{k}": v for k, v in hints.items()})
    return env


def test_two_kept_hints_merge_into_one_file(tmp_path: Path) -> None:
    first = _hint_env(tmp_path, "cb-write", {"romio_cb_write": "disable"})
    second = _hint_env(tmp_path, "cb-read", {"romio_cb_read": "disable"})
    layered = layer_env(first, second)
    path = Path(layered.env["ROMIO_HINTS"])
    assert path not in (Path(first["ROMIO_HINTS"]), Path(second["ROMIO_HINTS"]))
    assert read_hint_file(path) == {"romio_cb_write": "disable", "romio_cb_read": "disable"}
    assert layered.hints == {"romio_cb_write": "disable", "romio_cb_read": "disable"}
    assert layered.replaced == [] and replaced_text(layered.replaced) == ""
    # the proposals' own files are untouched (another arm still uses them)
    assert read_hint_file(second["ROMIO_HINTS"]) == {"romio_cb_read": "disable"}


def test_a_third_hint_keeps_both_earlier_ones_and_layering_again_names_the_same_file(tmp_path: Path) -> None:
    a = _hint_env(tmp_path, "a", {"romio_cb_write": "disable", "romio_cb_read": "disable"})
    b = _hint_env(tmp_path, "b", {"romio_ds_write": "disable"})
    c = _hint_env(tmp_path, "c", {"cb_buffer_size": "67108864"})
    kept = layer_env(a, b).env
    third = layer_env(kept, c)
    assert read_hint_file(third.env["ROMIO_HINTS"]) == {
        "romio_cb_write": "disable",
        "romio_cb_read": "disable",
        "romio_ds_write": "disable",
        "cb_buffer_size": "67108864",
    }
    # the incumbent is rebuilt from the kept changes in order (agents/optimizer/trust.py): same env
    assert layer_env(layer_env(layer_env({}, a).env, b).env, c).env == third.env
    assert layer_env(kept, c, write=False).env == third.env


def test_a_conflicting_value_the_newer_proposal_wins_and_says_what_it_replaced(tmp_path: Path) -> None:
    kept = _hint_env(
        tmp_path, "off", {"romio_cb_write": "disable", "cb_buffer_size": "4194304"}, info_env=True
    )
    new = _hint_env(tmp_path, "on", {"romio_cb_write": "enable"}, info_env=True)
    layered = layer_env(kept, new)
    assert read_hint_file(layered.env["ROMIO_HINTS"]) == {
        "romio_cb_write": "enable",
        "cb_buffer_size": "4194304",
    }
    assert layered.env["IOR_HINT__MPI__romio_cb_write"] == "enable"
    assert layered.env["IOR_HINT__MPI__cb_buffer_size"] == "4194304"
    # one replacement, although both the hint file and the MPI_Info variable carried it
    assert [str(r) for r in layered.replaced] == ["romio_cb_write=enable replaced romio_cb_write=disable"]
    assert arm_hints(layered.env) == {"romio_cb_write": "enable", "cb_buffer_size": "4194304"}


def test_a_new_file_that_already_says_everything_is_used_as_is(tmp_path: Path) -> None:
    kept = _hint_env(tmp_path, "w", {"romio_cb_write": "disable"})
    new = _hint_env(tmp_path, "wr", {"romio_cb_write": "disable", "romio_cb_read": "disable"})
    assert layer_env(kept, new).env["ROMIO_HINTS"] == new["ROMIO_HINTS"]
    assert layer_env(new, new).env == new  # the same change again changes nothing
    assert layer_env({}, new).env == new  # against the baseline: the proposal's own file
    plain = {"OMP_NUM_THREADS": "4"}
    assert layer_env(kept, plain).env == {**kept, **plain}  # other variables layer as before


def test_combined_file_name_follows_its_content(tmp_path: Path) -> None:
    one = combined_hint_path(tmp_path, {"a": "1", "b": "2"})
    assert one == combined_hint_path(tmp_path, {"a": "1", "b": "2"})
    assert one != combined_hint_path(tmp_path, {"a": "1", "b": "3"})


def test_a_tampered_combined_file_is_written_back(tmp_path: Path) -> None:
    first = _hint_env(tmp_path, "w", {"romio_cb_write": "disable"})
    second = _hint_env(tmp_path, "r", {"romio_cb_read": "disable"})
    path = Path(layer_env(first, second).env["ROMIO_HINTS"])
    path.write_text("romio_cb_write enable\n")
    assert Path(layer_env(first, second).env["ROMIO_HINTS"]) == path
    assert read_hint_file(path) == {"romio_cb_write": "disable", "romio_cb_read": "disable"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("romio_cb_write\n", ":1: not a 'key value' hint line"),
        ("\xff\xfe", "cannot read the ROMIO hint file"),
    ],
)
def test_a_malformed_hint_file_is_one_line_naming_it(tmp_path: Path, text: str, said: str) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(text.encode("latin-1"))
    good = _hint_env(tmp_path, "good", {"romio_cb_read": "disable"})
    with pytest.raises(ChangeError) as err:
        layer_env({"ROMIO_HINTS": str(bad)}, good)
    assert str(bad) in str(err.value) and said in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ChangeError, match="cannot read"):
        layer_env({"ROMIO_HINTS": str(tmp_path / "gone.txt")}, good)


def test_read_hint_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    f = tmp_path / "h.txt"
    f.write_text("# site hints\n\ncb_config_list *:2\nromio_cb_read  disable \n")
    assert read_hint_file(f) == {"cb_config_list": "*:2", "romio_cb_read": "disable"}


def _proposal(env: dict[str, str], hints: dict[str, str]) -> Proposal:
    return Proposal(
        id="romio-cb_buffer_size",
        strategy="l2.romio_cb",
        strategy_name="collective buffering",
        layer="L2",
        checklist=5,
        description="cb_buffer_size",
        change=Change(kind="env", env=env, params=hints),
    )


def test_override_check_holds_every_hint_of_the_combined_arm(tmp_path: Path) -> None:
    """The kept hint is checked too: an arm whose program overrode it did not run 'kept + new'."""
    kept = _hint_env(tmp_path / "h", "w", {"romio_cb_write": "disable"})
    new_env = _hint_env(tmp_path / "h", "size", {"cb_buffer_size": "67108864"})
    layered = layer_env(kept, new_env)
    p = _proposal(new_env, {"cb_buffer_size": "67108864"})
    arm = tmp_path / "opt2"
    (arm / "logs").mkdir(parents=True)
    (arm / "logs" / "r0.out").write_text(
        "key = cb_buffer_size value = 67108864\nkey = romio_cb_write value = enable\n"
    )
    refused, _ = override_check(p, arm, arm_hints(layered.env))
    assert refused is not None and "romio_cb_write: asked disable, in effect enable" in refused
    (arm / "logs" / "r0.out").write_text(
        "key = cb_buffer_size value = 67108864\nkey = romio_cb_write value = disable\n"
    )
    refused, shown = override_check(p, arm, arm_hints(layered.env))
    assert refused is None and "cb_buffer_size=67108864" in shown and "romio_cb_write=disable" in shown


def test_report_shows_the_combined_hints_and_what_replaced_what() -> None:
    p = _proposal({"ROMIO_HINTS": "/x.txt"}, {"romio_cb_write": "enable"})
    arm = Measurement(
        settings={}, values=[1.0], median=1.0, ci95=None, ok=1, replicates=1, traced=False, workdir="w"
    )
    doc = RunReport(
        run_id="r",
        spec_path="w.toml",
        events=[
            log(
                "verifier",
                "opt3: the candidate is faster",
                hints_asked={"romio_cb_write": "enable", "romio_cb_read": "disable"},
                hints_replaced="romio_cb_write=enable replaced romio_cb_write=disable",
                hints_in_effect="romio_cb_write=enable, romio_cb_read=disable",
            )
        ],
        proposals=[p],
        experiments=[Experiment(iteration=3, proposal_id=p.id, strategy=p.strategy, reference=arm)],
    )
    ((arm, asked, said),) = hint_rows(doc)
    assert arm.startswith("opt3")
    assert asked == (
        "romio_cb_write=enable, romio_cb_read=disable (romio_cb_write=enable replaced romio_cb_write=disable)"
    )
    assert said == "romio_cb_write=enable, romio_cb_read=disable"
