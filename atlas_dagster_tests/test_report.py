"""The client progress report: its figures against backfill_log, the advice for each diagnosis the
loader writes, isolation between tenants, and the asset, schedule and sensor on a real instance."""

import datetime as dt
import json
import random
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    MultiPartitionsDefinition,
    asset,
    build_schedule_context,
    build_sensor_context,
    materialize,
)

from atlas_dagster.assets.report import report_definitions_parts
from atlas_dagster.cli.main import main
from atlas_dagster.domains import DOMAINS
from atlas_dagster.gold.tables import GOLD_TABLES
from atlas_dagster.monitoring.pace import read_pace
from atlas_dagster.partitions import partition_key, partitions_for
from atlas_dagster.reporting.advice import OUR_SIDE, diagnose
from atlas_dagster.reporting.collect import collect_reports
from atlas_dagster.reporting.publish import publish, render_files, tenant_folder
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.resources.connection import query_rows
from atlas_dagster.settings import DEFAULT_PARALLEL_INSERTS, Settings
from atlas_dagster.tenants import S3Settings, Tenant, load_tenants
from atlas_dagster.validation.rows import Violation, describe
from atlas_dagster_tests.backfill_log_rows import insert_log_rows, log_entry
from testkit.dagster_stack import write_tenants
from testkit.s3_server import S3Server, s3_server  # noqa: F401  (fixture)

TODAY = dt.datetime.now(dt.UTC).date()
ALL = ("user", "casino", "transactions", "sportsbook")


@pytest.fixture
def clickhouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClickHouseResource:
    """A fresh embedded ClickHouse for each test, also what `atlas-dagster report` opens."""
    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", dsn)
    return ClickHouseResource(dsn=dsn)


def _file(tenant: Tenant, domain: str, day: dt.date, name: str) -> str:
    return (
        f"{tenant.source}/{domain}/organization_id={tenant.organization_id}/brand_id="
        f"{tenant.brand_id}/year={day:%Y}/month={day:%m}/day={day:%d}/{name}"
    )


def _row_error(tenant: Tenant, domain: str, day: dt.date, value: str, row: int) -> str:
    """The loader's own wording (validation/rows.describe), as backfill_log holds it."""
    violation = Violation(_file(tenant, domain, day, "part-7.parquet"), "amount", "is negative",
                          3, row, value)  # fmt: skip
    return f"RowContractError: {describe(day, DOMAINS[domain], [violation])}"


def _no_files(tenant: Tenant, domain: str, day: dt.date) -> str:
    folder = _file(tenant, domain, day, "").rstrip("/")
    return f"ExportError: no Parquet files for the day at {folder}/"


def _seed(clickhouse, tenant: Tenant, seed: int, *secret_notes: str) -> None:
    """A varied history: completed, failed on rows, no files, running and never-tried days."""
    rng = random.Random(seed)
    entries = []
    first, last = tenant.start_date, min(tenant.last_date(TODAY), TODAY - dt.timedelta(days=1))
    for domain in tenant.domains:
        day = first
        while day <= last:
            draw = rng.random()
            if draw < 0.7:
                rows = rng.randrange(100, 5000)
                entries.append(
                    log_entry(tenant, domain, day, "completed", rows_loaded=rows, source_rows=rows)
                )
            elif draw < 0.8:
                message = _row_error(
                    tenant, domain, day, f"-{rng.randrange(1, 99)}.5", int(draw > 0.75)
                )
                entries.append(log_entry(tenant, domain, day, "failed", error_message=message))
            elif draw < 0.85:
                message = _no_files(tenant, domain, day)
                entries.append(log_entry(tenant, domain, day, "failed", error_message=message))
            elif draw < 0.87:
                entries.append(log_entry(tenant, domain, day, "running"))
            elif draw < 0.89 and secret_notes:
                note = secret_notes[len(entries) % len(secret_notes)]
                entries.append(log_entry(tenant, domain, day, "failed", error_message=note))
            day += dt.timedelta(days=1)
    insert_log_rows(clickhouse, entries)


