"""`dftune bundle` and `dftune verify`: the kept configuration as a folder that needs nothing from
DFTUNE_HOME, a manifest that refuses a changed byte naming the file, and a verification that
measures both arms again (scripted here; tests/e2e runs real programs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

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
