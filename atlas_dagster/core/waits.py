"""Bounded, visible waits: each names what it waits for and on whom, and gives up at its bound.

Every wait of the project (the embedded engine's lock, an INSERT's pool slot, a server-mode day
exclusion) reports to the log the operator looks at: the Dagster run log when a run waits (its
`context.log`), else the `atlas_dagster` Python logger, which the CLI prints to stderr. A first
line as soon as the wait starts, then one every REPORT_SECONDS, then how long it took.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

REPORT_SECONDS = 10.0
LOGGER = logging.getLogger("atlas_dagster.waits")


class WaitLog(Protocol):
    """A logging.Logger or Dagster's DagsterLogManager (context.log): both have these."""

    def info(self, msg: str) -> object: ...

    def warning(self, msg: str) -> object: ...


class WaitTimeout(TimeoutError):
    """A wait reached its bound; the message names what was waited for and who held it."""


class PoolLimitError(RuntimeError):
    """The pool cannot enforce the INSERT cap: missing instance support, or a limit above 4."""


class ClaimCanceled(RuntimeError):
    """The run was canceled while its INSERT waited for a slot."""


class BoundedWait:
    """One wait: call `still_waiting(holder)` on each poll, `done()` once the wait is over.

    `clock` (time.monotonic) is what elapsed time is read from; a test passes a fake one to
    drive a wait to its bound without spending it."""

    def __init__(
        self,
        what: str,
        limit_seconds: float,
        log: WaitLog | None = None,
        error: Callable[[str], Exception] = WaitTimeout,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.limit_seconds = limit_seconds
        self.log = log or LOGGER
        self.error = error
        self.clock = clock
        self.started = clock()
        self._reported_at: float | None = None
        self._holder = ""

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def remaining(self) -> float:
        """Seconds left before the bound (never negative): what one poll may still take."""
        return max(0.0, self.limit_seconds - self.elapsed)

    def still_waiting(self, holder: str) -> None:
        """Reports the wait (first call, then every REPORT_SECONDS); raises at the bound."""
        self._holder = holder
        elapsed = self.elapsed
        if elapsed > self.limit_seconds:
            raise self.error(
                f"gave up waiting for {self.what}, busy for {elapsed:.0f}s "
                f"(the bound is {self.limit_seconds:.0f}s): {holder}"
            )
        now = self.clock()
        if self._reported_at is None or now - self._reported_at >= REPORT_SECONDS:
            self._reported_at = now
            self.log.warning(
                f"waiting for {self.what}: {holder}; waited {elapsed:.0f}s of at most "
                f"{self.limit_seconds:.0f}s"
            )

    def done(self) -> None:
        if self._reported_at is not None:
            self.log.info(f"got {self.what} after waiting {self.elapsed:.1f}s")
