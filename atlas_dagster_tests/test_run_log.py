"""A raw run's per-day log lines: every day named once, a tick's days sharing one event."""

from __future__ import annotations

from atlas_dagster.monitoring.run_log import MAX_DAYS_PER_LINE, DayLines


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)


def test_the_first_line_goes_out_at_once_and_later_days_share_one_line() -> None:
    log = _Log()
    lines = DayLines(log, every_seconds=3600)  # no tick is ever due again
    lines.started("t 2026-11-05|a.b (worker h:1:2)")
    assert log.lines == ["INSERT started: t 2026-11-05|a.b (worker h:1:2)"]
    lines.started("t 2026-11-04|a.b (worker h:1:2)")
    lines.started("t 2026-11-03|a.b (worker h:1:2)")
    lines.loaded("t 2026-11-05|a.b: 5 rows from 1 files, INSERT 0.01s")
    lines.loaded("t 2026-11-04|a.b: 6 rows from 1 files, INSERT 0.01s")
    lines.tick()
    assert len(log.lines) == 2  # the started line, then the first loaded line at once
    assert log.lines[1] == "loaded: t 2026-11-05|a.b: 5 rows from 1 files, INSERT 0.01s"
    lines.flush()
    assert log.lines[2:] == [
        "INSERT started: t 2026-11-04|a.b (worker h:1:2); t 2026-11-03|a.b (worker h:1:2)",
        "loaded: t 2026-11-04|a.b: 6 rows from 1 files, INSERT 0.01s",
    ]
    lines.flush()
    assert len(log.lines) == 4  # nothing pending: nothing written


def test_a_due_tick_writes_each_day_as_it_comes() -> None:
    log = _Log()
    lines = DayLines(log, every_seconds=0.0)  # every tick is due
    lines.started("d0")
    lines.started("d1")
    assert log.lines == ["INSERT started: d0", "INSERT started: d1"]


def test_a_full_line_goes_out_without_waiting_for_the_tick_and_every_day_is_named_once() -> None:
    log = _Log()
    lines = DayLines(log, every_seconds=3600)
    days = [f"d{i}" for i in range(2 * MAX_DAYS_PER_LINE + 4)]
    for day in days:
        lines.loaded(day)
    assert len(log.lines) == 3  # the first at once, then two full lines
    lines.flush()
    assert [line.count("; ") + 1 for line in log.lines] == [
        1,
        MAX_DAYS_PER_LINE,
        MAX_DAYS_PER_LINE,
        3,
    ]
    named = [item for line in log.lines for item in line.removeprefix("loaded: ").split("; ")]
    assert named == days
