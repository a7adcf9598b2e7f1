"""The gold automation on a persistent instance, tick by tick, as raw lands through Dagster."""

import datetime as dt

import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DefaultSensorStatus,
    Definitions,
    IdentityPartitionMapping,
    build_sensor_context,
    evaluate_automation_conditions,
    instance_for_test,
)
from dagster._core.definitions.sensor_definition import SensorType

from atlas_dagster.assets.gold import RECONCILES_RAW, gold_assets
from atlas_dagster.assets.raw import raw_assets
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.orchestration.automation import GOLD_SENSOR_NAME, gold_automation_sensor
from atlas_dagster.partitions import partitions_for
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.settings import AUTOMATION_SECONDS, Settings, SettingsError
from atlas_dagster.tenants import Tenant
from testkit.gold_support import materialize_raw
from testkit.load_support import run_resources

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

LOOKBACK = 3


def day(n: int) -> dt.date:
    return dt.date(2026, 11, n)


def raw_and_gold(tenants: list[Tenant], embedded: bool = True) -> list:
    partitions_def = partitions_for(tenants)
    return [
        *raw_assets(tenants, partitions_def),
        *gold_assets(tenants, partitions_def, lookback_days=LOOKBACK, embedded=embedded),
    ]


class Sensor:
    """Evaluates the gold conditions like the automation sensor does, carrying its cursor."""

    def __init__(
        self,
        clickhouse: ClickHouseResource,
        tenants: list[Tenant],
        instance: DagsterInstance,
        embedded: bool = True,
    ) -> None:
        self.defs = Definitions(
            assets=raw_and_gold(tenants, embedded), resources=run_resources(clickhouse)
        )
        self.clickhouse, self.tenants, self.instance = clickhouse, tenants, instance
        self.cursor = None

    def tick(self) -> dict[str, set[str]]:
        """The gold partitions requested on this tick, by asset name (absent when none)."""
        result = evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        requested = {
            name: set(result.get_requested_partitions(AssetKey(name))) for name in GOLD_TABLES
        }
        return {name: keys for name, keys in requested.items() if keys}

    def land(self, tenant: Tenant, domain: str, on: dt.date) -> None:
        materialize_raw(self.clickhouse, self.tenants, self.instance, tenant, domain, on)


def test_historical_day_is_requested_once_when_its_raw_lands(clickhouse, make_tenant) -> None:
    full, casino_only = make_tenant(), make_tenant(("casino",))
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [full, casino_only], instance)
        # Landed before the sensor's first evaluation: still requested on that first tick.
        sensor.land(casino_only, "casino", day(3))
        casino_day = f"{day(3)}|{casino_only.key}"
        # A casino-only tenant never loads sportsbook, user or transactions: they do not block.
        assert sensor.tick() == {"gold_ggr_daily": {casino_day}, "gold_users_daily": {casino_day}}
        assert sensor.tick() == {}

        full_day = f"{day(5)}|{full.key}"
        sensor.land(full, "casino", day(5))
        assert sensor.tick() == {}  # its sportsbook day is still missing
        sensor.land(full, "sportsbook", day(5))
        # Liability waits for 11-03 and 11-04; users for user and transactions.
        assert sensor.tick() == {"gold_ggr_daily": {full_day}}
        assert sensor.tick() == {}
        sensor.land(full, "user", day(5))
        sensor.land(full, "transactions", day(5))
        assert sensor.tick() == {
            "gold_users_daily": {full_day},
            "gold_transactions_daily": {full_day},
        }
        assert sensor.tick() == {}


def test_liability_is_requested_once_per_day_after_a_newest_first_load(
    clickhouse, make_tenant
) -> None:
    tenant = make_tenant(("sportsbook",), start=day(1), end=day(5))

    def key(n: int) -> str:
        return f"{day(n)}|{tenant.key}"

    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance)
        assert sensor.tick() == {}
        liability_by_tick = []
        for n in (5, 4, 3, 2, 1):  # the raw backfill's order
            sensor.land(tenant, "sportsbook", day(n))
            requested = sensor.tick()
            # The day's own gold is requested at once; transactions is never in scope.
            assert requested.pop("gold_ggr_daily") == requested.pop("gold_users_daily") == {key(n)}
            liability_by_tick.append(requested.pop("gold_sportsbook_liability_daily", set()))
            assert requested == {}
        # Day D waits for every in-scope raw day of [D - 2, D]; days 1 and 2 reach before the
        # tenant's start, so only their in-window days count.
        assert liability_by_tick == [set(), set(), {key(5)}, {key(4)}, {key(1), key(2), key(3)}]
        assert sensor.tick() == {}

        sensor.land(tenant, "sportsbook", day(2))  # a later reload of one raw day
        assert sensor.tick() == {
            "gold_ggr_daily": {key(2)},
            "gold_users_daily": {key(2)},
            "gold_sportsbook_liability_daily": {key(2), key(3), key(4)},
        }
        assert sensor.tick() == {}


