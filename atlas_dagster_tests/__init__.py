"""Tests for atlas-dagster against the real embedded ClickHouse and a real Dagster instance."""
