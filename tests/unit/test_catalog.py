"""The strategy, citation and checklist catalogs (resources/) load, validate and gate by FS type."""

from __future__ import annotations

import itertools
import shutil
from importlib.resources import files
from pathlib import Path

import pytest
from pydantic import BaseModel

from dftune.core.vocabulary import CATEGORIES, CHECKLIST, FS_TYPES, LAYERS
from dftune.tools import catalog as catalog_pkg
from dftune.tools.catalog import (
    Apply,
    CatalogCitation,
    CatalogError,
    ChecklistCategory,
    Claim,
    Parameter,
    Rollback,
    Strategy,
    default_catalog,
    load_catalog,
    load_checklist,
    load_citations,
    load_strategies,
    strategies_for,
    validate_references,
)

REQUIRED_IDS = [
    "l1.write_buffering",
    "l1.read_buffering",
    "l1.prefetch_fadvise",
    "l1.async_io",
    "l1.stat_cache",
    "l1.open_once",
    "l1.dataloader_workers",
    "l1.dataloader_prefetch",
    "l1.persistent_workers",
    "l1.async_checkpoint",
    "l2.romio_cb",
    "l2.romio_ds",
    "l2.hdf5_chunk_cache",
    "l2.hdf5_alignment",
    "l2.hdf5_coll_metadata",
    "l2.malloc_arena",
    "l2.omp_threads",
    "l3.lustre_stripe",
    "l3.readahead",
    "l3.vm_dirty",
    "l3.io_scheduler",
    "l3.numa_bind",
    "l3.stage_shm",
]

# The names of the 12 checklist categories.
ISSUE_CHECKLIST = {
    1: "buffering/coalescing",
    2: "caching",
    3: "prefetching/readahead",
    4: "asynchronous I/O and checkpointing",
    5: "metadata reduction",
    6: "data loader parallelism",
    7: "collective I/O and aggregation",
    8: "data sieving and MPI-IO hints",
    9: "I/O library layout",
    10: "filesystem layout",
    11: "OS and kernel",
    12: "staging to faster tiers",
}
PRIVILEGES = ("no-sudo", "sudo", "admin-only")
RESOURCES = Path(str(files("dftune.resources")))


@pytest.fixture(scope="module")
def cat() -> catalog_pkg.Catalog:
    return default_catalog()


@pytest.fixture
def strategies_copy(tmp_path: Path) -> Path:
    """A writable copy of the shipped strategy files."""
    dest = tmp_path / "strategies"
    shutil.copytree(RESOURCES / "strategies", dest)
    return dest


# ------------------------------------------------------------------ shipped data


def test_required_strategy_ids_exist(cat: catalog_pkg.Catalog) -> None:
    missing = [i for i in REQUIRED_IDS if i not in cat.strategies]
    assert not missing
    assert all(not cat.strategies[i].forbidden for i in REQUIRED_IDS)


def test_strategies_use_the_fixed_vocabularies(cat: catalog_pkg.Catalog) -> None:
    for s in cat.strategies.values():
        assert s.layer in LAYERS, s.id
        assert s.id.startswith(s.layer.lower() + "."), s.id
        assert set(s.bottlenecks) <= set(CATEGORIES), s.id
        assert set(s.valid_fs) <= {*FS_TYPES, "any"}, s.id
        assert set(s.harmful_on) <= set(FS_TYPES), s.id
        assert s.privilege in PRIVILEGES, s.id
        assert 1 <= s.checklist <= 12, s.id
        assert s.source and s.description, s.id


def test_every_referenced_citation_exists_and_carries_a_claim(cat: catalog_pkg.Catalog) -> None:
    assert validate_references(cat.strategies, cat.citations) == []
    for s in cat.strategies.values():
        for cid in s.citations:
            assert cid in cat.citations, (s.id, cid)
            assert cat.citations[cid].claims_for(s.id), (s.id, cid)


def test_non_forbidden_strategies_are_cited_or_explicitly_unsupported(cat: catalog_pkg.Catalog) -> None:
    for s in cat.strategies.values():
        if s.forbidden:
            continue
        assert s.citations or s.unsupported_reason, s.id
        if s.citations:
            # A cited strategy must have at least one claim checked against its source.
            assert cat.is_supported(s.id), s.id