def test_the_code_location_runs_the_gold_sensor_by_default() -> None:
    from atlas_dagster.definitions import defs

    sensor = defs.resolve_sensor_def(GOLD_SENSOR_NAME)
    assert isinstance(sensor, AutomationConditionSensorDefinition)
    assert sensor.default_status == DefaultSensorStatus.RUNNING
    assert sensor.sensor_type == SensorType.AUTOMATION  # evaluated in the code server
    graph = defs.resolve_asset_graph()
    assert sensor.asset_selection.resolve(graph) == {AssetKey(name) for name in GOLD_TABLES}
    for name in GOLD_TABLES:
        assert graph.get(AssetKey(name)).automation_condition is not None


def test_liability_window_follows_the_lookback_setting(monkeypatch, make_tenant) -> None:
    tenant = make_tenant()
    monkeypatch.setenv("ATLAS_LIABILITY_LOOKBACK_DAYS", "7")
    assert Settings.from_env().liability_lookback_days == 7
    for bad in ("0", "-3", "ninety", "1.5"):
        monkeypatch.setenv("ATLAS_LIABILITY_LOOKBACK_DAYS", bad)
        with pytest.raises(SettingsError, match="ATLAS_LIABILITY_LOOKBACK_DAYS"):
            Settings.from_env()
    monkeypatch.delenv("ATLAS_LIABILITY_LOOKBACK_DAYS")
    assert Settings.from_env().liability_lookback_days == 90
    # The window is the automation's (not a Dagster partition mapping): it follows the setting.
    [liability] = [
        a
        for a in gold_assets([tenant], partitions_for([tenant]), lookback_days=7, embedded=True)
        if a.key == AssetKey("gold_sportsbook_liability_daily")
    ]
    condition = liability.automation_conditions_by_key[liability.key]
    assert "its 7-day window" in condition.description


def test_a_liability_day_replayed_before_its_window_landed_is_requested_once_it_has(
    clickhouse, make_tenant
) -> None:
    """Dagster's graph links a liability day to the same raw day only (the window is ours): a
    backfill selecting raw and gold together may replay liability day D as soon as raw D lands.
    The automation still requests D again once its whole window has landed, and only then."""
    tenant = make_tenant(("sportsbook",), start=day(1), end=day(5))
    liability = "gold_sportsbook_liability_daily"
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance)
        graph = sensor.defs.resolve_asset_graph()
        raw_key, day_5 = AssetKey("tbt_raw_events_sportsbook"), f"{day(5)}|{tenant.key}"
        mapping = graph.get_partition_mapping(AssetKey(liability), raw_key)
        assert isinstance(mapping, IdentityPartitionMapping)
        sensor.land(tenant, "sportsbook", day(5))
        assert liability not in sensor.tick()
        instance.report_runless_asset_event(AssetMaterialization(liability, partition=day_5))
        sensor.land(tenant, "sportsbook", day(4))
        assert liability not in sensor.tick()
        sensor.land(tenant, "sportsbook", day(3))  # the oldest day of day 5's 3-day window
        assert sensor.tick()[liability] == {day_5}


def test_after_a_crash_liability_days_wait_for_the_window_days_the_relaunch_lands(
    clickhouse, make_tenant
) -> None:
    """A newest-first load killed with days 5 and 3 landed, day 4 in its INSERT (failed by the
    sweep) and days 2 and 1 never started; the relaunch lands 4, then 2, then 1 (issue 30).
    The half-loaded tenant is not final: no liability day is replayed while its window still
    misses a day, and each is requested once the late day of its window arrives."""
    tenant = make_tenant(("sportsbook",), start=day(1), end=day(5))
    liability = "gold_sportsbook_liability_daily"

    def key(n: int) -> str:
        return f"{day(n)}|{tenant.key}"

    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance)
        sensor.land(tenant, "sportsbook", day(5))
        sensor.land(tenant, "sportsbook", day(3))
        at_crash = sensor.tick()
        assert at_crash["gold_ggr_daily"] == {key(5), key(3)}  # complete days replay at once
        assert liability not in at_crash  # 5 misses day 4, 3 misses days 1 and 2
        requested = []
        for n in (4, 2, 1):  # the relaunch, newest first
            sensor.land(tenant, "sportsbook", day(n))
            ticked = sensor.tick()
            assert ticked["gold_ggr_daily"] == {key(n)}
            requested.append(ticked.get(liability, set()))
        assert requested == [{key(5)}, {key(4)}, {key(1), key(2), key(3)}]
        assert sensor.tick() == {}


