"""Calendar days, one home: every day of an inclusive window, and days collapsed into ranges."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

ONE_DAY = dt.timedelta(days=1)


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every day from first to last, both included, oldest first ([] when last < first)."""
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def day_ranges(days: Iterable[dt.date]) -> list[tuple[dt.date, dt.date]]:
    """Days collapsed into (first, last) runs of consecutive days, oldest first; a day given
    twice counts once."""
    ranges: list[tuple[dt.date, dt.date]] = []
    for day in sorted(set(days)):
        if ranges and ranges[-1][1] + ONE_DAY == day:
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges
