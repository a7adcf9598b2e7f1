"""`atlas-dagster status`: sections human and JSON, exact gaps, and the guide's queries agree."""

import datetime as dt
import json
import random
import re

import pytest
from dagster import instance_for_test

from atlas_dagster import sql
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.domains import DOMAINS
from atlas_dagster.exports.layout import day_folder
from atlas_dagster.monitoring.pace import read_pace
from atlas_dagster.resources.schema import ensure_schema
from atlas_dagster.settings import DEFAULT_PARALLEL_INSERTS
from atlas_dagster.tenants import Tenant
from atlas_dagster_tests.backfill_log_rows import (
    dead_worker,
    insert_log_rows,
    log_entry,
    log_rows,
    started_run,
)
from testkit.dagster_stack import write_tenants
from testkit.load_support import load_day

pytestmark = pytest.mark.slow  # seconds per test: real loads and runs

TODAY = dt.datetime.now(dt.UTC).date()
TAIL = "; the load stopped without logging its result"


def _load(clickhouse, tenant: Tenant, domain: str, day: dt.date, events: int) -> int:
    generate, _ = GENERATORS[domain]
    write_day(
        tenant, domain, day, generate(random.Random(f"{tenant.key}{day}"), tenant, day, events)
    )
    return load_day(clickhouse, tenant, DOMAINS[domain], day, "status-test-run").rows_loaded


def _status(capsys, *args: str) -> tuple[str, dict]:
    assert main(["status", *args]) == 0
    human = capsys.readouterr().out
    assert main(["status", *args, "--json"]) == 0
    return human, json.loads(capsys.readouterr().out)


def test_status_sections_list_failed_missing_and_stale_days(
    clickhouse, make_tenant, tmp_path, monkeypatch, capsys
) -> None:
    days = [TODAY - dt.timedelta(days=10 - i) for i in range(5)]
    tenant = make_tenant(("user",), start=days[0], end=days[-1])
    other = make_tenant(("user",), start=days[0], end=days[-1])
    monkeypatch.setenv(
        "ATLAS_TENANTS_FILE", str(write_tenants(tmp_path / "t.yaml", [tenant, other]))
    )
    rows = _load(clickhouse, tenant, "user", days[0], 30) + _load(
        clickhouse, tenant, "user", days[1], 20
    )
    # days[2]'s export holds the previous day's events: validation refuses it.
    generate, _ = GENERATORS["user"]
    write_day(tenant, "user", days[2], generate(random.Random(1), tenant, days[1], 10))
    with pytest.raises(Exception, match="outside the partition's UTC day"):
        load_day(clickhouse, tenant, DOMAINS["user"], days[2], "status-test-run")
    # days[3] was never loaded; days[4] is 'running' but its worker was killed.
    worker = dead_worker()
    with instance_for_test() as instance:
        run = started_run(instance)
        running = log_entry(
            tenant, "user", days[4], "running", run_id=run.run_id, worker=str(worker)
        )
        insert_log_rows(clickhouse, [running])
        human, report = _status(capsys, "--org", tenant.organization_id)

    org, iso = tenant.organization_id, [d.isoformat() for d in days]
    assert set(report) == {
        "progress", "failures", "gaps", "stale", "changed", "unlisted", "changes_scanned",
        "running_loads",
    }  # fmt: skip
    # One tenant in scope: its export was listed, and no loaded day changed since.
    assert (report["changed"], report["unlisted"], report["changes_scanned"]) == ([], [], True)
    assert report["running_loads"] == []  # the run there publishes no INSERT concurrency
    [progress] = report["progress"]
    assert progress == {
        "organization_id": org,
        "brand_id": "main",
        "domain": "user",
        "days_done": 2,
        "days_failed": 1,
        "total_rows": rows,
        "first_day": iso[0],
        "last_day": iso[4],
        "last_activity": progress["last_activity"],
        "days_left": 3,  # of the window's 5
        "time_left_seconds": progress["time_left_seconds"],
    }
    # The 3 days left at the mean rows of the 2 loaded, at the pace those loads measured.
    with clickhouse.session() as client:
        pace = read_pace(client, "user")
    assert pace is not None and progress["time_left_seconds"] == round(
        pace.seconds(3 * rows / 2, limit=DEFAULT_PARALLEL_INSERTS), 1
    )
    assert (
        dt.datetime.fromisoformat(progress["last_activity"]).replace(tzinfo=None)
        == (running["updated_at"])
    )
    [failure] = report["failures"]
    assert (failure["domain"], failure["partition_date"]) == ("user", iso[2])
    assert "outside the partition's UTC day" in failure["error_message"]
    assert failure["s3_path"] == day_folder(tenant, "user", days[2])
    assert failure["run_id"] == "status-test-run"
    assert [(g["organization_id"], g["domain"], g["partition_date"]) for g in report["gaps"]] == [
        (org, "user", day) for day in iso[2:]
    ]
    [stale] = report["stale"]
    assert (stale["partition_date"], stale["run_id"], stale["worker"]) == (
        iso[4],
        run.run_id,
        str(worker),
    )
    assert stale["reason"] == (
        f"stale: worker pid {worker.pid} on host {worker.host} is gone; "
        f"Dagster run {run.run_id} is STARTED{TAIL}"
    )

    assert re.search(rf"{org}\s+main\s+user\s+2\s+1\s+{rows}\s+{iso[0]}\s+{iso[4]}\s", human)
    sections = dict(re.findall(r"== ([a-z ]+?) \(.*?\)\n(.*?)(?=\n\n==|\Z)", human, re.S))
    assert list(sections) == [
        "progress per domain",
        "pending failures",
        "gaps",
        "stale loads",
        "changed since loaded",
        "running loads",
    ]
    assert sections["running loads"].strip() == "(none)"
    assert sections["changed since loaded"].strip() == "(none)"
    assert iso[2] in sections["pending failures"]
    assert "outside the partition's UTC day" in sections["pending failures"]
    assert re.search(rf"{org}\s+main\s+user\s+{iso[2]}\s+{iso[4]}\s+3$", sections["gaps"], re.M)
    assert re.search(
        rf"{iso[4]}\s+{run.run_id}\s+{worker}\s+stale: worker pid", sections["stale loads"]
    )
    # status only reads: the stale day is still 'running' until a sensor marks it.
    assert log_rows(clickhouse, tenant)[("user", days[4])]["status"] == "running"

    # Filters are bound: another tenant's or domain's view holds none of this.
    _, other_view = _status(capsys, "--org", other.organization_id)
    assert other_view["progress"] == other_view["failures"] == other_view["stale"] == []
    assert len(other_view["gaps"]) == 5
    _, casino = _status(capsys, "--org", org, "--domain", "casino")
    assert casino == {
        "progress": [], "failures": [], "gaps": [], "stale": [], "changed": [], "unlisted": [],
        "changes_scanned": True, "running_loads": [],
    }  # fmt: skip