def test_the_sensor_requests_gold_with_its_check(clickhouse, make_tenant) -> None:
    """The sensor's own tick (code-server evaluation), on raw recorded without a run."""
    tenant = make_tenant(("casino",))
    defs = Definitions(
        assets=raw_and_gold([tenant]),
        sensors=[gold_automation_sensor(AUTOMATION_SECONDS.default)],
        resources=run_resources(clickhouse),
    )
    sensor = defs.resolve_sensor_def(GOLD_SENSOR_NAME)
    partition = f"{day(3)}|{tenant.key}"
    with instance_for_test() as instance:
        instance.report_runless_asset_event(
            AssetMaterialization("tbt_raw_events_casino", partition=partition)
        )
        context = build_sensor_context(instance=instance, repository_def=defs.get_repository_def())
        requests = sensor.evaluate_tick(context).run_requests
    gold = {AssetKey("gold_ggr_daily"), AssetKey("gold_users_daily")}
    assert {(k, r.partition_key) for r in requests for k in r.asset_selection} == {
        (k, partition) for k in gold
    }
    checks = {(c.asset_key, c.name) for r in requests for c in r.asset_check_keys}
    assert checks == {(k, RECONCILES_RAW) for k in gold}


def _start_raw_run(instance: DagsterInstance, first: str, last: str | None = None):
    """A raw run queued or running over a partition range, as a backfill launches it."""
    from dagster._core.storage.dagster_run import DagsterRunStatus
    from dagster._core.test_utils import create_run_for_test

    if last is None:
        tags = {"dagster/partition": first}
    else:
        tags = {
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        }
    return create_run_for_test(
        instance,
        job_name="__ASSET_JOB",
        status=DagsterRunStatus.STARTED,
        asset_selection=frozenset({AssetKey("tbt_raw_events_casino")}),
        tags=tags,
    )


def test_in_embedded_mode_a_tenants_gold_waits_while_its_raw_is_loading(
    clickhouse, make_tenant
) -> None:
    loading, other = make_tenant(("casino",)), make_tenant(("casino",))
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [loading, other], instance)  # conftest: an embedded DSN
        sensor.land(loading, "casino", day(5))
        sensor.land(other, "casino", day(5))
        run = _start_raw_run(instance, f"{day(4)}|{loading.key}")  # day 4 still loading
        requested = sensor.tick()
        assert requested["gold_ggr_daily"] == {f"{day(5)}|{other.key}"}
        instance.report_run_canceled(run)  # the raw run is over
        assert sensor.tick()["gold_ggr_daily"] == {f"{day(5)}|{loading.key}"}


def test_against_a_server_gold_fills_in_day_by_day_while_the_raw_run_goes_on(
    clickhouse,
    make_tenant,
) -> None:
    tenant = make_tenant(("casino",))
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance, embedded=False)  # the server-mode shape
        run = _start_raw_run(instance, f"{day(3)}|{tenant.key}", f"{day(5)}|{tenant.key}")
        sensor.land(tenant, "casino", day(5))  # the run's newest day landed, 3 and 4 loading
        assert sensor.tick() == {
            "gold_ggr_daily": {f"{day(5)}|{tenant.key}"},
            "gold_users_daily": {f"{day(5)}|{tenant.key}"},
        }
        assert sensor.tick() == {}
        instance.report_run_canceled(run)


def test_a_reload_in_progress_holds_gold_until_the_day_lands_again(
    clickhouse,
    make_tenant,
) -> None:
    tenant = make_tenant(("casino",))
    key = f"{day(4)}|{tenant.key}"
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance, embedded=False)  # the server-mode shape
        sensor.land(tenant, "casino", day(4))
        run = _start_raw_run(instance, key)  # the day is being re-loaded before the tick
        assert sensor.tick() == {}  # landed once, but loading again: not requested
        assert sensor.tick() == {}
        sensor.land(tenant, "casino", day(4))  # the re-load landed
        instance.report_run_canceled(run)
        assert sensor.tick() == {"gold_ggr_daily": {key}, "gold_users_daily": {key}}
        assert sensor.tick() == {}


