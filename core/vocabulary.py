"""The fixed vocabularies every later component shares (diagnosis, catalogs, guards, KB).

Changing a value here is a schema change: rules, strategies and knowledge-base records
refer to these strings.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

#: Bottleneck categories: what a performance engineer would name.
Category = Literal[
    "small-io",
    "sequentiality",
    "read-time",
    "write-time",
    "metadata",
    "fetch-pressure",
    "stragglers",
    "unoverlapped-io",
    "imbalance",
    "shared-file",
    "interface",
]
CATEGORIES: Final = get_args(Category)

#: Filesystem types dftune distinguishes (``fs.detect`` maps kernel types onto these).
FsType = Literal[
    "lustre", "gpfs", "beegfs", "nfs", "vast", "xfs", "ext4", "local", "tmpfs", "overlay", "unknown"
]
FS_TYPES: Final = get_args(FsType)

#: Optimization layers (dftracer-io-optimization skill): who inherits a finding.
Layer = Literal["L1", "L2", "L3"]
LAYERS: Final = get_args(Layer)

#: Metric to optimize (dftracer-io-optimization skill's table).
Metric = Literal["time", "bandwidth", "iops", "metadata_ops"]
METRICS: Final = get_args(Metric)

#: The 12-category checklist, by number (the dftracer-io-optimization skill's list
#: lost their names; these are the categories its strategy sections describe).
CHECKLIST: Final = {
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
#: Verdicts every checklist entry gets in every optimization loop.
VERDICTS: Final = ("applied_measured", "applicable_not_measured", "not_applicable")
Privilege = Literal["no-sudo", "sudo", "admin-only"]
#: A strategy's id: its layer, then a name (``l2.romio_cb``).
STRATEGY_ID = r"^l[123]\.[a-z0-9_]+$"