SEED_ORG, SEED_BRAND = "seu_org_id", "seu_brand_id"


def _guide_queries() -> list[str]:
    """The guide's queries verbatim, from sql/monitoring (test_monitoring checks them)."""
    paths = sql.folder("monitoring")
    return [sql.text(p).split("\n", 1)[1].strip().rstrip(";") for p in paths]


@pytest.fixture
def guide_tenant(clickhouse, tmp_path):
    """The guide's placeholder tenant, open-ended: its gap window is the guide's last 180 days."""
    tenant = Tenant(
        SEED_ORG,
        SEED_BRAND,
        f"file://{tmp_path / 'exports'}",
        TODAY - dt.timedelta(days=400),
        None,
        ("user", "casino"),
    )
    delete = "DELETE FROM atlas.backfill_log WHERE organization_id = {o:String}"

    def clear() -> None:
        with clickhouse.session() as client:
            ensure_schema(client)
            client.command(delete, parameters={"o": SEED_ORG})

    clear()  # other tests log days for the guide's placeholder tenant too
    yield tenant
    clear()


def test_guide_queries_agree_with_status(
    clickhouse, guide_tenant, tmp_path, monkeypatch, capsys
) -> None:
    tenant = guide_tenant
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(write_tenants(tmp_path / "t.yaml", [tenant])))
    day = [TODAY - dt.timedelta(days=n) for n in range(10)]
    _load(clickhouse, tenant, "user", day[2], 25)
    insert_log_rows(
        clickhouse,
        [
            log_entry(tenant, "user", day[6], "completed", rows_loaded=11),
            log_entry(tenant, "casino", day[3], "completed", rows_loaded=7),
            log_entry(tenant, "user", day[4], "failed", error_message="boom", run_id="r1"),
            log_entry(tenant, "user", day[5], "running", run_id="a-run-no-instance-knows"),
            log_entry(tenant, "user", TODAY - dt.timedelta(days=200), "completed", rows_loaded=3),
        ],
    )
    with clickhouse.session() as client:
        progress, window, gaps, failures = (client.query(q).result_rows for q in _guide_queries())
    with instance_for_test():
        _, report = _status(capsys, "--org", SEED_ORG)

    def iso(value):
        return value.isoformat()

    # The guide's columns as it returns them; status adds days_left and time_left_seconds.
    columns = list(report["progress"][0])[:9]
    guide_columns = [{c: r[c] for c in columns} for r in report["progress"]]
    assert sorted(guide_columns, key=lambda r: r["domain"]) == [
        dict(zip(columns, [*r[:6], iso(r[6]), iso(r[7]), iso(r[8])], strict=True)) for r in progress
    ]
    [user] = [p for p in report["progress"] if p["domain"] == "user"]
    assert (user["days_done"], user["days_failed"], user["total_rows"]) == (3, 1, 25 + 11 + 3)
    assert user["days_done"] == sum(1 for w in window if w[1] == "completed")
    assert user["days_failed"] == sum(1 for w in window if w[1] == "failed")
    assert user["total_rows"] == sum(w[2] for w in window if w[1] == "completed")
    user_gaps = [g["partition_date"] for g in report["gaps"] if g["domain"] == "user"]
    # On ClickHouse 26.9 the guide's WITH arrayJoin(...) alias is expanded in the inner and the
    # outer SELECT, so each missing day comes back 180 times: compare the days themselves.
    assert user_gaps == sorted({iso(g[0]) for g in gaps})
    assert len(user_gaps) == 180 - 2  # day 200 is outside the guide's window
    assert [
        (f["domain"], f["partition_date"], f["error_message"], f["s3_path"], f["updated_at"])
        for f in report["failures"]
    ] == [(f[0], iso(f[1]), f[2], f[3], iso(f[4])) for f in failures]
    assert [s["partition_date"] for s in report["stale"]] == [iso(day[5])]