def test_l2_and_l3_strategies_have_a_rollback(cat: catalog_pkg.Catalog) -> None:
    for s in cat.strategies.values():
        if s.layer in ("L2", "L3") and not s.forbidden:
            assert s.rollback is not None, s.id
            assert s.rollback.description, s.id
            if s.rollback.kind == "command":
                assert s.rollback.command, s.id


def test_forbidden_entries_cover_the_seed_rules(cat: catalog_pkg.Catalog) -> None:
    forbidden = {s.id for s in cat.strategies.values() if s.forbidden}
    for required in (
        "l1.fewer_checkpoints",
        "l1.read_less_data",
        "l1.fewer_epochs",
        "l1.access_pattern_flip",
        "l1.transfer_size_sweep",
    ):
        assert required in forbidden
    for sid in forbidden:
        s = cat.strategies[sid]
        assert s.forbidden_reason and s.apply is None and not s.citations


def test_forbidden_strategies_are_never_offered(cat: catalog_pkg.Catalog) -> None:
    for category, fs in itertools.product(CATEGORIES, FS_TYPES):
        for s in strategies_for(category, fs):
            assert not s.forbidden
            assert category in s.bottlenecks
            assert s.valid_on(fs)


def test_fs_gating(cat: catalog_pkg.Catalog) -> None:
    def offered(category: str, fs: str) -> set[str]:
        return {s.id for s in strategies_for(category, fs)}

    assert "l3.lustre_stripe" in offered("shared-file", "lustre")
    for fs in ("nfs", "xfs", "ext4", "vast", "gpfs", "local", "unknown"):
        assert "l3.lustre_stripe" not in offered("shared-file", fs)
    # Admin-only NFS/GPFS/BeeGFS tuning: manual recommendations, never on lustre, vast or local.
    assert "l3.nfs_mount_tuning" in offered("read-time", "nfs")
    for sid in ("l3.nfs_mount_tuning", "l3.gpfs_pagepool", "l3.beegfs_worker_threads"):
        s = cat.strategies[sid]
        assert s.privilege == "admin-only" and s.apply is not None and s.apply.kind == "manual"
        for fs in ("lustre", "vast", "local", "xfs", "ext4", "tmpfs", "unknown"):
            assert not s.valid_on(fs), (sid, fs)
            for category in s.bottlenecks:
                assert sid not in offered(category, fs)
    # romio_ds_write=disable hurts on VAST.
    assert "l2.romio_ds_write_disable" in offered("write-time", "lustre")
    assert "l2.romio_ds_write_disable" not in offered("write-time", "vast")
    # Block-device readahead applies to local block devices only.
    assert "l3.readahead" in offered("read-time", "xfs")
    assert "l3.readahead" not in offered("read-time", "lustre")
    # On an unknown filesystem only FS-agnostic strategies remain.
    for category in CATEGORIES:
        for s in strategies_for(category, "unknown"):
            assert s.valid_fs == ["any"], s.id


def test_admin_only_strategies_are_manual(cat: catalog_pkg.Catalog) -> None:
    for s in cat.strategies.values():
        if s.privilege == "admin-only" and not s.forbidden:
            assert s.apply is not None and s.apply.kind == "manual", s.id


def test_supported_only_filters_unverified(cat: catalog_pkg.Catalog) -> None:
    for category, fs in itertools.product(CATEGORIES, ("lustre", "nfs", "xfs")):
        for s in strategies_for(category, fs, supported_only=True):
            assert cat.is_supported(s.id)
    assert "l1.mmap_random" in {s.id for s in strategies_for("sequentiality", "xfs")}
    assert "l1.mmap_random" not in {s.id for s in strategies_for("sequentiality", "xfs", supported_only=True)}


def test_strategies_for_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="category"):
        strategies_for("slow-io", "lustre")
    with pytest.raises(ValueError, match="filesystem"):
        strategies_for("small-io", "zfs")


def test_checklist_has_the_twelve_issue_categories(cat: catalog_pkg.Catalog) -> None:
    assert sorted(cat.checklist) == list(range(1, 13))
    for n, c in cat.checklist.items():
        assert c.number == n
        assert c.name == ISSUE_CHECKLIST[n] == CHECKLIST[n]
        assert c.covers and c.examples and c.bottlenecks
        assert set(c.bottlenecks) <= set(CATEGORIES)
    # Every checklist category has at least one catalog entry behind it.
    for n in range(1, 13):
        assert any(s.checklist == n for s in cat.strategies.values()), n