def test_a_day_years_back_is_requested_on_a_three_year_fleet(clickhouse, make_tenant) -> None:
    """History-wide: nothing limits automation to the latest days of the partitions."""
    start, end = dt.date(2023, 12, 1), dt.date(2026, 11, 30)
    tenants = [make_tenant(("casino",), start=start, end=end) for _ in range(5)]
    old = dt.date(2024, 1, 15)
    key = f"{old}|{tenants[2].key}"
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, tenants, instance)
        assert sensor.tick() == {}
        sensor.land(tenants[2], "casino", old)
        assert sensor.tick() == {"gold_ggr_daily": {key}, "gold_users_daily": {key}}
        assert sensor.tick() == {}


def test_gold_refreshed_after_its_raw_is_not_requested_again(clickhouse, make_tenant) -> None:
    """A first evaluation over history (a new deployment of the sensor) requests only the
    tenant-days whose gold is missing or older than their raw: no storm."""
    tenant = make_tenant(("casino",))
    stale, fresh = f"{day(2)}|{tenant.key}", f"{day(3)}|{tenant.key}"
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [tenant], instance)
        for n in (2, 3):
            sensor.land(tenant, "casino", day(n))
        for name in ("gold_ggr_daily", "gold_users_daily"):
            instance.report_runless_asset_event(AssetMaterialization(name, partition=fresh))
        assert sensor.tick() == {"gold_ggr_daily": {stale}, "gold_users_daily": {stale}}
        assert sensor.tick() == {}


def test_adding_a_tenant_changes_the_meaning_of_nothing_already_loaded(
    clickhouse, make_tenant
) -> None:
    """tenants.yaml gains a client (here with an earlier start, so the date dimension grows
    too) and the definitions are reloaded: the loaded tenant's partition keys, materializations
    and check results keep their meaning, and none of its gold is requested again."""
    from dagster import AssetCheckEvaluation, AssetCheckKey

    first = make_tenant(start=day(1), end=day(7))
    added = make_tenant(("casino",), start=dt.date(2026, 6, 1), end=day(7))
    key = f"{day(3)}|{first.key}"
    with instance_for_test() as instance:
        sensor = Sensor(clickhouse, [first], instance)
        for domain in ("user", "casino", "transactions", "sportsbook"):
            sensor.land(first, domain, day(3))
        requested = sensor.tick()
        assert requested["gold_ggr_daily"] == {key}
        for name in GOLD_TABLES:  # what those gold runs would record
            instance.report_runless_asset_event(AssetMaterialization(name, partition=key))
            instance.report_runless_asset_event(
                AssetCheckEvaluation(
                    asset_key=AssetKey(name), check_name=RECONCILES_RAW, passed=True, partition=key
                )
            )
        before = {
            name: instance.get_materialized_partitions(AssetKey(name))
            for name in (*GOLD_TABLES, "tbt_raw_events_casino")
        }

        reloaded = Sensor(clickhouse, [first, added], instance)  # "Reload definitions"
        reloaded.cursor = sensor.cursor
        assert reloaded.tick() == {}  # no re-request storm for the loaded tenant
        graph = reloaded.defs.resolve_asset_graph()
        for name, partitions in before.items():
            assert instance.get_materialized_partitions(AssetKey(name)) == partitions
            partitions_def = graph.get(AssetKey(name)).partitions_def
            assert all(partitions_def.has_partition_key(k) for k in partitions)
        check = AssetCheckKey(AssetKey("gold_ggr_daily"), RECONCILES_RAW)
        [execution] = instance.event_log_storage.get_asset_check_execution_history(check, 5)
        assert (execution.partition, execution.status.value) == (key, "SUCCEEDED")
        assert graph.get_check_spec(check).partitions_def.has_partition_key(key)

        reloaded.land(added, "casino", day(3))  # the new client's own days flow as usual
        new_key = f"{day(3)}|{added.key}"
        assert reloaded.tick() == {"gold_ggr_daily": {new_key}, "gold_users_daily": {new_key}}
        assert reloaded.tick() == {}
