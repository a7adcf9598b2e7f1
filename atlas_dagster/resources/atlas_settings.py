"""The resource atlas_settings: a raw run's tunables (settings.LoadSettings) as Dagster shows them.

definitions.py wires it from the code location's environment (`AtlasSettings.wired`): a variable
that is set becomes an `EnvVar` (the UI shows its name, the run resolves it), an unset one keeps
its default. Dagster 1.13 resolves an EnvVar for a string or an integer field only (there is no
float source), so a float setting that is set is wired as the value settings.py parsed. A run
launched from the UI's launchpad may override any field in its run config; whatever the source,
`load_settings()` holds every value to the bounds of settings.py, naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from atlas_dagster.settings import (
    HEALTH_PROBE_SECONDS,
    HEALTH_QUERY_VARIABLE,
    HEALTH_THRESHOLD,
    LOAD_BOUNDS,
    PARALLEL_INSERTS,
    RAMP_UP_DAYS,
    RECOVERY_SECONDS,
    RETRY_ATTEMPTS,
    RETRY_BASE_SECONDS,
    RETRY_MAX_SECONDS,
    SLOT_WAIT_SECONDS,
    LoadSettings,
    is_set,
)

RESOURCE_KEY = "atlas_settings"


class AtlasSettings(ConfigurableResource):
    """A raw run's tunables; each field's description names its environment variable."""

    parallel_inserts: int = Field(
        default=PARALLEL_INSERTS.default,
        description=f"{PARALLEL_INSERTS.describe()}. Seeds the pool atlas_insert.",
    )
    ramp_up_days: int = Field(
        default=RAMP_UP_DAYS.default,
        description=f"{RAMP_UP_DAYS.describe()}. A tenant's newest days load one at a time.",
    )
    retry_attempts: int = Field(
        default=RETRY_ATTEMPTS.default,
        description=f"{RETRY_ATTEMPTS.describe()}, the first included (1 = no retry).",
    )
    retry_base_seconds: float = Field(
        default=RETRY_BASE_SECONDS.default,
        description=f"{RETRY_BASE_SECONDS.describe()}; it doubles per try, with jitter.",
    )
    retry_max_seconds: float = Field(
        default=RETRY_MAX_SECONDS.default, description=RETRY_MAX_SECONDS.describe()
    )
    recovery_seconds: float = Field(
        default=RECOVERY_SECONDS.default, description=RECOVERY_SECONDS.describe()
    )
    health_probe_seconds: float = Field(
        default=HEALTH_PROBE_SECONDS.default, description=HEALTH_PROBE_SECONDS.describe()
    )
    health_query: str = Field(
        default="",
        description=(
            f"{HEALTH_QUERY_VARIABLE} (default empty: not probed): SQL returning one number "
            "(e.g. ClickPipes lag); above health_threshold INSERTs step down to 1."
        ),
    )
    health_threshold: float = Field(
        default=HEALTH_THRESHOLD.default, description=HEALTH_THRESHOLD.describe()
    )
    slot_wait_seconds: int = Field(
        default=SLOT_WAIT_SECONDS.default, description=SLOT_WAIT_SECONDS.describe()
    )

    def load_settings(self) -> LoadSettings:
        """The fields as settings.LoadSettings, validated (SettingsError names the variable)."""
        return LoadSettings(**{name: getattr(self, name) for name in _FIELDS})

    @classmethod
    def wired(cls, environ: Mapping[str, str] = os.environ) -> AtlasSettings:
        """The resource as the code location (and `atlas-dagster load`) wires it: a variable set
        in `environ` as an EnvVar (a float one as its value), the others at their default.

        `environ` is validated first (LoadSettings.from_env), so a bad value is refused here
        with settings.py's message rather than when a run resolves the EnvVar."""
        parsed = LoadSettings.from_env(environ)
        config: dict[str, Any] = {}
        for name, bound in LOAD_BOUNDS.items():
            if is_set(environ, bound.variable):
                config[name] = (
                    EnvVar.int(bound.variable) if bound.kind is int else getattr(parsed, name)
                )
        if is_set(environ, HEALTH_QUERY_VARIABLE):
            config["health_query"] = EnvVar(HEALTH_QUERY_VARIABLE)
        return cls(**config)


# LoadSettings' fields, all of which the resource carries.
_FIELDS = (*LOAD_BOUNDS, "health_query")