def test_citations_have_full_metadata(cat: catalog_pkg.Catalog) -> None:
    for c in cat.citations.values():
        assert c.authors and all(a.strip() for a in c.authors), c.id
        assert c.title and c.venue, c.id
        assert 1950 <= c.year <= 2100, c.id
        assert c.doi or c.url, c.id
        for claim in c.claims:
            assert claim.claim, c.id
            if claim.verified:
                assert claim.evidence, (c.id, claim)
            else:
                assert claim.note, (c.id, claim)


def test_seed_citations_are_present_with_known_metadata(cat: catalog_pkg.Catalog) -> None:
    wisio = cat.citations["wisio_ics2025"]
    assert wisio.year == 2025 and "Supercomputing" in wisio.venue
    drishti = cat.citations["drishti_pdsw2022"]
    assert drishti.doi == "10.1109/PDSW56643.2022.00006" and "PDSW" in drishti.venue
    mohan = cat.citations["mohan_datastalls_vldb2021"]
    assert mohan.arxiv == "2007.06775" and mohan.url == "https://arxiv.org/abs/2007.06775"
    assert "FAST" in cat.citations["checkfreq_fast2021"].venue
    assert "NSDI" in cat.citations["checknrun_nsdi2022"].venue
    assert "memory-pinning" in (cat.citations["pytorch_data_docs"].url or "")
    thakur = cat.citations["thakur_romio_frontiers1999"]
    assert thakur.year == 1999 and thakur.title == "Data Sieving and Collective I/O in ROMIO"


def test_seed_misattributions_are_not_carried_over(cat: catalog_pkg.Catalog) -> None:
    # WisIO defines neither fetch pressure nor stragglers: no verified WisIO claim backs a fix.
    wisio = cat.citations["wisio_ics2025"]
    assert not [c for c in wisio.claims if c.strategy and c.verified]
    assert any("fetch pressure" in n for n in wisio.notes)
    # Drishti does not propose blockdev readahead.
    assert "drishti_pdsw2022" not in cat.strategies["l3.readahead"].citations
    assert not cat.citations["drishti_pdsw2022"].claims_for("l3.readahead")


def test_all_models_forbid_unknown_keys() -> None:
    models: list[type[BaseModel]] = [
        Strategy,
        CatalogCitation,
        Claim,
        ChecklistCategory,
        Parameter,
        Apply,
        Rollback,
    ]
    for model in models:
        assert model.model_config.get("extra") == "forbid", model.__name__


def test_package_exports() -> None:
    for name in (
        "load_strategies",
        "load_citations",
        "load_checklist",
        "strategies_for",
        "Strategy",
        "CatalogCitation",
    ):
        assert hasattr(catalog_pkg, name)


# ------------------------------------------------------------------ loaders on bad data


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('[[strategy]]\nid = "l1.x\n')
    with pytest.raises(CatalogError, match=r"broken\.toml") as err:
        load_strategies(bad)
    assert "invalid TOML" in str(err.value)
    with pytest.raises(CatalogError, match=r"broken\.toml"):
        load_strategies(tmp_path)  # directory form
    with pytest.raises(CatalogError, match=r"broken\.toml"):
        load_citations(bad)
    with pytest.raises(CatalogError, match=r"broken\.toml"):
        load_checklist(bad)


