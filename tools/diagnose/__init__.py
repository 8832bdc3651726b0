"""Diagnosis: bottleneck rules as data, scoring, metric choice, FS detection."""