def _log_counts(clickhouse, tenant: Tenant) -> dict[str, dict]:
    with clickhouse.session() as client:
        rows = query_rows(
            client,
            "SELECT domain, countIf(status = 'completed') AS done, "
            "countIf(status = 'failed' AND error_message LIKE 'ExportError: no Parquet%') "
            "AS nofile, countIf(status = 'failed') AS failed, "
            "countIf(status = 'running') AS running, "
            "sumIf(rows_loaded, status = 'completed') AS rows, "
            "sumIf(source_rows, status = 'completed') AS source_rows, "
            "sumIf(dateDiff('millisecond', started_at, updated_at), status = 'completed') / 1000"
            " AS seconds, "
            "minIf(partition_date, status = 'completed') AS first, "
            "maxIf(partition_date, status = 'completed') AS last "
            "FROM atlas.backfill_log FINAL WHERE organization_id = {o:String} "
            "AND brand_id = {b:String} AND partition_date < today() GROUP BY domain",
            {"o": tenant.organization_id, "b": tenant.brand_id},
        )
    return {row["domain"]: row for row in rows}


def test_report_figures_are_backfill_logs(clickhouse, make_tenant) -> None:
    tenant = make_tenant(ALL, start=TODAY - dt.timedelta(days=400), end=TODAY + dt.timedelta(9))
    _seed(clickhouse, tenant, 1)
    [report] = collect_reports(clickhouse, [tenant])
    counts = _log_counts(clickhouse, tenant)
    due = (TODAY - tenant.start_date).days
    for summary in report.domains:
        log = counts[summary.domain]
        assert summary.expected_days == due
        assert summary.done == log["done"]
        assert summary.failed == log["failed"] - log["nofile"]
        assert summary.not_exported == log["nofile"]
        assert summary.loading == log["running"]
        assert summary.rows == log["rows"]
        assert (summary.first_day, summary.last_day) == (log["first"], log["last"])
        cells = report.calendar[summary.domain]
        # The window runs 10 days past today: today and those are not exported yet.
        assert cells[due:] == "N" * 10
        assert cells.count("C") == log["done"]
        assert summary.missing == due - log["done"] - log["failed"] - log["running"]
        # ETA: the days left at this tenant-domain's rows per day, at the pace measured on this
        # target's recent loads (monitoring/pace.py, tested there), at most the pool's limit.
        left = (due - log["done"]) * log["source_rows"] / log["done"]
        with clickhouse.session() as client:
            pace = read_pace(client, summary.domain)
        assert pace is not None
        expected = pace.seconds(left, limit=DEFAULT_PARALLEL_INSERTS)
        assert summary.eta_seconds == pytest.approx(expected, rel=1e-6)
    failures = [f for f in report.failures if f.column == "amount"]
    assert len(failures) == sum(c["failed"] - c["nofile"] for c in counts.values())
    assert all(f.first_row in (0, 1) and f.value.startswith("-") for f in failures)
    assert all(f.file.startswith(f"{f.domain}/organization_id=") for f in failures)


def test_each_loader_diagnosis_becomes_advice(make_tenant) -> None:
    tenant = make_tenant(("casino",))
    day = dt.date(2026, 11, 5)
    uri = _file(tenant, "casino", day, "part-1.parquet")
    cases = {
        _row_error(tenant, "casino", day, "-3.5", 1100): ("amount", "zero or positive"),
        f"ValidationError: {uri}: missing column currency (expected string)": (
            "currency",
            "Add the column currency as string",
        ),
        f"ValidationError: {uri}: column amount has type int64, expected decimal(scale<=4) or "
        "double": ("amount", "Write amount as decimal(scale<=4) or double"),
        f"ValidationError: {uri}: column user_id (4 null values) holds null values; the export "
        "contract requires a value in every row": ("user_id", "needs a value in user_id"),
        f"ValidationError: {uri}: column organization_id ('evil'..'evil') holds another "
        "tenant's ids; the day is refused and nothing is loaded (the partition's is "
        f"'{tenant.organization_id}')": ("organization_id", "export only rows"),
        _no_files(tenant, "casino", day): ("", "Export the day's Parquet files to casino/"),
        f"ExportError: {uri}: corrupt or unreadable Parquet: bad magic": ("", "again"),
        "LoadCanceled: the Dagster run was canceled during the INSERT": ("", OUR_SIDE),
    }
    for message, (column, advice) in cases.items():
        row = {"domain": "casino", "partition_date": day, "error_message": message}
        [failure] = diagnose(tenant, row)
        assert failure.column == column, message
        assert advice in failure.advice, (message, failure.advice)
        assert failure.day == day
        assert tenant.source not in failure.file
        assert "evil" not in f"{failure.problem} {failure.value}"  # another tenant's id
    [row_failure] = diagnose(
        tenant,
        {
            "domain": "casino",
            "partition_date": day,
            "error_message": _row_error(tenant, "casino", day, "-3.5", 1100),
        },
    )
    assert (row_failure.first_row, row_failure.value, row_failure.rows) == (1100, "-3.5", 3)
    assert row_failure.file == f"casino/organization_id={tenant.organization_id}" + uri.split(
        f"organization_id={tenant.organization_id}"
    )[1].replace("part-1", "part-7")


