"""atlas-dagster backfill (through the running Dagster instance) and load (in this process)."""

from __future__ import annotations

import argparse
import datetime as dt
import time

from atlas_dagster.checks.changes import scan_tenant
from atlas_dagster.cli.dagster_api import (
    FINISHED_BACKFILL_STATUSES,
    DagsterApi,
    WebserverUnreachable,
    default_url,
)
from atlas_dagster.cli.engine import clickhouse_resource, live_insert_limit
from atlas_dagster.core.days import day_ranges
from atlas_dagster.core.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    FLEET_TAG,
    SELECT_TAG,
    TENANT_TAG,
)
from atlas_dagster.core.waits import BoundedWait
from atlas_dagster.domains import Domain
from atlas_dagster.exports.layout import DayExport
from atlas_dagster.orchestration.backfill_plan import (
    BackfillPlan,
    DaySize,
    Estimate,
    FleetPlan,
    build_fleet_plan,
    build_plan,
    estimate_duration,
    export_sizes,
)
from atlas_dagster.orchestration.selection import DEFAULT_SELECTION, Selection
from atlas_dagster.partitions import partition_key, split_key
from atlas_dagster.settings import current_settings
from atlas_dagster.tenants import Tenant, TenantConfigError, load_tenants, tenant_by_key
from atlas_dagster.validation.schema import column_readings

WAIT_POLL_SECONDS = 2.0
MIN_POLL_TIMEOUT_SECONDS = 1.0


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a YYYY-MM-DD date") from exc


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from exc
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{value!r}: the wait's bound must be above 0 seconds")
    return seconds


def _tenant(args: argparse.Namespace) -> Tenant:
    return tenant_by_key(load_tenants(current_settings().tenants_file), f"{args.org}.{args.brand}")


def _plan(args: argparse.Namespace) -> BackfillPlan:
    domains = args.domains.split(",") if args.domains else None
    return build_plan(
        clickhouse_resource(), _tenant(args), domains, args.start, args.end, args.selection
    )


def key_ranges(partition_keys: list[str]) -> list[tuple[str, str]]:
    """Consecutive days of one tenant as (oldest, newest) key ranges, for the GraphQL selector."""
    if not partition_keys:
        return []
    tenant = split_key(partition_keys[0])[1]
    days = day_ranges(split_key(k)[0] for k in partition_keys)
    return [(partition_key(first, tenant), partition_key(last, tenant)) for first, last in days]


