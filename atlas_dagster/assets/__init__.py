"""Dagster assets: raw tables fed through the inbound Null tables, gold, the client report."""
