"""Run workloads: spec, launchers, replicates, statistics, changes."""
