"""What a person takes away from a run: one folder with the kept configuration that re-runs and
re-verifies itself anywhere, needing nothing from DFTUNE_HOME (docs/bundle.md).

- :mod:`.write` lays it out (README.md, bundle.json, spec.toml with absolute paths, the kept
  changes as files, scripts/, the reports, provenance.json, MANIFEST.sha256);
- :mod:`.manifest` refuses a bundle a byte of which changed, naming the file;
- :mod:`.verify` measures the baseline and tuned arms again, paired and interleaved, and says
  whether the gain holds (appended as ``verify/<host>-<time>-<where>.json``);
- :mod:`.campaign` writes a campaign's bundle: one per workload and an index.
"""

from dftune.tools.bundle.manifest import check_manifest, write_manifest
from dftune.tools.bundle.model import Bundle, BundleError, Verification
from dftune.tools.bundle.verify import read_bundle, verifications, verify, verify_copy
from dftune.tools.bundle.write import export_bundle, run_bundle, write_bundle

__all__ = [
    "Bundle",
    "BundleError",
    "Verification",
    "check_manifest",
    "export_bundle",
    "read_bundle",
    "run_bundle",
    "verifications",
    "verify",
    "verify_copy",
    "write_bundle",
    "write_manifest",
]
