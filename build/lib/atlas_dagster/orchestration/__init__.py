"""Orchestration: the INSERT pool, the in-run load scheduler, run priorities, gold automation."""
