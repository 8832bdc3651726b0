"""The bundle of the demo's workload, carried away: written by `dftune bundle`, copied to a new
place, verified there under a DFTUNE_HOME that knows nothing of the run (the gain holds within
the original's interval), and refused, naming the file, once a byte of a kept file changed.

The MPI-IO run whose kept change is a ROMIO hint file (tests/e2e/test_hint_pair_kept.py) and the
run whose kept change is a drafted source patch (tests/e2e/test_model_actions_run.py) check their
bundles the same way at their ends.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.e2e.main_job import SMALL_READS_GROUP, FinishedRun, dftune_cli

pytestmark = pytest.mark.e2e


def carried_and_verified(bundle: Path, elsewhere: Path, *, rounds: int = 5) -> dict[str, object]:
    """Copy ``bundle`` to ``elsewhere``, check that nothing in it names the run's home, verify the
    copy under a fresh DFTUNE_HOME and return the verification (shared by the e2e bundle checks)."""
    shutil.copytree(bundle, elsewhere)
    home = str(bundle.parents[2])  # <home>/runs/<id>/bundle
    for f in elsewhere.rglob("*"):
        if f.is_file() and f.suffix in (".sh", ".env", ".json", ".toml", ".patch", ".txt", ".sbatch"):
            assert home not in f.read_text(errors="replace"), f"{f} names the run's home {home}"
    fresh = elsewhere.parent / "fresh-home"
    res = dftune_cli("verify", str(elsewhere), "--rounds", str(rounds), "--json", home=fresh, timeout=900)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    return json.loads(res.stdout)


@pytest.mark.xdist_group(SMALL_READS_GROUP)
def test_the_demo_runs_bundle_verifies_from_a_copy_and_refuses_a_changed_byte(
    tmp_path: Path, small_reads_main_job: FinishedRun
) -> None:
    run = small_reads_main_job
    doc = run.doc
    assert doc["bundle"] and Path(doc["bundle"]).is_dir(), doc
    # the run checked its own bundle from a copy at its end (untraced, so its gain may differ from
    # the run's traced one), and the morning view says so
    assert doc["bundle_check"] and not doc["bundle_check"].startswith("gone"), doc
    out = tmp_path / "written"
    res = dftune_cli("bundle", doc["run_id"], "--out", str(out), "--json", home=run.home)
    assert res.returncode == 0, res.stderr[-2000:]
    readme = (out / "README.md").read_text()
    assert "## How to apply it" in readme and "scripts/tuned.sh" in readme
    verified = carried_and_verified(out, tmp_path / "elsewhere" / "bundle")
    assert (verified["verdict"], verified["reference"]) == ("holds", "check"), verified
    assert verified["pairs"] >= 4 and list((tmp_path / "elsewhere" / "bundle" / "verify").glob("*.json"))

    tuned = tmp_path / "elsewhere" / "bundle" / "scripts" / "tuned.sh"
    tuned.write_bytes(tuned.read_bytes().replace(b"set -e", b"set -u", 1))
    res = dftune_cli("verify", str(tmp_path / "elsewhere" / "bundle"), home=tmp_path / "fresh-home")
    assert res.returncode == 2 and "tuned.sh: differs from MANIFEST.sha256" in res.stderr, res.stderr
