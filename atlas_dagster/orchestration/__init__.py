"""Orchestration beyond single assets: declarative automation of gold after raw."""
