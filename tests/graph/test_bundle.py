"""`dftune bundle` and `dftune verify`: the kept configuration as a folder that needs nothing from
DFTUNE_HOME, a manifest that refuses a changed byte naming the file, and a verification that
measures both arms again (scripted here; tests/e2e runs real programs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dftune.graphs.runs import start_run
from dftune.tools.bundle import BundleError, check_manifest, verify, write_bundle
from dftune.tools.report.loader import load_report
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.graph.conftest import TOY, toy_measurer


def _bundle(tmp_path: Path) -> Path:
    script = toy_measurer()
    result = start_run(TOY, max_experiments=1, run_id="toy-bundle", measurer=script)
    assert any(v.kept for v in result.verdicts), result.verdicts
    run_dir, report = load_report("toy-bundle")
    return write_bundle(report, run_dir, tmp_path / "bundle")


def test_the_bundle_holds_what_a_person_applies_and_its_scripts_run_each_arm(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {
        "README.md",
        "bundle.json",
        "spec.toml",
        "changes/kept.env",
        "scripts/baseline.sh",
        "scripts/tuned.sh",
        "report.md",
        "provenance.json",
        "MANIFEST.sha256",
    } <= names
    doc = json.loads((out / "bundle.json").read_text())
    assert doc["tuned"]["settings"]["WORKERS"] == 4 and doc["baseline"]["settings"]["WORKERS"] == 1
    assert doc["gain_pct"] > 0 and doc["gain_ci"]
    readme = (out / "README.md").read_text()
    assert "WORKERS=4" in readme and "dftune verify" in readme
    tuned = (out / "scripts" / "tuned.sh").read_text()
    assert "--workers 4" in tuned and "toy.py" in tuned
    assert subprocess.run(["sh", "-n", str(out / "scripts" / "tuned.sh")], check=False).returncode == 0
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["python"] and prov["spec_sha256"] and prov["machine"]["host"]
    check_manifest(out)


def test_a_changed_byte_is_refused_with_the_file_named(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    with (out / "scripts" / "tuned.sh").open("a") as fh:
        fh.write("# one more line\n")
    with pytest.raises(BundleError, match=r"tuned\.sh: differs from MANIFEST\.sha256"):
        check_manifest(out)


def test_verify_of_a_copy_measures_both_arms_and_says_the_gain_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _bundle(tmp_path)
    copy = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(out, copy)
    monkeypatch.setenv("DFTUNE_HOME", str(tmp_path / "fresh-home"))  # nothing of the run's home
    held = verify(
        copy, rounds=5, measurer=ScriptedMeasurer([Arm({}, steady(0.16)), Arm({"WORKERS": 4}, steady(0.041))])
    )
    assert held.verdict == "holds" and held.pairs >= 3, held
    assert len(list((copy / "verify").glob("*.json"))) == 1
    check_manifest(copy)  # the verification is appended beside the manifest, never inside it
    gone = verify(
        copy, rounds=5, measurer=ScriptedMeasurer([Arm({}, steady(0.16)), Arm({"WORKERS": 4}, steady(0.16))])
    )
    assert gone.verdict == "gone"


def test_a_run_that_kept_a_change_ends_with_its_bundle_and_names_it() -> None:
    result = start_run(TOY, max_experiments=1, run_id="toy-ends-bundled", measurer=toy_measurer())
    assert result.bundle and Path(result.bundle, "MANIFEST.sha256").is_file()
    check_manifest(Path(result.bundle))
    from dftune.tools.report.run_glance import glance_rows

    assert dict(glance_rows(result))["bundle"].startswith(result.bundle)


def test_the_run_checks_its_own_bundle_from_a_copy_and_the_morning_view_says_so(tmp_path: Path) -> None:
    from dftune.graphs.runs import run_result
    from dftune.tools.bundle import verifications

    result = start_run(TOY, max_experiments=1, run_id="toy-checked", measurer=toy_measurer())
    assert result.bundle and result.bundle_check and result.bundle_check.startswith("holds"), result
    (check,) = verifications(Path(result.bundle))
    assert check.where == "copy" and check.pairs >= 2
    assert run_result("toy-checked").bundle_check == result.bundle_check
    from dftune.tools.bundle import export_bundle

    run_dir, report = load_report("toy-checked")  # dftune bundle carries the run's check along
    exported = export_bundle(report, run_dir, tmp_path / "exported")
    assert (exported / "check.json").is_file() and verify(
        exported, rounds=4, measurer=toy_measurer()
    ).reference == "check"
    bundle = Path(result.bundle)
    check_manifest(bundle)  # the check is part of the bundle: check.json, in its manifest
    assert (
        "**Checked from a copy at the run's end** (untraced, paired): holds"
        in (bundle / "README.md").read_text()
    )
    # a later verification compares with that check (measured as verify measures), not the run's gain
    later = verify(bundle, rounds=4, measurer=toy_measurer())
    assert (later.reference, later.reference_gain_pct) == ("check", check.gain_pct), later
    assert later.original_gain_pct == check.original_gain_pct and later.verdict == "holds"
    doc = json.loads((bundle / "check.json").read_text())
    (bundle / "check.json").write_text(json.dumps({**doc, "gain_pct": 99.0}))
    with pytest.raises(BundleError, match=r"check\.json: differs from MANIFEST"):
        check_manifest(bundle)
    off = start_run(TOY, max_experiments=1, run_id="toy-unchecked", measurer=toy_measurer(), verify_pairs=0)
    assert off.bundle and off.bundle_check is None


def _toy_report(run_id: str) -> tuple[Path, Any]:
    result = start_run(TOY, max_experiments=1, run_id=run_id, measurer=toy_measurer(), verify_pairs=0)
    assert any(v.kept for v in result.verdicts), result.verdicts
    return load_report(run_id)


def test_a_file_the_run_wrote_for_an_arm_travels_in_the_bundle_and_verify_passes_the_copy(
    tmp_path: Path,
) -> None:
    """A ROMIO hint file lies under the run's folder: the bundle carries it, so that it needs nothing
    from DFTUNE_HOME, and every script, kept.env and verify name the bundle's copy."""
    run_dir, report = _toy_report("toy-hints")
    hints = run_dir / "hints" / "romio-cb.txt"
    hints.parent.mkdir()
    hints.write_text("romio_cb_write disable\n")
    inc = report.incumbent.model_copy(update={"env": {"ROMIO_HINTS": str(hints), "MODE": "fast"}})
    report = report.model_copy(update={"incumbent": inc})
    out = write_bundle(report, run_dir, tmp_path / "bundle")
    doc = json.loads((out / "bundle.json").read_text())
    assert doc["tuned"]["env_files"] == {"ROMIO_HINTS": "changes/files/romio-cb.txt"}
    assert doc["tuned"]["env"] == {"MODE": "fast"} and doc["baseline"]["env_files"] == {}
    assert (out / "changes" / "files" / "romio-cb.txt").read_text() == "romio_cb_write disable\n"
    tuned = (out / "scripts" / "tuned.sh").read_text()
    assert 'export ROMIO_HINTS="$HERE"/changes/files/romio-cb.txt' in tuned and str(run_dir) not in tuned
    kept = (out / "changes" / "kept.env").read_text()
    assert 'ROMIO_HINTS="${BUNDLE:-$PWD}"/changes/files/romio-cb.txt' in kept
    assert "changes/files/romio-cb.txt" in (out / "README.md").read_text()
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(run_dir / "hints")  # the run's folder is gone: the copy alone must do
    env = {"ROMIO_HINTS": str(copy / "changes" / "files" / "romio-cb.txt"), "MODE": "fast"}
    held = verify(
        copy,
        measurer=ScriptedMeasurer([Arm({}, steady(0.16)), Arm({"WORKERS": 4}, steady(0.041), env=env)]),
    )
    assert held.verdict == "holds", held


