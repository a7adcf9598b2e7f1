"""Tests for atlas-dagster, against the real embedded ClickHouse engine and a real Dagster instance."""
