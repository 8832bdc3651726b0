"""One traced replicate of a test workload, as the measuring guards see an arm."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.guards import Arm
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec
from dftune.tools.trace import analyze


def traced_arm(spec_path: Path, tmp: Path, **settings: str) -> Arm:
    """Run the workload of ``spec_path`` once under dftracer with ``settings`` and analyze its trace."""
    spec = load_spec(spec_path)
    workdir = tmp / "_".join([spec_path.parent.name, *(f"{k}{v}" for k, v in settings.items())])
    result = bench(spec, overrides=settings, replicates=1, trace=True, workdir=workdir)
    ok = [r for r in result.replicates if r.status == "ok" and r.trace_dir]
    assert ok, result.replicates
    data = spec.placeholder_values(result.settings, workdir=workdir)["data_dir"]
    analysis = analyze([ok[0].trace_dir], profile=True, exclude_helpers=True)  # type: ignore[list-item]
    return Arm(analysis=analysis, data_dir=str(data), label=str(settings or "incumbent"))