def test_each_kept_patch_keeps_its_strip_and_a_bundle_that_points_outside_itself_is_refused(
    tmp_path: Path,
) -> None:
    from dftune.tools.bundle.model import Bundle

    run_dir, report = _toy_report("toy-patch")
    diff = tmp_path / "p0.diff"
    diff.write_text("--- toy.py\n+++ toy.py\n@@ -1 +1 @@\n-x\n+y\n")
    kept = report.experiments[0]
    p = next(x for x in report.proposals if x.id == kept.proposal_id)
    change = p.change.model_copy(update={"kind": "patch", "patch_file": str(diff), "strip": 0})
    report = report.model_copy(
        update={
            "proposals": [
                p.model_copy(update={"change": change}) if x.id == p.id else x for x in report.proposals
            ]
        }
    )
    out = write_bundle(report, run_dir, tmp_path / "bundle")
    doc = json.loads((out / "bundle.json").read_text())
    assert doc["tuned"]["patches"] == [{"path": "changes/source.patch", "strip": 0}]
    assert (
        'patch -s -d "$WORKDIR/source" -p0 < "$HERE"/changes/source.patch'
        in (out / "scripts" / "tuned.sh").read_text()
    )
    doc["tuned"]["patches"] = [{"path": "../../etc/passwd", "strip": 1}]
    with pytest.raises(ValueError, match="not a path inside the bundle"):
        Bundle.model_validate(doc)