def test_invalid_entry_names_file_and_entry(strategies_copy: Path) -> None:
    f = strategies_copy / "l3.toml"
    text = f.read_text()
    f.write_text(text.replace('id = "l3.readahead"\n', 'id = "l3.readahead"\nchecklist_typo = 3\n', 1))
    with pytest.raises(CatalogError) as err:
        load_strategies(strategies_copy)
    msg = str(err.value)
    assert "l3.toml" in msg and "l3.readahead" in msg and "checklist_typo" in msg


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ('bottlenecks = ["read-time", "sequentiality"]', 'bottlenecks = ["slow-reads"]', "bottlenecks"),
        ('valid_fs = ["xfs", "ext4", "local"]', 'valid_fs = ["zfs"]', "valid_fs"),
        ('privilege = "sudo"', 'privilege = "root"', "privilege"),
        (
            'checklist = 11\nbottlenecks = ["read-time", "sequentiality"]',
            'checklist = 13\nbottlenecks = ["read-time", "sequentiality"]',
            "checklist",
        ),
        ('"/dev/{dev}"]\n\n[strategy.rollback]', '"/dev/{devv}"]\n\n[strategy.rollback]', "devv"),
    ],
)
def test_vocabulary_violations_are_rejected(strategies_copy: Path, old: str, new: str, expect: str) -> None:
    f = strategies_copy / "l3.toml"
    text = f.read_text()
    start = text.index('id = "l3.readahead"\n')
    end = text.index("[[strategy]]", start)
    block = text[start:end]
    assert old in block, old
    f.write_text(text[:start] + block.replace(old, new, 1) + text[end:])
    with pytest.raises(CatalogError, match=expect) as err:
        load_strategies(strategies_copy)
    assert "l3.toml" in str(err.value) and "l3.readahead" in str(err.value)


def test_l3_without_rollback_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "one.toml"
    f.write_text(
        """
[[strategy]]
id = "l3.example"
name = "x"
layer = "L3"
checklist = 11
bottlenecks = ["read-time"]
valid_fs = ["xfs"]
privilege = "sudo"
description = "x"
source = "test"
citations = []
unsupported_reason = "test"

[strategy.apply]
kind = "command"
command = ["true"]
"""
    )
    with pytest.raises(CatalogError, match=r"one\.toml.*l3\.example.*rollback"):
        load_strategies(f)


def test_forbidden_needs_a_reason_and_no_apply(tmp_path: Path) -> None:
    f = tmp_path / "f.toml"
    f.write_text(
        """
[[strategy]]
id = "l1.skip_work"
name = "x"
layer = "L1"
checklist = 1
valid_fs = ["any"]
privilege = "no-sudo"
forbidden = true
description = "x"
source = "test"
"""
    )
    with pytest.raises(CatalogError, match="forbidden_reason"):
        load_strategies(f)


def test_duplicate_ids_across_files_are_rejected(strategies_copy: Path) -> None:
    shutil.copy(strategies_copy / "l1.toml", strategies_copy / "zz_copy.toml")
    with pytest.raises(CatalogError, match=r"zz_copy\.toml.*duplicate id.*l1\.toml"):
        load_strategies(strategies_copy)


def test_unknown_citation_reference_is_reported(strategies_copy: Path) -> None:
    f = strategies_copy / "l1.toml"
    f.write_text(
        f.read_text().replace('citations = ["linux_posix_fadvise_man"]', 'citations = ["no_such_paper"]', 1)
    )
    with pytest.raises(CatalogError, match="no_such_paper"):
        load_catalog(strategies=strategies_copy)


def test_citation_without_doi_or_url_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        """
[[citation]]
id = "nowhere"
kind = "paper"
authors = ["A. Author"]
title = "T"
venue = "V"
year = 2020
"""
    )
    with pytest.raises(CatalogError, match=r"c\.toml.*nowhere.*doi or a url"):
        load_citations(f)


def test_verified_claim_needs_evidence(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        """
[[citation]]
id = "p"
kind = "paper"
authors = ["A. Author"]
title = "T"
venue = "V"
year = 2020
url = "https://example.org/p"

[[citation.claims]]
strategy = "l1.read_buffering"
claim = "c"
verified = true
"""
    )
    with pytest.raises(CatalogError, match="evidence"):
        load_citations(f)


def test_checklist_must_have_all_twelve(tmp_path: Path) -> None:
    src = (RESOURCES / "checklist" / "checklist.toml").read_text()
    cut = src[: src.index("[[category]]\nnumber = 12")]
    f = tmp_path / "checklist.toml"
    f.write_text(cut)
    with pytest.raises(CatalogError, match=r"checklist\.toml.*missing.*12"):
        load_checklist(f)
    f.write_text(src.replace('name = "caching"', 'name = "cache"'))
    with pytest.raises(CatalogError, match=r"checklist\.toml.*caching"):
        load_checklist(f)


def test_missing_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no such file"):
        load_strategies(tmp_path / "absent")
    with pytest.raises(CatalogError, match=r"no \.toml files"):
        load_citations(tmp_path)
