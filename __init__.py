"""dftune: autonomous, auditable I/O tuning for workloads traced with dftracer."""

__version__ = "0.1.0"