@pytest.mark.parametrize(
    ("launcher", "launch", "batch"),
    [
        ('kind = "mpirun"\nranks = 4', "mpirun -n 4", None),
        ('kind = "slurm"\nranks = 2\nnodes = 1\npartition = "debug"', "srun", "tuned.sbatch"),
        ('kind = "flux"\nranks = 2', "flux run --nodes=1 --ntasks=2", "tuned.flux"),
    ],
)
def test_the_scripts_launch_as_the_run_did_and_a_batch_script_submits_them(
    tmp_path: Path, launcher: str, launch: str, batch: str | None
) -> None:
    from dftune.tools.bundle.model import Arm as BundleArm
    from dftune.tools.bundle.scripts import arm_script, batch_script
    from dftune.tools.runner.spec import load_spec

    spec_file = tmp_path / "w.toml"
    spec_file.write_text(
        'name = "w"\ncommand = ["{python}", "w.py", "--data", "{data_dir}"]\ndata_dir = "data"\n'
        f"[launcher]\n{launcher}\n"
    )
    spec = load_spec(spec_file)
    (tmp_path / "b" / "changes").mkdir(parents=True)
    text = arm_script(spec, BundleArm(), "tuned", tmp_path / "b")
    (line,) = [x for x in text.splitlines() if "w.py" in x]
    assert line.startswith(f"{launch} ") and line.endswith(" <&3 3<&- &"), text
    assert subprocess.run(["sh", "-n"], input=text, text=True, check=False).returncode == 0
    got = batch_script(spec, "tuned")
    if batch is None:
        assert got is None
        return
    assert got is not None and got[0] == batch
    assert 'scripts/tuned.sh"' in got[1] and "--ntasks=2" in got[1]
    if batch.endswith("sbatch"):
        assert "#SBATCH --partition=debug" in got[1] and "SLURM_SUBMIT_DIR" in got[1]


