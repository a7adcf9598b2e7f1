"""Loading a tenant-day outside a Dagster run, and a raw run's resources as the code location
wires them; for the suite and the benchmarks."""

from __future__ import annotations

import datetime as dt

from atlas_dagster.domains import Domain
from atlas_dagster.loading.day_load import DayLoad, insert_day, prepare_day
from atlas_dagster.resources.atlas_settings import RESOURCE_KEY, AtlasSettings
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant


def load_day(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domain: Domain,
    day: dt.date,
    run_id: str,
) -> DayLoad:
    """Validates, then loads one tenant-day; logs running → completed | failed and re-raises."""
    prepared = prepare_day(clickhouse, tenant, domain, day, run_id)
    return insert_day(clickhouse, prepared, run_id)


def run_resources(clickhouse: ClickHouseResource) -> dict[str, object]:
    """A raw run's resources as the code location wires them: ClickHouse, and the tunables
    from this process's environment (a test's monkeypatch.setenv included), as EnvVars."""
    return {"clickhouse": clickhouse, RESOURCE_KEY: AtlasSettings.wired()}