def test_a_report_holds_only_its_tenant(clickhouse, make_tenant, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ACME_KEY_ID", "AKIAREPORTKEY0001")
    monkeypatch.setenv("ACME_SECRET", "s3cr3t-report-value")
    window = {"start": TODAY - dt.timedelta(days=60), "end": TODAY - dt.timedelta(days=1)}
    base = make_tenant(ALL, **window)
    ours = Tenant(
        base.organization_id,
        "brand-a",
        f"file://{tmp_path}/exports-a",
        base.start_date,
        base.end_date,
        ALL,
        S3Settings("http://minio.internal.example:9000", "us-east-1", "ACME_KEY_ID", "ACME_SECRET"),
    )
    other = make_tenant(ALL, **window)
    other = Tenant(other.organization_id, "brand-b", f"file://{tmp_path}/exports-b",
                   other.start_date, other.end_date, ALL)  # fmt: skip
    leaky = (
        "ExportError: cannot list s3://acme/x: EndpointConnectionError: Could not connect to "
        "the endpoint URL: http://minio.internal.example:9000/acme?list-type=2 with key "
        "AKIAREPORTKEY0001/s3cr3t-report-value via clickhouse://default:dsnpass@ch.internal:9000"
    )
    # A value of the client's own rows holding what must never be shown either.
    day = ours.start_date
    value = "AKIAREPORTKEY0001 http://minio.internal.example:9000/x s3cr3t-report-value"
    violation = Violation(_file(ours, "casino", day, "p.parquet"), "currency", "is empty", 1, 0,
                          value)  # fmt: skip
    in_value = f"RowContractError: {describe(day, DOMAINS['casino'], [violation])}"
    _seed(clickhouse, ours, 2, leaky, in_value)
    _seed(clickhouse, other, 3, "EngineOpenError: other-secret at 10.1.2.3")
    reports = {r.brand_id: r for r in collect_reports(clickhouse, [ours, other])}
    text = "\n".join(t for _, t in render_files(reports["brand-a"]).values())
    assert f"{ours.organization_id}" in text and "brand-a" in text
    forbidden = [
        other.organization_id,
        "brand-b",
        "exports-b",
        str(tmp_path),  # our mount point: files are shown from the export's root
        "minio.internal.example",
        "AKIAREPORTKEY0001",
        "s3cr3t-report-value",
        "dsnpass",
        "ch.internal",
        "other-secret",
        "10.1.2.3",
    ]
    assert [word for word in forbidden if word in text] == []
    # Both are still reported, in the client's words.
    assert "Atlas still has read access" in text
    assert "Column currency is empty." in text
    other_values = {f.value for f in reports["brand-b"].failures if f.value}
    our_values = {f.value for f in reports["brand-a"].failures if f.value}
    assert other_values - our_values, "the seeds must differ for this test to mean anything"
    assert not [v for v in other_values - our_values if f"<code>{v}</code>" in text]


def test_report_folder_per_tenant(make_tenant, tmp_path) -> None:
    tenant = make_tenant(("user",))
    assert tenant_folder(str(tmp_path), tenant) == f"{tmp_path}/{tenant.organization_id}/main"
    assert tenant_folder("{source}/reports", tenant) == f"{tmp_path}/exports/reports"
    s3 = Tenant("acme", "main", "s3://acme-exports/atlas", tenant.start_date, None, ("user",))
    assert tenant_folder("{source}/reports", s3) == "s3://acme-exports/atlas/reports"
    with pytest.raises(ValueError, match="not allowed"):
        tenant_folder("/tmp/reports/../x", tenant)


def _raw_probe(partitions: MultiPartitionsDefinition):
    @asset(key=AssetKey(DOMAINS["casino"].raw_table), partitions_def=partitions)
    def probe() -> None:
        """Stands for a raw load: the sensor only reads the run's assets and partition."""

    return probe


def test_asset_schedule_and_sensor_on_a_real_instance(
    clickhouse, make_tenant, tmp_path, monkeypatch
) -> None:
    window = {"start": TODAY - dt.timedelta(days=30), "end": TODAY - dt.timedelta(days=1)}
    tenants = [make_tenant(ALL, **window) for _ in range(3)]
    for i, tenant in enumerate(tenants):
        _seed(clickhouse, tenant, 10 + i)
    monkeypatch.setenv("ATLAS_REPORTS_LOCATION", str(tmp_path / "reports"))
    # As definitions.py builds them, from the settings read when the code location loads.
    report_asset, job, daily, after_loads = report_definitions_parts(tenants, Settings.from_env())
    defs = Definitions(
        assets=[report_asset],
        jobs=[job],
        schedules=[daily],
        sensors=[after_loads],
        resources={"clickhouse": clickhouse},
    )
    with DagsterInstance.ephemeral() as instance:
        # The schedule asks for one run of its job over every tenant; the job runs it as a run
        # worker would, from the request's tags.
        [request] = list(daily.evaluate_tick(build_schedule_context(instance)).run_requests)
        result = defs.resolve_job_def(request.job_name or job.name).execute_in_process(
            instance=instance, tags=request.tags
        )
        assert result.success
        events = result.asset_materializations_for_node("client_progress_report")
        assert sorted(e.partition for e in events) == sorted(t.key for t in tenants)
        for event, tenant in zip(
            sorted(events, key=lambda e: e.partition),
            sorted(tenants, key=lambda t: t.key),
            strict=True,
        ):
            counts = _log_counts(clickhouse, tenant)
            assert event.metadata["days_done"].value == sum(c["done"] for c in counts.values())
            assert "| domain |" in event.metadata["summary"].value
            assert "```" in event.metadata["calendar"].value
            page = Path(event.metadata["report"].value)
            assert page == tmp_path / "reports" / tenant.organization_id / "main" / "progress.html"
            document = json.loads((page.parent / "progress.json").read_text())
            assert document["organization_id"] == tenant.organization_id
            csv_lines = (page.parent / "progress.csv").read_text().splitlines()
            assert len(csv_lines) == 1 + 5 * (
                (tenant.last_date(TODAY) - tenant.start_date).days + 1
            )

        # After a raw run of the second tenant ends, the sensor asks for its report alone.
        context = build_sensor_context(instance=instance, repository_def=defs.get_repository_def())
        assert after_loads(context) is not None  # the first tick starts its cursor
        probe = _raw_probe(partitions_for(tenants))
        day = TODAY - dt.timedelta(days=3)
        loaded = materialize(
            [probe], instance=instance, partition_key=partition_key(day, tenants[1].key)
        )
        assert loaded.success
        [request] = list(after_loads.evaluate_tick(context).run_requests)
        assert request.partition_key == tenants[1].key
        # The same runs are not reported twice.
        assert list(after_loads.evaluate_tick(context).run_requests) == []


def test_report_cli_writes_the_three_files(clickhouse, make_tenant, tmp_path, monkeypatch, capsys):
    tenant = make_tenant(
        ("casino", "sportsbook"), start=TODAY - dt.timedelta(days=20), end=TODAY - dt.timedelta(1)
    )
    _seed(clickhouse, tenant, 5)
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(write_tenants(tmp_path / "t.yaml", [tenant])))
    out = tmp_path / "out"
    argv = ["report", "--org", tenant.organization_id, "--brand", "main", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "progress.csv",
        "progress.html",
        "progress.json",
    ]
    [report] = collect_reports(clickhouse, [tenant])
    assert f"{report.percent:.1f}%" in printed
    assert "gold_ggr_daily" in (out / "progress.html").read_text()
    assert {g["table"] for g in json.loads((out / "progress.json").read_text())["gold"]} == {
        t.name for t in GOLD_TABLES.values() if set(t.sources) & set(tenant.domains)
    }


