"""The report's formats: one self-contained HTML page (inline CSS and SVG), JSON, CSV, Markdown."""

from __future__ import annotations

import csv
import datetime as dt
import html
import io
import json
from collections.abc import Iterable

from atlas_dagster.core.days import day_ranges
from atlas_dagster.reporting.advice import ClientFailure
from atlas_dagster.reporting.collect import (
    COMPLETED,
    EMPTY,
    FAILED,
    GOLD_NONE,
    GOLD_PARTIAL,
    GOLD_REPLAYED,
    GOLD_STATE_NAMES,
    LOADING,
    MISSING,
    NOT_EXPORTED,
    OUTSIDE,
    REDELIVERED,
    STATE_NAMES,
    TenantReport,
)

# Calendar colours per state (also the legend's): green done, red failed, blue loading, grey
# missing, pale not exported yet; gold rows in amber.
COLOURS = {
    COMPLETED: "#2e9e5b",
    FAILED: "#d64545",
    LOADING: "#3b82f6",
    MISSING: "#c9ced6",
    NOT_EXPORTED: "#f1f2f4",
    EMPTY: "#a7dcbc",
    OUTSIDE: "#ffffff",
    REDELIVERED: "#8b5cf6",
    "G": "#d9a21b",
    "P": "#f1d58a",
    "-": "#e6e8eb",
}
GOLD_CLASS = {GOLD_REPLAYED: "G", GOLD_PARTIAL: "P", GOLD_NONE: "g0"}
STATE_CLASS = {
    COMPLETED: "C",
    EMPTY: "E",
    FAILED: "F",
    LOADING: "L",
    MISSING: "M",
    NOT_EXPORTED: "N",
    OUTSIDE: "O",
    REDELIVERED: "R",
}
# Cell size bounds: 3 years are ~157 week columns, which fit 1,200 px at 7 px a cell.
CALENDAR_WIDTH = 1180
CELL_MIN, CELL_MAX = 5, 14
LABEL_WIDTH = 118
# Failures shown in full on the page; the rest are summarised (all are in the JSON).
FAILURES_SHOWN = 60


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "not known yet"
    if seconds < 60:
        return "under a minute" if seconds > 0 else "nothing left"
    minutes = round(seconds / 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min"]
    return " ".join(p for p in parts[:2] if p) if days else " ".join(p for p in parts if p)


def _day(value: dt.date | None) -> str:
    return value.isoformat() if value else "—"


def summary_rows(report: TenantReport) -> list[dict[str, object]]:
    """One row per domain: the figures every format shows."""
    return [
        {
            "domain": d.domain,
            "days_done": d.done,
            "days_expected": d.expected_days,
            "percent_complete": round(d.percent, 1),
            "days_failed": d.failed,
            "days_not_exported": d.not_exported,
            "days_loading": d.loading,
            "days_missing": d.missing,
            "rows": d.rows,
            "first_day": _day(d.first_day),
            "last_day": _day(d.last_day),
            "eta": duration(d.eta_seconds),
        }
        for d in report.domains
    ]


def as_json(report: TenantReport) -> str:
    failures = [
        {k: (v.isoformat() if isinstance(v, dt.date) else v) for k, v in vars(f).items()}
        for f in report.failures
    ]
    document = {
        "organization_id": report.organization_id,
        "brand_id": report.brand_id,
        "generated_at": report.generated_at.isoformat(),
        "window": {"first_day": _day(report.first_day), "last_day": _day(report.last_day)},
        "expected_through": _day(report.expected_last),
        "percent_complete": round(report.percent, 1),
        "eta": duration(report.eta_seconds),
        "eta_seconds": report.eta_seconds,
        # Events per second across the loads that run at once, as the client's time left uses.
        "rows_per_second": report.pace.rows_per_second * report.pace.parallel
        if report.pace
        else None,
        "domains": summary_rows(report),
        "gold": [vars(g) for g in report.gold],
        "failures": failures,
        "redelivered": [
            {"domain": domain, "day": day.isoformat(), "what_changed": reason}
            for domain, day, reason in report.redelivered
        ],
        "calendar": {
            "first_day": _day(report.first_day),
            "legend": STATE_NAMES | {f"gold:{k}": v for k, v in GOLD_STATE_NAMES.items()},
            "domains": report.calendar,
            "gold": report.gold_calendar,
        },
    }
    return json.dumps(document, indent=2)


def as_csv(report: TenantReport) -> str:
    """One line per day and domain (and gold): the calendar, machine-readable."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["day", "domain", "state"])
    days = report.days()
    for domain, cells in report.calendar.items():
        for day, cell in zip(days, cells, strict=True):
            writer.writerow([day.isoformat(), domain, STATE_NAMES[cell]])
    for day, cell in zip(days, report.gold_calendar, strict=True):
        writer.writerow([day.isoformat(), "gold", GOLD_STATE_NAMES[cell]])
    return out.getvalue()


def as_markdown(report: TenantReport) -> str:
    """The summary table for the asset's metadata."""
    columns = ["domain", "days_done", "days_expected", "percent_complete", "days_failed", "rows"]
    columns += ["first_day", "last_day", "eta"]
    lines = [
        f"**{report.key}**: {report.percent:.1f}% complete, "
        f"{sum(d.failed for d in report.domains)} day(s) failed, loading left: "
        f"{duration(report.eta_seconds)}",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for row in summary_rows(report):
        lines.append("| " + " | ".join(str(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def text_calendar(report: TenantReport, width: int = 90) -> str:
    """The picture in characters (a code block in the UI): one line per domain, a few days a
    character: '█' all done, '×' a failure, '▒' partly, '·' none, ' ' not exported yet."""
    rows = list(report.calendar.items()) + [("gold", _gold_as_states(report.gold_calendar))]
    length = len(report.gold_calendar)
    per = max(1, -(-length // width))
    lines = [f"{per} day(s) a character, {_day(report.first_day)} → {_day(report.last_day)}"]
    for name, cells in rows:
        chars = []
        for start in range(0, length, per):
            chunk = cells[start : start + per]
            chars.append(_chunk_char(chunk))
        lines.append(f"{name:<13}{''.join(chars)}")
    return "```\n" + "\n".join(lines) + "\n```"


def _gold_as_states(cells: str) -> str:
    return (
        cells.replace(GOLD_REPLAYED, COMPLETED)
        .replace(GOLD_PARTIAL, LOADING)
        .replace(GOLD_NONE, MISSING)
    )


def _chunk_char(chunk: str) -> str:
    if FAILED in chunk:
        return "×"
    if set(chunk) <= {NOT_EXPORTED, OUTSIDE}:
        return " "
    if set(chunk) <= {COMPLETED, EMPTY, OUTSIDE}:
        return "█"
    return "▒" if set(chunk) & {COMPLETED, LOADING, REDELIVERED} else "·"


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def calendar_svg(report: TenantReport) -> str:
    """One cell per day and domain, a week per column (Monday on top), a block per domain and
    one for gold; month and year marks above. Three years fit about 1,200 px wide."""
    days = report.days()
    if not days:
        return "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'></svg>"
    offset = days[0].weekday()
    weeks = (offset + len(days) + 6) // 7
    cell = max(CELL_MIN, min(CELL_MAX, (CALENDAR_WIDTH - LABEL_WIDTH) // max(1, weeks)))
    step = cell + 1
    block = 7 * step + 10
    top = 26
    rows = [(d, cells, "domain") for d, cells in report.calendar.items()]
    rows.append(("gold", report.gold_calendar, "gold"))
    width = LABEL_WIDTH + weeks * step + 24  # room for the last month's name
    height = top + block * len(rows)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='calendar of loaded days' "
        "id='calendar' font-family='system-ui, sans-serif'>"
    ]
    parts.extend(_month_marks(days, offset, step))
    for index, (name, cells, kind) in enumerate(rows):
        y0 = top + index * block
        parts.append(
            f"<text x='0' y='{y0 + 3.5 * step + 4}' font-size='13' fill='#222'>{_esc(name)}</text>"
        )
        parts.append(f"<g data-row='{_esc(name)}'>")
        for i, (day, state) in enumerate(zip(days, cells, strict=True)):
            column, weekday = divmod(offset + i, 7)
            css = GOLD_CLASS[state] if kind == "gold" else STATE_CLASS[state]
            label = GOLD_STATE_NAMES[state] if kind == "gold" else STATE_NAMES[state]
            parts.append(
                f"<rect class='{css}' x='{LABEL_WIDTH + column * step}' y='{y0 + weekday * step}'"
                f" width='{cell}' height='{cell}'><title>{day} {_esc(name)}: {label}</title></rect>"
            )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _month_marks(days: list[dt.date], offset: int, step: int) -> Iterable[str]:
    for i, day in enumerate(days):
        if day.day != 1 and i != 0:
            continue
        x = LABEL_WIDTH + ((offset + i) // 7) * step
        if day.month == 1 or (i == 0 and day.month <= 10):
            yield f"<text x='{x}' y='10' font-size='11' font-weight='600'>{day.year}</text>"
        yield f"<text x='{x}' y='22' font-size='10' fill='#555'>{day:%b}</text>"


STYLE = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px 32px;"
    "color:#1f2328;background:#fff;max-width:1280px}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}"
    ".sub{color:#57606a;margin:0 0 16px}"
    ".cards{display:flex;gap:14px;flex-wrap:wrap;margin:12px 0}"
    ".card{border:1px solid #d0d7de;border-radius:8px;padding:10px 16px;min-width:150px}"
    ".card b{display:block;font-size:24px}.card span{color:#57606a;font-size:13px}"
    ".bar{height:10px;background:#e6e8eb;border-radius:5px;overflow:hidden;width:110px;"
    "display:inline-block;vertical-align:middle;margin-right:6px}"
    ".bar i{display:block;height:100%;background:#2e9e5b}"
    "table{border-collapse:collapse;font-size:14px}"
    "th,td{padding:5px 10px;border-bottom:1px solid #e1e4e8;text-align:left;vertical-align:top}"
    "th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".legend span{display:inline-block;margin-right:14px;font-size:13px}"
    ".legend i{display:inline-block;width:11px;height:11px;margin-right:4px;"
    "vertical-align:-1px}"
    "code{font-size:12.5px;background:#f6f8fa;padding:1px 4px;border-radius:4px;"
    "word-break:break-all}"
    ".ok{color:#2e7d4f}.bad{color:#c62828}.note{color:#57606a;font-size:13px}"
    ".lead{font-size:17px;margin:10px 0}h3{font-size:15px;margin:20px 0 6px}"
    "td.day,td.row,td.rows{white-space:nowrap}"
    "#failures{font-size:13px}#failures td.file code{font-size:11.5px}"
    "#failures td.value code{word-break:normal;white-space:nowrap}"
)


def _css() -> str:
    cells = "".join(
        f"rect.{css}{{fill:{COLOURS[state]}}}" for state, css in STATE_CLASS.items()
    ) + "".join(f"rect.{css}{{fill:{COLOURS[state]}}}" for state, css in GOLD_CLASS.items())
    return STYLE + cells


def _legend() -> str:
    items = [(COLOURS[s], STATE_NAMES[s]) for s in STATE_CLASS]
    items += [(COLOURS[s], f"gold {GOLD_STATE_NAMES[s]}") for s in GOLD_CLASS]
    return (
        "<p class='legend'>"
        + "".join(f"<span><i style='background:{c}'></i>{_esc(n)}</span>" for c, n in items)
        + "</p>"
    )


def _cards(report: TenantReport) -> str:
    failed = sum(d.failed for d in report.domains)
    not_exported = sum(d.not_exported for d in report.domains)
    rows = sum(d.rows for d in report.domains)
    cards = [
        ("percent", f"{report.percent:.1f}%", "of the days due are loaded"),
        ("days", f"{report.done_days:,} / {report.expected_days:,}", "days loaded (all domains)"),
        ("rows", f"{rows:,}", "events loaded"),
        ("failed", f"{failed:,}", "days failed (see below)"),
        ("not-exported", f"{not_exported:,}", "days with no file yet"),
        ("eta", duration(report.eta_seconds), "of loading left (estimate)"),
    ]
    return (
        "<div class='cards'>"
        + "".join(
            f"<div class='card' data-card='{k}'><b>{_esc(v)}</b><span>{_esc(t)}</span></div>"
            for k, v, t in cards
        )
        + "</div>"
    )


def _domain_table(report: TenantReport) -> str:
    head = (
        "<tr><th>domain</th><th>progress</th><th>days loaded</th><th>days due</th>"
        "<th>failed</th><th>no file yet</th><th>not tried yet</th><th>events</th>"
        "<th>first day</th><th>last day</th><th>loading left</th></tr>"
    )
    body = []
    for d in report.domains:
        cells = [
            ("done", f"{d.done:,}"),
            ("expected", f"{d.expected_days:,}"),
            ("failed", f"{d.failed:,}"),
            ("not_exported", f"{d.not_exported:,}"),
            ("missing", f"{d.missing:,}"),
            ("rows", f"{d.rows:,}"),
        ]
        body.append(
            f"<tr data-domain='{_esc(d.domain)}'><td><b>{_esc(d.domain)}</b></td>"
            f"<td data-field='percent'><span class='bar'><i style='width:{d.percent:.1f}%'>"
            f"</i></span>{d.percent:.1f}%</td>"
            + "".join(f"<td class='n' data-field='{f}'>{v}</td>" for f, v in cells)
            + f"<td data-field='first_day'>{_day(d.first_day)}</td>"
            f"<td data-field='last_day'>{_day(d.last_day)}</td>"
            f"<td data-field='eta'>{_esc(duration(d.eta_seconds))}</td></tr>"
        )
    return f"<table id='domains'>{head}{''.join(body)}</table>"


def _failure_row(f: ClientFailure) -> str:
    cells = [
        ("day", str(f.day)),
        ("domain", _esc(f.domain)),
        ("file", f"<code>{_esc(f.file)}</code>" if f.file else "—"),
        ("column", _esc(f.column) or "—"),
        ("row", f"{f.first_row:,}" if f.first_row is not None else "—"),
        ("value", f"<code>{_esc(f.value)}</code>" if f.value is not None else "—"),
        ("rows", f"{f.rows:,}" if f.rows is not None else "—"),
        ("problem", _esc(f.problem)),
    ]
    return (
        f"<tr data-failure='{_esc(f.domain)}|{f.day}'>"
        + "".join(f"<td class='{name}'>{value}</td>" for name, value in cells)
        + "</tr>"
    )


def _what_to_change(actionable: list[ClientFailure]) -> str:
    """One line per kind of problem: how many days, in which domains, and the change to make."""
    groups: dict[tuple[str, str], list[ClientFailure]] = {}
    for failure in actionable:
        groups.setdefault((failure.problem, failure.advice), []).append(failure)
    rows = []
    for (problem, advice), items in sorted(groups.items(), key=lambda g: -len(g[1])):
        days = len({(f.domain, f.day) for f in items})
        domains = ", ".join(sorted({f.domain for f in items}))
        newest = max(f.day for f in items)
        rows.append(
            f"<tr><td>{_esc(problem)}</td><td class='n'>{days:,}</td><td>{_esc(domains)}</td>"
            f"<td class='day'>{newest}</td><td><b>{_esc(advice)}</b></td></tr>"
        )
    return (
        "<table id='advice'><tr><th>what is wrong</th><th>days</th><th>domains</th>"
        f"<th>newest</th><th>what to change</th></tr>{''.join(rows)}</table>"
    )


def _not_exported(failures: list[ClientFailure]) -> str:
    if not failures:
        return ""
    by_domain: dict[str, list[dt.date]] = {}
    for failure in failures:
        by_domain.setdefault(failure.domain, []).append(failure.day)
    items = []
    for domain, days in sorted(by_domain.items()):
        spans = ", ".join(
            f"{a}" if a == b else f"{a} → {b} ({(b - a).days + 1} days)"
            for a, b in day_ranges(days)
        )
        items.append(f"<li><b>{_esc(domain)}</b>: {_esc(spans)}</li>")
    return (
        "<h3>Days with no file in the export yet</h3><p class='note'>Each day goes to its own "
        "folder: <code>&lt;domain&gt;/organization_id=…/brand_id=…/year=YYYY/month=MM/day=DD/"
        f"</code>.</p><ul id='not-exported'>{''.join(items)}</ul>"
    )


def _ours(failures: list[ClientFailure]) -> str:
    if not failures:
        return ""
    days = ", ".join(f"{f.day} {f.domain}" for f in failures[:20])
    more = f" and {len(failures) - 20} more" if len(failures) > 20 else ""
    return (
        f"<h3>Retried by Atlas</h3><p class='note' id='ours'>{len(failures)} day(s) stopped on "
        f"Atlas's side; nothing needs to change in your export: {_esc(days)}{more}.</p>"
    )


def _failures(report: TenantReport) -> str:
    actionable = [f for f in report.failures if not f.ours and not f.not_exported]
    not_exported = [f for f in report.failures if f.not_exported]
    ours = [f for f in report.failures if f.ours]
    if not actionable:
        fixes = "<p class='ok' id='failures'>No day to fix in the export.</p>"
    else:
        shown = actionable[:FAILURES_SHOWN]
        more = len(actionable) - len(shown)
        note = f"<p class='note'>… and {more} more, listed in progress.json.</p>" if more else ""
        head = (
            "<tr><th>day</th><th>domain</th><th>file (from your export's root)</th>"
            "<th>column</th><th>first bad row<br>(from 0)</th><th>its value</th>"
            "<th>bad rows</th><th>what is wrong</th></tr>"
        )
        fixes = (
            _what_to_change(actionable)
            + "<h3>Each day, newest first</h3>"
            + f"<table id='failures'>{head}{''.join(_failure_row(f) for f in shown)}</table>"
            + note
        )
    return fixes + _not_exported(not_exported) + _ours(ours) + _redelivered(report)


def _redelivered(report: TenantReport) -> str:
    if not report.redelivered:
        return ""
    rows = "".join(
        f"<tr data-redelivered='{_esc(domain)}|{day}'><td class='day'>{day}</td>"
        f"<td>{_esc(domain)}</td><td>{_esc(reason)}</td></tr>"
        for domain, day, reason in report.redelivered[:FAILURES_SHOWN]
    )
    more = len(report.redelivered) - FAILURES_SHOWN
    note = f"<p class='note'>… and {more} more, listed in progress.json.</p>" if more > 0 else ""
    return (
        "<h3>Delivered again since loaded</h3><p class='note'>These days hold the rows of the "
        "earlier delivery until Atlas loads them again.</p><table id='redelivered'><tr>"
        f"<th>day</th><th>domain</th><th>what changed</th></tr>{rows}</table>{note}"
    )


def _gold(report: TenantReport) -> str:
    if not report.gold:
        return "<p class='note'>No gold table applies to your domains.</p>"
    rows = "".join(
        f"<tr data-gold='{_esc(g.table)}'><td>{_esc(g.table)}</td>"
        f"<td class='n' data-field='replayed'>{g.days_replayed:,}</td>"
        f"<td class='n' data-field='waiting'>{g.days_waiting:,}</td></tr>"
        for g in report.gold
    )
    return (
        "<table id='gold'><tr><th>gold table</th><th>days computed</th>"
        f"<th>days loaded, waiting for gold</th></tr>{rows}</table>"
    )


def _lead(report: TenantReport) -> str:
    """The summary in one sentence, as a client would ask: how far, what to fix, how long."""
    failed = sum(1 for f in report.failures if not f.ours and not f.not_exported)
    fix_days = len(
        {(f.domain, f.day) for f in report.failures if not f.ours and not f.not_exported}
    )
    no_file = sum(d.not_exported for d in report.domains)
    parts = [f"Your history is {report.percent:.1f}% loaded."]
    if failed:
        parts.append(f"{fix_days:,} day(s) need a change in the export (below).")
    if no_file:
        parts.append(f"{no_file:,} day(s) have no file yet.")
    if report.eta_seconds:
        parts.append(f"Loading what is left takes about {duration(report.eta_seconds)}.")
    return " ".join(parts)


def as_html(report: TenantReport) -> str:
    rate = report.pace
    # The rate is the target's, measured over every client's loads: how many days it was
    # measured on would tell this client the size of the others' histories, so it is not shown.
    basis = (
        f"Estimates assume loading continues at the "
        f"{rate.rows_per_second * rate.parallel:,.0f} events per second measured on our system."
        if rate
        else "Estimates appear once the first days are loaded."
    )
    due = (
        f"days due through {_day(report.expected_last)}"
        if report.expected_last
        else "no day is due yet"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Historical data load: {_esc(report.key)}</title>
<style>{_css()}</style></head>
<body>
<h1>Historical data load — {_esc(report.organization_id)} / {_esc(report.brand_id)}</h1>
<p class="sub">Window {_day(report.first_day)} → {_day(report.last_day)} ({due}) ·
report generated {report.generated_at:%Y-%m-%d %H:%M} UTC</p>
<p class="lead" id="lead">{_esc(_lead(report))}</p>
{_cards(report)}
{_domain_table(report)}
<p class="note">{_esc(basis)}</p>
<h2>Calendar</h2>
{_legend()}
{calendar_svg(report)}
<h2>Days to fix in your export</h2>
{_failures(report)}
<h2>Gold aggregates</h2>
{_gold(report)}
<p class="note">progress.json and progress.csv beside this page hold the same figures.</p>
</body></html>
"""
