"""The load's own failures, beneath both the load (day_load.py) and their classification
(faults.py), so that neither imports the other's module to name them (a partition out of scope
is scope.py's)."""

from __future__ import annotations


class LoadMismatchError(RuntimeError):
    """The raw table does not hold the export's distinct events after the INSERT."""


class LoadCanceled(RuntimeError):
    """The Dagster run was canceled while the day was loading; its partial rows were cleared."""