@pytest.mark.slow
def test_report_lands_beside_the_clients_s3_export(
    s3_server: S3Server,  # noqa: F811
    clickhouse,
    make_tenant,
    monkeypatch,
) -> None:
    """`{source}/reports` on a real S3 server, written with the tenant's own endpoint and keys."""
    monkeypatch.setenv("ATLAS_TEST_REPORT_KEY", s3_server.access_key_id)
    monkeypatch.setenv("ATLAS_TEST_REPORT_SECRET", s3_server.secret_access_key)
    local = make_tenant(("casino",), start=TODAY - dt.timedelta(days=12), end=TODAY)
    bucket = f"atlas-report-{local.organization_id}"
    tenant = s3_server.tenant(
        local.organization_id,
        f"s3://{bucket}/exports",
        (local.start_date, local.end_date),
        "ATLAS_TEST_REPORT_KEY",
        "ATLAS_TEST_REPORT_SECRET",
    )
    s3_server.client().create_bucket(Bucket=bucket)
    _seed(clickhouse, tenant, 8, f"ExportError: cannot list {s3_server.endpoint_url}")
    [report] = collect_reports(clickhouse, [tenant])
    published = publish(report, tenant, tenant_folder("{source}/reports", tenant))
    assert published.html == f"s3://{bucket}/exports/reports/progress.html"
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="exports/reports/")
    assert sorted(o["Key"] for o in listed["Contents"]) == [
        f"exports/reports/{name}" for name in ("progress.csv", "progress.html", "progress.json")
    ]
    body = s3_server.client().get_object(Bucket=bucket, Key="exports/reports/progress.html")
    page = body["Body"].read().decode()
    assert body["ContentType"].startswith("text/html")
    assert f"{report.percent:.1f}%" in page
    endpoint_host = s3_server.endpoint_url.split("://", 1)[1]
    assert endpoint_host not in page and s3_server.secret_access_key not in page


