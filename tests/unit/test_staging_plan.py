"""Staging as a proposal: rendered from the catalog, offered only where it applies, approved like
a change that leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

from dftune.agents.optimizer.plan import LOCAL_DIR_KEY, catalog_proposal, staging_fit, staging_proposals
from dftune.agents.policy import approval_rule
from dftune.core.domain.measurements import StagePlan
from dftune.tools.catalog import default_catalog
from tests.cli_inproc import dftune

CAT = default_catalog()
CONTEXT = {"data_dir": "/scratch/u/data", "workdir": "/tmp/w"}


def test_stage_shm_renders_a_stage_change_onto_dev_shm() -> None:
    p = catalog_proposal(CAT.strategies["l3.stage_shm"], CONTEXT)
    assert p.status == "proposed" and p.layer == "L3" and p.privilege == "no-sudo"
    assert p.change.kind == "stage" and p.change.stage == StagePlan(tier="shm", root="/dev/shm")


def test_a_local_tier_needs_the_specs_local_dir() -> None:
    s = CAT.strategies["l3.relocate_from_nfs"]
    manual = catalog_proposal(s, CONTEXT)
    assert manual.status == "manual" and "[staging] local_dir" in manual.reason
    local = catalog_proposal(s, {**CONTEXT, LOCAL_DIR_KEY: "/local/scratch"})
    assert local.change.stage == StagePlan(tier="local", root="/local/scratch")


def test_staging_strategies_are_offered_by_filesystem() -> None:
    on_nfs = {p.strategy for p in staging_proposals(CAT, CONTEXT, "nfs")}
    on_xfs = {p.strategy for p in staging_proposals(CAT, CONTEXT, "xfs")}
    assert on_nfs == {"l3.stage_shm", "l3.relocate_from_nfs"}
    assert on_xfs == {"l3.stage_shm"}


def test_without_a_traced_baseline_staging_is_not_offered() -> None:
    (p,) = staging_fit([catalog_proposal(CAT.strategies["l3.stage_shm"], CONTEXT)], "/scratch/u/data", None)
    assert p.status == "not_applicable" and "read-mostly" in p.reason


def test_an_autonomous_run_measures_staging_and_an_interactive_one_asks() -> None:
    p = catalog_proposal(CAT.strategies["l3.stage_shm"], CONTEXT)
    assert approval_rule(p, "autonomous") == "approve"
    assert approval_rule(p, "interactive") == "ask"


def test_a_program_on_batch_nodes_is_not_offered_staging() -> None:
    p = catalog_proposal(CAT.strategies["l3.stage_shm"], CONTEXT)
    (q,) = staging_fit([p], "/scratch/u/data", None, "slurm")
    assert q.status == "not_applicable" and "through slurm on other nodes" in q.reason


def test_bench_stage_local_without_a_local_dir_is_one_line_naming_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "w.toml"
    spec.write_text('name = "w"\ncommand = ["true"]\n')
    done = dftune("bench", str(spec), "--stage", "local", "--no-trace")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"dftune: error: {spec}: staging to a local folder needs [staging] local_dir in the workload spec"
    ]
    odd = dftune("bench", str(spec), "--stage", "nvme", "--no-trace")
    assert "unknown staging tier 'nvme' (shm | local)" in odd.stderr