def _human_bytes(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"


def print_plan(plan: BackfillPlan, sizes: list[DaySize], estimate: Estimate | None) -> None:
    print(
        f"plan for {plan.tenant.key}: {len(plan.days)} tenant-day(s) of "
        f"{', '.join(d.name for d in plan.domains)}, {plan.start}..{plan.end}, newest first"
    )
    print(
        f"{'order':>5}  {'day':10}  {'domain':12}  {'files':>5}  {'bytes':>9}  {'rows':>10}  note"
    )
    for order, size in enumerate(sizes, start=1):
        planned, export = size.planned, size.export
        files = str(len(export.files)) if export else "-"
        volume = _human_bytes(export.bytes) if export else "-"
        rows = str(export.num_rows) if export else "-"
        note = size.error or ("" if planned.reason in ("all", "missing") else planned.reason)
        if export is not None and not export.files:
            note = note or "no events (the export is complete)"
        print(
            f"{order:>5}  {planned.partition_date}  {planned.domain.name:12}  {files:>5}  "
            f"{volume:>9}  {rows:>10}  {note}"
        )
    total_rows = sum(s.export.num_rows for s in sizes if s.export)
    total_bytes = sum(s.export.bytes for s in sizes if s.export)
    print(f"total: {total_rows} rows, {_human_bytes(total_bytes)}")
    refused = sum(1 for s in sizes if s.error)
    print(f"refused before any INSERT (listing and footers): {refused} tenant-day(s)")
    print_readings([(s.planned.domain, s.export) for s in sizes if s.export])
    if estimate is None:
        print("estimated duration: unknown until a first day has loaded on this target")
    else:
        print(
            f"estimated duration: {estimate.seconds / 60:.1f} min at the pace measured over "
            f"{estimate.measured_days} recent load(s) on this target: "
            f"{estimate.rows_per_second:,.0f} rows/s per load, {estimate.parallel:.1f} at once "
            "after the ramp-up"
        )


def print_changed(plan: BackfillPlan, shown: int = 20) -> None:
    """The window's completed days whose export changed since their load, apart from the plan:
    a re-delivery is reloaded only when asked (--only-changed). One listing per domain."""
    with clickhouse_resource().session() as client:
        scan = scan_tenant(
            client, plan.tenant, [d.name for d in plan.domains], plan.start, plan.end
        )
    for line in scan.unlisted:
        print(f"changed since loaded: not listed: {line}")
    if not scan.changed:
        print("changed since loaded: none")
        return
    print(
        f"changed since loaded: {len(scan.changed)} completed tenant-day(s) whose export has "
        "other files now, not in this plan (--only-changed reloads them):"
    )
    for changed in scan.changed[:shown]:
        print(f"  {changed.partition_date}  {changed.domain:12}  {changed.reason}")
    if len(scan.changed) > shown:
        print(f"  … {len(scan.changed) - shown} more (atlas-dagster status --json lists all)")


def print_readings(exports: list[tuple[Domain, DayExport]]) -> None:
    """How the load reads each tool-specific column type, per domain: one line per way of
    writing, with how many files write it so and the first of them."""
    ways: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for domain, export in exports:
        for export_file in export.files:
            readings = column_readings(export_file, domain)
            ways.setdefault((domain.name, readings), []).append(export_file.uri)
    if not ways:
        return
    print("types as read (per domain, by the way its files are written):")
    for (domain_name, readings), uris in sorted(ways.items()):
        what = "; ".join(readings) or "the contract's plain types"
        print(f"  {domain_name}: {len(uris)} file(s), e.g. {uris[0]}")
        print(f"    {what}")


def print_fleet_plan(plan: FleetPlan) -> None:
    total = sum(plan.tenant_days(t) for t in plan.tenants)
    print(
        f"fleet plan: {len(plan.tenants)} tenant(s), {plan.start}..{plan.end}, "
        f"{', '.join(d.name for d in plan.domains)}: {total} tenant-day-domain(s) in one order, "
        "newest day first across the fleet (every tenant's day before anyone's older day), "
        "each tenant ramping up on its own newest days"
    )
    for tenant in plan.tenants:
        print(f"  {tenant.key:40}  {plan.tenant_days(tenant):>7} tenant-day-domain(s)")


def run_fleet_backfill(args: argparse.Namespace) -> int:
    """One asset backfill of every tenant's days, as the UI's Materialize… over the whole range:
    its first run loads the whole fleet in one order (see run_coordinator.fleet_tags)."""
    if args.selection not in (Selection.ALL, Selection.INCOMPLETE):
        raise TenantConfigError(
            f"--only-{args.selection} selects scattered days of one tenant: run it per tenant "
            "with --org/--brand (a fleet backfill loads the window's incomplete days, or every "
            "day with --all-days)"
        )
    domains = args.domains.split(",") if args.domains else None
    plan = build_fleet_plan(
        load_tenants(current_settings().tenants_file), domains, args.start, args.end
    )
    print_fleet_plan(plan)
    if args.dry_run:
        return 0
    api = DagsterApi(args.url)
    selection = {d.raw_table: [plan.partition_range] for d in plan.domains}
    window = f"{plan.start}..{plan.end}"
    tags = {FLEET_TAG: window, SELECT_TAG: str(args.selection)}
    backfill_id = api.launch_backfill(selection, f"fleet {window}", tags)
    print(f"launched backfill {backfill_id}: {len(plan.tenants)} tenant(s), newest day first")
    print(f"follow or cancel it at {api.url}/runs/b/{backfill_id}")
    return wait_for(api, backfill_id, _wait_limit(args)) if args.wait else 0


def run_backfill(args: argparse.Namespace) -> int:
    if args.all_tenants:
        if args.org or args.brand:
            raise TenantConfigError("--all-tenants takes every tenant: drop --org/--brand")
        return run_fleet_backfill(args)
    if not (args.org and args.brand):
        raise TenantConfigError("name a tenant with --org and --brand, or pass --all-tenants")
    plan = _plan(args)
    if args.dry_run:
        sizes = export_sizes(plan)
        estimate = estimate_duration(
            clickhouse_resource(), plan, sizes, current_settings().load, live_insert_limit()
        )
        print_plan(plan, sizes, estimate)
        if args.selection is not Selection.CHANGED:
            print_changed(plan)
        return 0
    if not plan.days:
        print(f"nothing to backfill for {plan.tenant.key}: {_nothing(args.selection)}")
        return 0
    api = DagsterApi(args.url)
    selection = {
        domain.raw_table: key_ranges(plan.partition_keys(domain))
        for domain in plan.domains
        if plan.partition_keys(domain)
    }
    title = f"{plan.tenant.key} {plan.start}..{plan.end}"
    tags = {TENANT_TAG: plan.tenant.key, SELECT_TAG: str(args.selection)}
    backfill_id = api.launch_backfill(selection, title, tags)
    print(f"launched backfill {backfill_id}: {len(plan.days)} tenant-day(s), newest first")
    print(f"follow or cancel it at {api.url}/runs/b/{backfill_id}")
    return wait_for(api, backfill_id, _wait_limit(args)) if args.wait else 0


def wait_for(api: DagsterApi, backfill_id: str, limit_seconds: float) -> int:
    """Follows the backfill until it finishes, at most `limit_seconds`, reporting its progress
    (waits.BoundedWait: at once, then every 10 s). At the bound WaitTimeout says so and where to
    follow it; the backfill itself goes on. A webserver that stops answering (a restart during
    a long backfill) is waited for within the same bound; one that refuses the request is not.
    Each request and pause is cut to the time left, so that the wait ends at its bound even when
    the webserver accepts a request and never answers it."""
    wait = BoundedWait(
        f"backfill {backfill_id} to finish (it goes on without this wait: "
        f"{api.url}/runs/b/{backfill_id})",
        limit_seconds,
    )
    while True:
        try:
            status = api.backfill_status(backfill_id, _poll_timeout(api, wait))
        except WebserverUnreachable as exc:
            wait.still_waiting(str(exc))
        else:
            if status["status"] in FINISHED_BACKFILL_STATUSES:
                break
            wait.still_waiting(_progress(status, _time_left(api, backfill_id, wait)))
        time.sleep(min(WAIT_POLL_SECONDS, wait.remaining))
    wait.done()
    print(f"backfill {backfill_id} {status['status']}: {_counts(status)}")
    return 0 if status["status"] in ("COMPLETED", "COMPLETED_SUCCESS") else 1


def _poll_timeout(api: DagsterApi, wait: BoundedWait) -> float:
    # At least a second: a request with no time at all cannot be answered, and the next
    # still_waiting gives up at the bound anyway.
    return max(MIN_POLL_TIMEOUT_SECONDS, min(api.timeout, wait.remaining))


def _counts(status: dict) -> dict[str, int]:
    return {c["runStatus"]: c["count"] for c in status.get("partitionStatusCounts") or []}


def _time_left(api: DagsterApi, backfill_id: str, wait: BoundedWait) -> list[str]:
    """What the backfill's running raw runs say is left (none while its runs queue)."""
    try:
        return api.time_left(backfill_id, _poll_timeout(api, wait))
    except WebserverUnreachable:
        return []


def _progress(status: dict, time_left: list[str] | None = None) -> str:
    counts = ", ".join(f"{name} {count}" for name, count in sorted(_counts(status).items()))
    runs = counts or "none run yet"
    text = f"{status['status']}, {status.get('numPartitions')} partitions ({runs})"
    return text + "".join(f"; {left}" for left in time_left or [])


def _wait_limit(args: argparse.Namespace) -> float:
    if args.wait_seconds is not None:
        return args.wait_seconds
    return current_settings().backfill_wait_seconds


def run_cancel(args: argparse.Namespace) -> int:
    """Cancels the backfill and terminates its runs now, rather than at the daemon's next pass:
    queued days never start, an INSERT in flight is stopped and logged failed."""
    api = DagsterApi(args.url)
    api.cancel_backfill(args.backfill_id)
    runs = api.unfinished_runs(args.backfill_id)
    for run_id in runs:
        api.terminate_run(run_id)
    print(f"canceled backfill {args.backfill_id}; terminated {len(runs)} run(s)")
    return 0


def run_load(args: argparse.Namespace) -> int:
    """Materializes the window in this process, as one ranged run (no daemon needed)."""
    from dagster import DagsterInstance, materialize

    from atlas_dagster.assets.raw import raw_assets
    from atlas_dagster.partitions import partitions_for
    from atlas_dagster.resources.atlas_settings import RESOURCE_KEY, AtlasSettings

    tenants = load_tenants(current_settings().tenants_file)
    plan = _plan(args)
    keys = [k for d in plan.domains for k in plan.partition_keys(d)]
    if not keys:
        print(f"nothing to load for {plan.tenant.key}: {_nothing(args.selection)}")
        return 0
    with DagsterInstance.get() as instance:
        result = materialize(
            raw_assets(tenants, partitions_for(tenants)),
            selection=[d.raw_table for d in plan.domains],
            instance=instance,
            # The run's tunables as the code location wires them: from this environment.
            resources={"clickhouse": clickhouse_resource(), RESOURCE_KEY: AtlasSettings.wired()},
            tags={
                ASSET_PARTITION_RANGE_START_TAG: min(keys),
                ASSET_PARTITION_RANGE_END_TAG: max(keys),
                # The run takes the same days again when it starts (a day completed since the
                # plan, by another launch, is not reloaded).
                SELECT_TAG: str(args.selection),
            },
            raise_on_error=False,
        )
    print(f"run {result.run_id}: {'success' if result.success else 'FAILED'}")
    return 0 if result.success else 1


def window_arguments(
    command: argparse.ArgumentParser, selections: bool = True, fleet: bool = False
) -> None:
    """--org/--brand name the tenant; with `fleet`, --all-tenants may replace them."""
    command.add_argument("--org", required=not fleet)
    command.add_argument("--brand", required=not fleet)
    if fleet:
        command.add_argument(
            "--all-tenants",
            action="store_true",
            help="every tenant of the tenants file in one run, newest day first across the fleet",
        )
    command.add_argument("--domains", help="comma-separated (default: the tenant's domains)")
    command.add_argument("--start", type=_date, help="oldest day (default: the tenant's start)")
    command.add_argument("--end", type=_date, help="newest day (default: the tenant's last day)")
    if not selections:
        command.set_defaults(selection=Selection.ALL)
        return
    only = command.add_mutually_exclusive_group()
    only.set_defaults(selection=DEFAULT_SELECTION)
    for flag, selection, text in SELECTION_FLAGS:
        only.add_argument(flag, dest="selection", action="store_const", const=selection, help=text)


# Without a flag: the window's incomplete days (never loaded, left running by a dead run, failed,
# or completed with other rows than logged), so that launching the same window again finishes it.
SELECTION_FLAGS = (
    ("--all-days", Selection.ALL, "every day of the window, completed ones reloaded"),
    ("--only-missing", Selection.MISSING, "days never loaded (or left running)"),
    (
        "--only-failed",
        Selection.FAILED,
        "days logged failed, or completed but no longer matching the raw table",
    ),
    (
        "--only-changed",
        Selection.CHANGED,
        "completed days whose export was delivered again (files added, removed or replaced)",
    ),
)


def _nothing(selection: Selection) -> str:
    if selection is Selection.CHANGED:
        return "no loaded day's export changed since its load"
    if selection is Selection.ALL:
        return "the window has no day of the selected domains"
    return f"no {selection} day in the window (--all-days reloads completed ones)"


def register(commands: argparse._SubParsersAction) -> None:
    backfill = commands.add_parser(
        "backfill",
        help="launch a backfill of a tenant's raw days through the running Dagster instance",
    )
    window_arguments(backfill, fleet=True)
    backfill.add_argument("--dry-run", action="store_true", help="print the plan, launch nothing")
    backfill.add_argument(
        "--wait",
        action="store_true",
        help="follow the backfill until it finishes, reporting its progress, at most "
        "--wait-seconds (the backfill goes on if the wait ends first: exit status 2)",
    )
    backfill.add_argument(
        "--wait-seconds",
        type=_positive_seconds,
        help="the bound of --wait (default ATLAS_BACKFILL_WAIT_SECONDS, else 24 h)",
    )
    backfill.add_argument("--url", default=default_url(), help="the Dagster webserver")
    backfill.set_defaults(run=run_backfill)
    cancel = commands.add_parser("cancel", help="cancel a backfill and terminate its runs")
    cancel.add_argument("backfill_id")
    cancel.add_argument("--url", default=default_url(), help="the Dagster webserver")
    cancel.set_defaults(run=run_cancel)
    load = commands.add_parser(
        "load", help="materialize a tenant's raw days in this process (no daemon), newest first"
    )
    window_arguments(load)
    load.set_defaults(run=run_load)