def test_days_with_no_events_and_a_domains_own_dates(clickhouse, tmp_path: Path) -> None:
    """A complete export's empty day is done, and its gold has nothing to wait for; a domain
    launched later owes nothing before its start."""
    first = TODAY - dt.timedelta(days=10)
    launch = first + dt.timedelta(days=4)
    path = write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": "late",
                "brand_id": "main",
                "source": f"file://{tmp_path / 'exports'}",
                "start_date": first.isoformat(),
                "end_date": (TODAY - dt.timedelta(days=1)).isoformat(),
                "domains": ["transactions", {"name": "sportsbook", "start_date": launch}],
            }
        ],
    )
    [tenant] = load_tenants(path)
    entries = [
        log_entry(tenant, "transactions", first + dt.timedelta(days=i), "completed",
                  rows_loaded=0 if i == 2 else 10, source_rows=0 if i == 2 else 10)
        for i in range(10)
    ] + [
        log_entry(tenant, "sportsbook", launch + dt.timedelta(days=i), "completed",
                  rows_loaded=5, source_rows=5)
        for i in range(6)
    ]  # fmt: skip
    insert_log_rows(clickhouse, entries)
    [report] = collect_reports(clickhouse, [tenant])
    assert report.calendar["transactions"] == "CCECCCCCCC"
    assert report.calendar["sportsbook"] == "OOOOCCCCCC"
    summaries = {s.domain: s for s in report.domains}
    assert (summaries["transactions"].expected_days, summaries["transactions"].done) == (10, 10)
    assert (summaries["sportsbook"].expected_days, summaries["sportsbook"].done) == (6, 6)
    assert summaries["sportsbook"].missing == 0
    # gold_transactions_daily reads transactions only: the empty day is not waiting for a
    # replay, while the days with rows are (nothing replayed them in this test).
    gold = {g.table: g for g in report.gold}
    assert gold["gold_transactions_daily"].days_replayed == 1
    assert gold["gold_transactions_daily"].days_waiting == 9
