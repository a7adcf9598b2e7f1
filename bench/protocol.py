"""How a benchmark compares the pipeline with the bare engine: repeated runs, alternating which
side goes first, a settle between runs, and the median of each side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# A single pair said little on this 2-core machine (2026-12-04, idle): the load ratio of one
# 1M-row day moved between 0.83 and 0.99 from one invocation to the next, and the small bench's
# bare run between 3.1 and 8.0 s.
DEFAULT_REPEAT = 3
# Bare runs right after a load took 6.1-6.4 s against 3.26 s for the invocation's first run. A
# sync and a pause are the cheap guess at letting one run's writes settle before the next; they
# did not remove the drift (365-day small bench: bare 19.08 s first, then 30.28 and 32.36 s),
# which is why every run is printed beside the medians.
DEFAULT_SETTLE_SECONDS = 5.0


def settle(seconds: float) -> None:
    """Flushes the previous run's writes and waits, so that no run pays for the one before it."""
    os.sync()
    time.sleep(seconds)


def sides_in_order(repeat: int, first: str, second: str) -> tuple[str, str]:
    """Even repeats run `first` first, odd ones `second`: neither side always follows the other."""
    return (first, second) if repeat % 2 == 0 else (second, first)


def phases_in_order(names: list[str] | set[str]) -> list[str]:
    """Phase names in the order a day's load runs them (core.phases.PHASES); unknown ones last."""
    from atlas_dagster.core.phases import PHASES

    known = [name for name, _ in PHASES if name in names]
    return known + [name for name in names if name not in known]


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose `key` is the median (the lower one of an even count)."""
    ordered = sorted(runs, key=lambda run: run[key])
    return ordered[(len(ordered) - 1) // 2]


def json_worker(
    module: str, args: list[str], cwd: Path, env: dict | None = None, timeout: float = 3600
) -> dict[str, Any]:
    """Runs `python -m <module> <args>` in its own process (a fresh engine and instance per
    side) and returns the JSON its last line of output prints; its stderr tail if it fails."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {args[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