def test_a_staged_arm_script_runs_on_a_copy_and_brings_the_outputs_back(tmp_path: Path) -> None:
    from dftune.core.domain.measurements import StagePlan
    from dftune.tools.bundle.model import Arm as BundleArm
    from dftune.tools.bundle.scripts import arm_script
    from dftune.tools.runner.spec import load_spec

    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("input\n")
    (tmp_path / "w.py").write_text(
        "import os, sys\nd = sys.argv[1]\nprint(open(os.path.join(d, 'in.txt')).read().strip(), d)\n"
        "open(os.path.join(d, 'out.txt'), 'w').write('made')\n"
    )
    spec_file = tmp_path / "w.toml"
    spec_file.write_text('name = "w"\ncommand = ["{python}", "w.py", "{data_dir}"]\ndata_dir = "data"\n')
    tier = tmp_path / "tier"
    tier.mkdir()
    stage = StagePlan(tier="local", root=str(tier))
    bundle = tmp_path / "b"
    (bundle / "scripts").mkdir(parents=True)
    (bundle / "changes").mkdir()
    script = bundle / "scripts" / "tuned.sh"
    script.write_text(arm_script(load_spec(spec_file), BundleArm(stage=stage), "tuned", bundle))
    run = subprocess.run(["sh", str(script)], capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 0, run.stderr
    said, where = run.stdout.split()
    assert said == "input" and Path(where).is_relative_to(tier)  # it read the staged copy
    assert (data / "out.txt").read_text() == "made"  # and its output came back
    assert list(tier.iterdir()) == []  # the copy is gone


def test_a_campaign_bundle_holds_each_workloads_bundle_and_an_index(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from dftune.tools.bundle.campaign import read_index, write_campaign_bundle
    from dftune.tools.session.campaigns import CampaignMeta, Member
    from dftune.tools.session.workspace import Workspace

    start_run(TOY, max_experiments=1, run_id="camp-a", measurer=toy_measurer())
    start_run(TOY, max_experiments=0, run_id="camp-b", measurer=toy_measurer(), verify_pairs=0)
    meta = CampaignMeta(
        id="camp",
        name="camp",
        created=datetime.now(UTC),
        members=[
            Member(spec_path=str(TOY), workload="toy", run_id="camp-a", status="completed"),
            Member(spec_path=str(TOY), workload="toy", run_id="camp-b", status="completed"),
        ],
    )
    out = write_campaign_bundle(meta, Workspace(), tmp_path / "campaign")
    index = read_index(out)
    a, b = index.workloads
    assert (a.bundle, a.verified, b.bundle) == ("toy", "holds", None), index
    assert a.gain_pct and a.gain_pct > 0 and "kept no change" in b.note
    check_manifest(out / "toy")
    readme = (out / "README.md").read_text()
    assert "`toy/`" in readme and "camp-b" in readme
    with pytest.raises(BundleError, match="not empty"):
        write_campaign_bundle(meta, Workspace(), out)
    again = write_campaign_bundle(meta, Workspace(), out, replace=True)
    assert read_index(again).workloads[0].bundle == "toy"


def test_the_mcp_tools_name_the_bundle_and_start_a_verification_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dftune.mcp_server import run_tools
    from dftune.mcp_server.registry import ToolFailure
    from dftune.mcp_server.toolset import call

    result = start_run(TOY, max_experiments=1, run_id="toy-mcp", measurer=toy_measurer())
    shown = call("run_bundle", {"run_id": "toy-mcp"})
    assert shown["bundle"] == result.bundle and shown["gain_pct"] > 0 and "dftune verify" in shown["readme"]
    assert [v["where"] for v in shown["verifications"]] == ["copy"] and not shown["verifying"]
    started: list[list[str]] = []
    monkeypatch.setattr(run_tools, "spawn_driver", lambda key, args: started.append(args))
    monkeypatch.setattr("dftune.mcp_server.bundle_tools.spawn_driver", lambda key, args: started.append(args))
    assert call("bundle_verify", {"run_id": "toy-mcp", "rounds": 4})["started"]
    assert started == [["verify", result.bundle, "--rounds", "4"]]
    outside = tmp_path / "elsewhere"
    shutil.copytree(str(result.bundle), outside)
    with pytest.raises(ToolFailure, match="outside the folders"):
        call("bundle_verify", {"path": str(outside)})
    monkeypatch.chdir(tmp_path)
    (outside / "README.md").write_text("changed\n")
    with pytest.raises(ToolFailure, match=r"README\.md: differs from MANIFEST"):
        call("bundle_verify", {"path": str(outside)})
    with pytest.raises(ToolFailure, match="run_id or path"):
        call("bundle_verify", {})
    start_run(TOY, max_experiments=0, run_id="toy-none", measurer=toy_measurer())
    with pytest.raises(ToolFailure, match="has no bundle"):
        call("run_bundle", {"run_id": "toy-none"})


def test_a_script_prepares_the_data_as_the_run_did_and_leaves_no_scratch_folder(tmp_path: Path) -> None:
    """A data folder under the run's workdir, filled by the spec's setup: the script makes it, runs
    the setup, then the program, and removes the scratch folder it made."""

    (tmp_path / "make.py").write_text(
        "import os, sys\nopen(os.path.join(sys.argv[1], 'in.txt'), 'w').write('x')\n"
    )
    (tmp_path / "w.py").write_text(
        "import os, sys\nprint('n', len(open(os.path.join(sys.argv[1], 'in.txt')).read()))\n"
    )
    spec_file = tmp_path / "w.toml"
    spec_file.write_text(
        'name = "w"\ncommand = ["{python}", "w.py", "{data_dir}"]\ndata_dir = "{workdir}/data"\n'
        'setup = ["{python}", "make.py", "{data_dir}"]\n'
    )
    script, scratch = _tuned_script(tmp_path, spec_file)
    env = {**os.environ, "TMPDIR": str(scratch)}
    run = subprocess.run(
        ["sh", str(script)], capture_output=True, text=True, check=False, timeout=60, env=env
    )
    assert run.returncode == 0 and run.stdout.split() == ["n", "1"], (
        run.stdout,
        run.stderr,
        script.read_text(),
    )
    assert list(scratch.iterdir()) == []  # the scratch WORKDIR it made is gone
    failing = script.read_text().replace("w.py", "missing.py")
    script.write_text(failing)
    run = subprocess.run(
        ["sh", str(script)], capture_output=True, text=True, check=False, timeout=60, env=env
    )
    assert run.returncode != 0 and list(scratch.iterdir()) == []  # its exit status, and still no leftovers


def test_a_bundle_that_links_out_or_holds_special_files_is_refused(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree(out / "changes", outside)
    shutil.rmtree(out / "changes")
    (out / "changes").symlink_to(outside)  # the same bytes, through a link
    with pytest.raises(BundleError, match=r"changes: a link where the bundle held a folder"):
        check_manifest(out)
    (out / "changes").unlink()
    shutil.copytree(outside, out / "changes")
    check_manifest(out)
    os.mkfifo(out / "scripts" / "extra.fifo")
    with pytest.raises(BundleError, match=r"extra\.fifo: not in MANIFEST"):
        check_manifest(out)
    (out / "scripts" / "extra.fifo").unlink()
    (out / "verify").symlink_to(tmp_path)
    with pytest.raises(BundleError, match=r"verify: not a folder of the bundle"):
        verify(
            out,
            rounds=4,
            measurer=ScriptedMeasurer([Arm({}, steady(0.16)), Arm({"WORKERS": 4}, steady(0.041))]),
        )
    (out / "verify").unlink()
    manifest = (out / "MANIFEST.sha256").read_text()
    (out / "MANIFEST.sha256").write_text(manifest + f"{'0' * 64}  ../../etc/passwd\n")
    with pytest.raises(BundleError, match="not a manifest line"):
        check_manifest(out)


def test_verify_here_runs_a_batch_schedulers_bundle_on_this_machine(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    spec = (out / "spec.toml").read_text()
    assert '[launcher]\nkind = "local"' in spec
    (out / "spec.toml").write_text(spec.replace('[launcher]\nkind = "local"', '[launcher]\nkind = "slurm"'))
    from dftune.tools.bundle import write_manifest

    write_manifest(out)
    script = ScriptedMeasurer([Arm({}, steady(0.16)), Arm({"WORKERS": 4}, steady(0.041))])
    held = verify(out, rounds=4, measurer=script, local=True)
    assert held.verdict == "holds" and {inv.spec.launcher.kind for inv in script.starts} == {"local"}, held


@pytest.mark.parametrize("phase", ["program", "setup"])
def test_a_signal_to_the_script_reaches_the_program_and_the_scratch_folder_goes(
    tmp_path: Path, phase: str
) -> None:
    """scancel or a time limit signals the batch script's shell: the program ends with it, the
    scratch folder it made is removed, and the exit status says which signal (128 + 15)."""
    import signal
    import time

    (tmp_path / "w.py").write_text("import os, sys, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n")
    spec_file = tmp_path / "w.toml"
    text = 'name = "w"\ncommand = ["{python}", "w.py", "{workdir}"]\ndata_dir = "{workdir}/data"\n'
    if phase == "setup":  # the spec's setup is what runs when the signal comes
        text += 'setup = ["{python}", "w.py", "{data_dir}"]\n'
    spec_file.write_text(text)
    script, scratch = _tuned_script(tmp_path, spec_file)
    sh = subprocess.Popen(
        ["sh", str(script)], stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(scratch)}
    )
    assert sh.stdout is not None
    program = int(sh.stdout.readline())
    sh.send_signal(signal.SIGTERM)  # the shell alone, as kill PID does
    assert sh.wait(timeout=30) == 128 + signal.SIGTERM
    for _ in range(50):
        try:
            os.kill(program, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(program, signal.SIGKILL)
        raise AssertionError("the program outlived its script")
    assert list(scratch.iterdir()) == []


def _tuned_script(tmp_path: Path, spec_file: Path) -> tuple[Path, Path]:
    """The tuned arm's script of ``spec_file`` in a bare bundle, and an empty TMPDIR for it."""
    from dftune.tools.bundle.model import Arm as BundleArm
    from dftune.tools.bundle.scripts import arm_script
    from dftune.tools.runner.spec import load_spec

    bundle = tmp_path / "b"
    (bundle / "scripts").mkdir(parents=True)
    (bundle / "changes").mkdir()
    script = bundle / "scripts" / "tuned.sh"
    script.write_text(arm_script(load_spec(spec_file), BundleArm(), "tuned", bundle))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    return script, scratch
