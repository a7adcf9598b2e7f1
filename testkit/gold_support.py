"""Test helpers for gold: load raw days, read gold rows as Python values, materialize raw."""

from __future__ import annotations

import datetime as dt
import random

from dagster import AssetSelection, DagsterInstance, materialize

from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.partitions import partition_key, partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import Tenant
from testkit import gold_reference as reference
from testkit.load_support import load_day, run_resources

# The grouping columns of each gold table besides the tenant and the day.
GOLD_KEYS: dict[str, tuple[str, ...]] = {
    "gold_ggr_daily": ("vertical", "currency"),
    "gold_transactions_daily": ("currency",),
    "gold_users_daily": (),
    "gold_sportsbook_liability_daily": ("currency",),
}


def generated(tenant: Tenant, domain: str, day: dt.date, n: int = 40) -> list[dict]:
    generate, _ = GENERATORS[domain]
    return generate(random.Random(f"{tenant.key}-{domain}-{day}"), tenant, day, n)


def load(
    clickhouse: ClickHouseResource, tenant: Tenant, domain: str, day: dt.date, rows: list[dict]
) -> None:
    write_day(tenant, domain, day, rows)
    load_day(clickhouse, tenant, DOMAINS[domain], day, "gold-test")


def gold_rows(
    clickhouse: ClickHouseResource, table: str, tenant: Tenant, day: dt.date
) -> dict[tuple, dict]:
    """The tenant-day's rows as readers see them (FINAL), keyed by the grouping columns."""
    metrics = GOLD_TABLES[table].metrics
    with clickhouse.session() as client:
        result = client.query(
            f"SELECT * FROM atlas.{table} FINAL WHERE organization_id = {{o:String}} "
            "AND brand_id = {b:String} AND day = {d:Date}",
            parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": day},
        )
    rows = [dict(zip(result.column_names, r, strict=True)) for r in result.result_rows]
    return {tuple(r[k] for k in GOLD_KEYS[table]): {m: r[m] for m in metrics} for r in rows}


def materialize_raw(
    clickhouse: ClickHouseResource,
    tenants: list[Tenant],
    instance: DagsterInstance,
    tenant: Tenant,
    domain: str,
    day: dt.date,
    rows: list[dict] | None = None,
) -> None:
    """Writes the export and loads it through Dagster, so the instance records the partition."""
    write_day(tenant, domain, day, rows if rows is not None else generated(tenant, domain, day, 5))
    result = materialize(
        raw_assets(tenants, partitions_for(tenants)),
        selection=AssetSelection.assets(DOMAINS[domain].raw_table),
        partition_key=f"{day.isoformat()}|{tenant.key}",
        instance=instance,
        resources=run_resources(clickhouse),
    )
    assert result.success


def materialize_range(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    domains: list[str],
    instance: DagsterInstance,
    first: dt.date,
    last: dt.date,
):
    """One ranged run of the tenant's days of `domains`, as `atlas-dagster load` launches it."""
    return materialize(
        raw_assets([tenant], partitions_for([tenant])),
        selection=[DOMAINS[d].raw_table for d in domains],
        instance=instance,
        resources=run_resources(clickhouse),
        tags={
            "dagster/asset_partition_range_start": partition_key(first, tenant.key),
            "dagster/asset_partition_range_end": partition_key(last, tenant.key),
        },
        raise_on_error=False,
    )


def assert_gold_to_the_cent(
    clickhouse: ClickHouseResource,
    tenant: Tenant,
    days: list[dt.date],
    lookback_days: int,
    tables: tuple[str, ...] = tuple(GOLD_TABLES),
) -> None:
    """Each gold table's rows of the tenant's days equal gold_reference's pyarrow computation
    over the export's files, metric by metric (Decimals: to the cent)."""
    expected = {
        "gold_ggr_daily": lambda day: reference.ggr(tenant, day),
        "gold_transactions_daily": lambda day: reference.transactions(tenant, day),
        "gold_users_daily": lambda day: reference.users(tenant, day),
        "gold_sportsbook_liability_daily": lambda day: reference.liability(
            tenant, day, lookback_days
        ),
    }
    for day in days:
        for table in tables:
            assert gold_rows(clickhouse, table, tenant, day) == expected[table](day), (table, day)
