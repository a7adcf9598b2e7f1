"""The load's own failures, beneath both the load (day_load.py) and their classification
(faults.py), so that neither imports the other's module to name them."""

from __future__ import annotations


class PartitionOutOfScope(ValueError):
    """The partition is outside the tenant's window or domains: refused with no log row."""


class OutsideDomainWindow(PartitionOutOfScope):
    """The day is in the tenant's window but before or after the domain's own dates: the domain
    has no such day (a range over all domains skips it rather than fail it)."""


class LoadMismatchError(RuntimeError):
    """The raw table does not hold the export's distinct events after the INSERT."""


class LoadCanceled(RuntimeError):
    """The Dagster run was canceled while the day was loading; its partial rows were cleared."""
