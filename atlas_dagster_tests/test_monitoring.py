"""The monitoring guide's four queries run unchanged on backfill_log; status agrees; no secrets."""

import datetime as dt
import random
import re

from atlas_dagster import sql
from atlas_dagster.cli.demo_data import GENERATORS, write_day
from atlas_dagster.cli.main import main
from atlas_dagster.domains import DOMAINS
from atlas_dagster.secrets import redact
from testkit.load_support import load_day


def _seed_queries() -> list[str]:
    """The runbook's monitoring queries, as sql/monitoring holds them (copied verbatim from the
    platform's monitoring page, which is not part of this repository)."""
    return [sql.text(p).split("\n", 1)[1] for p in sql.folder("monitoring")]


def test_seed_queries_run_unchanged(clickhouse, make_tenant, capsys) -> None:
    tenant = make_tenant(("user", "casino"))
    tenant = type(tenant)(
        **{**vars(tenant), "organization_id": "seu_org_id", "brand_id": "seu_brand_id"}
    )
    day = dt.date(2026, 11, 3)
    rows = GENERATORS["user"][0](random.Random(1), tenant, day, 40)
    write_day(tenant, "user", day, rows)
    load_day(clickhouse, tenant, DOMAINS["user"], day, "r")
    queries = _seed_queries()
    assert len(queries) == 4
    with clickhouse.session() as client:
        results = [client.query(q.strip().rstrip(";")).result_rows for q in queries]
    progress, window, gaps, _failures = results
    assert progress[0][2] == "user" and progress[0][3] == 1 and progress[0][5] == 40
    assert window[0][0] == day and window[0][1] == "completed"
    assert len(gaps) >= 179
    assert main(["status", "--org", "seu_org_id"]) == 0
    assert re.search(r"seu_org_id\s+seu_brand_id\s+user\s+1\s+0\s+40\s", capsys.readouterr().out)


def test_redact_hides_dsn_passwords_and_keys() -> None:
    text = "failed on https://default:s3cr3t@host:8443 with key AKIAXYZ"
    assert redact(text, ["AKIAXYZ"]) == "failed on https://default:***@host:8443 with key ***"
