"""Candidate strategies per bottleneck: gated by layer (I/O shape) and filesystem, cited first."""

from __future__ import annotations

from dftune.tools.diagnose import engine


def ids(category: str, fs_type: str, layers: list[str]) -> list[str]:
    return [c.id for c in engine._candidates(category, fs_type, layers)]


def test_op_count_bound_offers_only_application_level_fixes() -> None:
    assert ids("metadata", "lustre", ["L1"])
    assert all(i.startswith("l1.") for i in ids("metadata", "lustre", ["L1"]))


def test_filesystem_gating() -> None:
    everything = ["L1", "L2", "L3"]
    assert "l3.lustre_stripe" in ids("read-time", "lustre", everything)
    for fs in ("nfs", "ext4", "xfs", "vast", "unknown"):
        assert "l3.lustre_stripe" not in ids("read-time", fs, everything), fs


def test_cited_candidates_come_first_and_forbidden_never_appear() -> None:
    cands = engine._candidates("read-time", "lustre", ["L1", "L2", "L3"])
    flags = [c.cited for c in cands]
    assert flags == sorted(flags, reverse=True)
    from dftune.tools.catalog import default_catalog

    cat = default_catalog()
    for category in ("read-time", "write-time", "small-io", "metadata", "sequentiality", "fetch-pressure"):
        for c in engine._candidates(category, "lustre", ["L1", "L2", "L3"]):
            assert not cat.strategies[c.id].forbidden, c.id
