"""Pre-flight, as an operator runs it before a client's first load: `backfill --dry-run` names the
way each tool's types are read and the days its footers refuse, `check-export` also every row's
refusal; neither writes a row or a log line."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from atlas_dagster.cli.demo_data import GENERATORS, arrow_table
from atlas_dagster.cli.main import main
from atlas_dagster.exports.layout import SUCCESS_MARKER, tenant_root
from atlas_dagster.resources.clickhouse import ClickHouseResource
from atlas_dagster.tenants import load_tenants
from atlas_dagster_tests.conftest import scalar
from testkit.dagster_stack import write_tenants

FIRST, LAST = dt.date(2026, 9, 5), dt.date(2026, 9, 8)
NEGATIVE_DAY, FOOTER_DAY, EMPTY_DAY = dt.date(2026, 9, 8), dt.date(2026, 9, 7), dt.date(2026, 9, 6)


def _int96_day(tenant, day: dt.date, amounts: list[Decimal] | None = None, other_org=False):
    """INT96, DECIMAL(38,4), unpadded month=9/day=7, written by pyarrow (the statistics of a
    row of another tenant, and a negative amount without statistics, no tool writes at will)."""
    rows = GENERATORS["casino"][0](random.Random(str(day)), tenant, day, 20)
    if other_org:
        rows[4]["organization_id"] = "someone-else"
    table = arrow_table("casino", rows)
    money = [Decimal(r["amount"]) for r in rows] if amounts is None else amounts
    index = table.schema.get_field_index("amount")
    table = table.set_column(index, "amount", pa.array(money, pa.decimal128(38, 4)))
    root = Path(tenant_root(tenant, "casino")[len("file://") :])
    folder = root / f"year={day.year}/month={day.month}/day={day.day}"
    folder.mkdir(parents=True, exist_ok=True)
    name = "part-00000-c000.snappy.parquet"
    pq.write_table(table, folder / name, use_deprecated_int96_timestamps=True)
    return len(rows)


@pytest.fixture
def int96_tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tenants_file = write_tenants(
        tmp_path / "tenants.yaml",
        [
            {
                "organization_id": "int96",
                "brand_id": "main",
                "source": f"file://{tmp_path / 'exports'}",
                "start_date": FIRST.isoformat(),
                "end_date": LAST.isoformat(),
                "domains": ["casino"],
            }
        ],
    )
    dsn = f"chdb://{tmp_path / 'clickhouse'}"
    monkeypatch.setenv("ATLAS_TENANTS_FILE", str(tenants_file))
    monkeypatch.setenv("ATLAS_CLICKHOUSE_DSN", dsn)
    [tenant] = load_tenants(tenants_file)
    _int96_day(tenant, FIRST)
    _int96_day(tenant, FOOTER_DAY, other_org=True)  # footers show another tenant's id
    rows = _int96_day(tenant, NEGATIVE_DAY)
    amounts = [Decimal("1.5")] * rows
    amounts[9] = Decimal("-2")  # only a read of the rows finds it: no statistics in its footer
    _int96_day(tenant, NEGATIVE_DAY, amounts)
    (tmp_path / "exports" / "casino" / SUCCESS_MARKER).write_bytes(b"")  # EMPTY_DAY: no folder
    return tenant, ClickHouseResource(dsn=dsn)


def _logged(clickhouse: ClickHouseResource) -> int:
    return int(scalar(clickhouse, "SELECT count() FROM atlas.backfill_log"))


def test_dry_run_reads_the_types_and_names_the_footer_refusals(int96_tenant, capsys) -> None:
    _, clickhouse = int96_tenant
    assert main(["backfill", "--org", "int96", "--brand", "main", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "event_timestamp: INT96 (Spark/Hive/Impala legacy) → DateTime64(6, 'UTC')" in out
    assert "amount: DECIMAL(38, 4) → read as Decimal(38, 4), stored as Decimal(18, 4)" in out
    assert "refused before any INSERT (listing and footers): 1 tenant-day(s)" in out
    footer_line = next(line for line in out.splitlines() if str(FOOTER_DAY) in line)
    assert "month=9/day=7/part-00000-c000.snappy.parquet: column organization_id" in footer_line
    assert _logged(clickhouse) == 0


def test_check_export_names_every_refusal_and_writes_nothing(int96_tenant, capsys) -> None:
    _, clickhouse = int96_tenant
    assert main(["check-export", "--org", "int96", "--brand", "main"]) == 1
    out = capsys.readouterr().out
    assert "casino: 4 day(s): 1 no events, 1 passes, 2 refused" in out
    negative = out.split(f"  {NEGATIVE_DAY} refused: ", 1)[1].split("\n  20", 1)[0]
    assert "part-00000-c000.snappy.parquet: column amount is negative in 1 row(s)" in negative
    assert "first at row 9" in negative
    assert any(line.startswith(f"  {FOOTER_DAY} refused") for line in out.splitlines())
    assert _logged(clickhouse) == 0
