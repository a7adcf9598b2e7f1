"""Gold through Dagster: one run per range, per tenant-day events, failures alone, verify alone."""

import datetime as dt

import pytest
from dagster import AssetKey, AssetSelection, Definitions, instance_for_test, materialize
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from atlas_dagster.assets import gold
from atlas_dagster.assets.gold import RECONCILES_RAW, VERIFY_JOB_NAME, gold_assets, verify_gold_job
from atlas_dagster.gold.replay import replay_day
from atlas_dagster.partitions import partitions_for
from testkit.gold_support import generated, load

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

DAYS = [dt.date(2026, 11, 4), dt.date(2026, 11, 5), dt.date(2026, 11, 6)]
GGR = AssetKey("gold_ggr_daily")


def _range_tags(tenant, first: dt.date, last: dt.date) -> dict[str, str]:
    return {
        "dagster/asset_partition_range_start": f"{first}|{tenant.key}",
        "dagster/asset_partition_range_end": f"{last}|{tenant.key}",
    }


def _events(result, event_type: str) -> list:
    return [e for e in result.all_events if e.event_type_value == event_type]


def _partition(event) -> str:
    data = event.event_specific_data
    return data.materialization.partition if hasattr(data, "materialization") else data.partition


def _loaded_tenant(clickhouse, make_tenant):
    tenant = make_tenant(("casino",))
    for day in DAYS:
        load(clickhouse, tenant, "casino", day, generated(tenant, "casino", day, 10))
    return tenant


def test_a_range_runs_once_newest_first_and_a_failed_day_fails_alone(
    clickhouse, make_tenant, monkeypatch
) -> None:
    tenant = _loaded_tenant(clickhouse, make_tenant)
    broken = DAYS[1]

    def replay_or_fail(client, table, tenant_, day, lookback_days):
        if day == broken:
            raise RuntimeError("simulated failure of one tenant-day")
        return replay_day(client, table, tenant_, day, lookback_days)

    monkeypatch.setattr(gold, "replay_day", replay_or_fail)
    partitions_def = partitions_for([tenant])
    assets = gold_assets([tenant], partitions_def, lookback_days=3, embedded=True)
    with instance_for_test() as instance:
        result = materialize(
            assets,
            selection=AssetSelection.assets(GGR) | AssetSelection.checks_for_assets(GGR),
            instance=instance,
            resources={"clickhouse": clickhouse},
            tags=_range_tags(tenant, DAYS[0], DAYS[-1]),
            raise_on_error=False,
        )
        assert not result.success
        [failure] = _events(result, "STEP_FAILURE")
        assert f"{broken}|{tenant.key}" in str(failure.event_specific_data.error)
        newest_first = [f"{DAYS[2]}|{tenant.key}", f"{DAYS[0]}|{tenant.key}"]
        assert [_partition(e) for e in _events(result, "ASSET_MATERIALIZATION")] == newest_first
        checks = _events(result, "ASSET_CHECK_EVALUATION")
        assert [_partition(e) for e in checks] == newest_first
        assert all(e.event_specific_data.passed for e in checks)
        assert instance.get_materialized_partitions(GGR) == set(newest_first)
        status = get_and_update_asset_status_cache_value(instance, GGR, partitions_def)
        failed = status.deserialize_failed_partition_subsets(partitions_def)
        assert set(failed.get_partition_keys()) == {f"{broken}|{tenant.key}"}
        [metadata] = [
            e.event_specific_data.materialization.metadata
            for e in _events(result, "ASSET_MATERIALIZATION")[:1]
        ]
        assert metadata["rows_written"].value > 0
        assert metadata["clickhouse_query_id"].value.startswith("atlas-gold-")
        assert {"total_turnover", "total_ggr", "duration_seconds"} <= set(metadata)


def test_verify_runs_the_checks_alone_and_catches_a_tampered_day(clickhouse, make_tenant) -> None:
    tenant = _loaded_tenant(clickhouse, make_tenant)
    partitions_def = partitions_for([tenant])
    defs = Definitions(
        assets=gold_assets([tenant], partitions_def, lookback_days=3, embedded=True),
        jobs=[verify_gold_job()],
        resources={"clickhouse": clickhouse},
    )
    verify = defs.resolve_job_def(VERIFY_JOB_NAME)
    tags = _range_tags(tenant, DAYS[0], DAYS[-1])
    with instance_for_test() as instance:
        replayed = materialize(
            defs.assets, instance=instance, resources={"clickhouse": clickhouse}, tags=tags
        )
        assert replayed.success
        materialized = len(_events(replayed, "ASSET_MATERIALIZATION"))

        checked = verify.execute_in_process(instance=instance, tags=tags)
        assert checked.success and not _events(checked, "ASSET_MATERIALIZATION")
        evaluations = _events(checked, "ASSET_CHECK_EVALUATION")
        # Only ggr and users are in scope for a casino-only tenant.
        assert materialized == len(evaluations) == 2 * len(DAYS)
        assert all(e.event_specific_data.passed for e in evaluations)

        with clickhouse.session() as client:  # someone edits gold by hand
            client.command(
                "INSERT INTO atlas.gold_ggr_daily (organization_id, brand_id, day, vertical, "
                "currency, bets, turnover, payouts, ggr, computed_at, is_deleted) VALUES "
                "({o:String}, {b:String}, {d:Date}, 'casino', 'XTS', 1, 10, 0, 10, now64(6), 0)",
                parameters={"o": tenant.organization_id, "b": tenant.brand_id, "d": DAYS[0]},
            )
        day_tags = _range_tags(tenant, DAYS[0], DAYS[0])
        checked = verify.execute_in_process(instance=instance, tags=day_tags)
        failed = [
            e.event_specific_data
            for e in _events(checked, "ASSET_CHECK_EVALUATION")
            if not e.event_specific_data.passed
        ]
        assert [(f.asset_key, f.check_name, f.partition) for f in failed] == [
            (GGR, RECONCILES_RAW, f"{DAYS[0]}|{tenant.key}")
        ]
        metadata = {k: v.value for k, v in failed[0].metadata.items()}
        assert metadata["mismatches"] == ["rows", "bets", "turnover", "ggr"]
        assert metadata["gold_bets"] == metadata["raw_bets"] + 1


def test_out_of_scope_partitions_are_skipped_not_failed(clickhouse, make_tenant) -> None:
    tenant = make_tenant(("casino",))
    liability = gold_assets([tenant], partitions_for([tenant]), lookback_days=3, embedded=True)[-1]
    assert liability.key == AssetKey("gold_sportsbook_liability_daily")
    with instance_for_test() as instance:
        result = materialize(
            [liability],
            instance=instance,
            resources={"clickhouse": clickhouse},
            partition_key=f"{DAYS[0]}|{tenant.key}",
        )
        assert result.success and not _events(result, "ASSET_MATERIALIZATION")
        assert not instance.get_materialized_partitions(liability.key)
