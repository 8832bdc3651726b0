"""Deterministic, LLM-free tools: trace analysis, diagnosis, runner, sessions, KB, reports."""
