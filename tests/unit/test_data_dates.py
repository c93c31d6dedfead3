"""Issue 29: timestamps with UTC offsets are grouped by the local date written in the file.

A sales file written in Berlin (``+01:00`` in winter, ``+02:00`` in summer) with sales in the
first hours of each month: grouped by month it has 12 months, not 13 with a made-up
"2024-12"; every tool says the months are local time as written, and ``options.utc`` asks
for UTC months instead (and says so). Totals are checked against an independent count.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from planexec import default_registry
from planexec.errors import ToolError
from planexec.tools.listing import workspace_files
from planexec.tools.workspace import Workspace, use_workspace

TOOLS = default_registry()


def call(name: str, **args: Any) -> Any:
    return TOOLS.get(name).invoke(args)


def berlin(day: dt.date, hour: int, minute: int) -> str:
    """The time as a Berlin shop writes it: +02:00 in summer time, +01:00 otherwise."""
    summer = dt.date(2025, 3, 30) <= day < dt.date(2025, 10, 26)
    return f"{day:%Y-%m-%d}T{hour:02}:{minute:02}:00{'+02:00' if summer else '+01:00'}"


def sales() -> list[tuple[str, Decimal]]:
    """Sales on the 1st just after midnight, mid-month, and late on the last day of 2025."""
    rows = []
    for month in range(1, 13):
        first = dt.date(2025, month, 1)
        last = (first + dt.timedelta(days=32)).replace(day=1) - dt.timedelta(days=1)
        rows.append((berlin(first, 0, 30), Decimal(100 + month) + Decimal("0.25")))
        rows.append((berlin(first.replace(day=15), 12, 0), Decimal(200 + 3 * month)))
        rows.append((berlin(last, 23, 45), Decimal(50 + month) + Decimal("0.5")))
    return rows


def months(rows: list[tuple[str, Decimal]], utc: bool = False) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for stamp, value in rows:
        when = dt.datetime.fromisoformat(stamp)
        totals[(when.astimezone(dt.UTC) if utc else when).strftime("%Y-%m")] += value
    return dict(totals)


@pytest.fixture
def ws(tmp_path):
    lines = ["order_time,revenue"] + [f"{s},{v}" for s, v in sales()]
    (tmp_path / "sales.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def by_period(out: dict) -> dict[str, Decimal]:
    return {p["period"]: Decimal(str(p["value"])) for p in out["by_period"]}


def stats(ws, dataset: str = "sales.csv", **options: Any) -> dict:
    with use_workspace(ws):
        return call(
            "calculate_stats",
            dataset=dataset,
            value_column="revenue",
            date_column="order_time",
            options=options or None,
        )


def test_months_are_the_local_months_written_in_the_file(ws):
    out = stats(ws)
    assert by_period(out) == months(sales())
    assert list(by_period(out)) == [f"2025-{m:02}" for m in range(1, 13)]  # no "2024-12"
    assert "local time" in out["dates"] and "+01:00" in out["dates"] and "+02:00" in out["dates"]


def test_utc_months_when_the_caller_asks_and_the_output_says_so(ws):
    out = stats(ws, utc=True)
    assert by_period(out) == months(sales(), utc=True)
    assert "2024-12" in by_period(out) and len(out["by_period"]) == 13
    assert out["dates"].startswith("UTC")


@pytest.mark.parametrize("utc", [False, True])
def test_trends_use_the_same_months_and_say_which(ws, utc):
    with use_workspace(ws):
        out = call(
            "detect_trends",
            dataset="sales.csv",
            value_column="revenue",
            date_column="order_time",
            options={"utc": True} if utc else None,
        )
    expected = months(sales(), utc=utc)
    assert out["periods"] == len(expected)
    assert out["first"]["period"] == min(expected) and out["last"]["period"] == max(expected)
    assert ("UTC" if utc else "local time") in out["dates"].split(" (")[0]


@pytest.mark.parametrize("utc", [False, True])
def test_charts_sum_the_same_months_and_label_them(ws, utc, monkeypatch):
    many = sales() * 10  # over 200 rows: summed per month before drawing
    (ws / "many.csv").write_text(
        "\n".join(["order_time,revenue"] + [f"{s},{v}" for s, v in many]) + "\n"
    )
    with use_workspace(ws):
        out = call(
            "generate_chart",
            kind="line",
            x="order_time",
            y="revenue",
            title="t",
            dataset="many.csv",
            options={"utc": True} if utc else None,
        )
    assert out["points"] == len(months(many, utc=utc))
    assert out["x_label"] == f"order_time (month, {'UTC' if utc else 'local time'})"
    assert ("UTC" if utc else "local time") in out["dates"]


def test_cleaning_keeps_the_local_time_and_the_offset(ws):
    with use_workspace(ws):
        cleaned = call("clean_data", dataset="sales.csv", date_columns=["order_time"])
    assert cleaned["rows_after"] == len(sales())
    assert "local time" in cleaned["converted"]["order_time"]
    frame = pd.read_parquet(ws / cleaned["dataset"])
    written = [dt.datetime.fromisoformat(s) for s, _ in sales()]
    assert list(frame["order_time"]) == [pd.Timestamp(w.replace(tzinfo=None)) for w in written]
    assert list(frame["order_time_utc_offset"]) == [w.isoformat()[-6:] for w in written]
    again = stats(ws, cleaned["dataset"])  # a later step reads the cleaned file the same way
    assert by_period(again) == months(sales())
    assert "local time" in again["dates"]


def test_cleaning_in_utc_when_asked(ws):
    with use_workspace(ws):
        cleaned = call(
            "clean_data", dataset="sales.csv", date_columns=["order_time"], options={"utc": True}
        )
    assert cleaned["converted"]["order_time"] == "datetime (UTC)"
    frame = pd.read_parquet(ws / cleaned["dataset"])
    assert "order_time_utc_offset" not in frame.columns
    assert by_period(stats(ws, cleaned["dataset"])) == months(sales(), utc=True)


def test_duplicates_are_the_same_instant_not_the_same_wall_time(tmp_path):
    """The hour that repeats when summer time ends: same local time, two different sales."""
    rows = ["2025-10-26T02:30:00+02:00,10", "2025-10-26T02:30:00+01:00,10"]
    (tmp_path / "s.csv").write_text("\n".join(["when,amount", *rows]) + "\n")
    with use_workspace(tmp_path):
        cleaned = call("clean_data", dataset="s.csv", date_columns=["when"])
    assert cleaned["removed_duplicates"] == 0 and cleaned["rows_after"] == 2


def test_the_planner_listing_says_the_dates_are_local(ws):
    listing = workspace_files(Workspace(ws))
    assert '"order_time" date (local time, UTC offsets +01:00, +02:00)' in listing


@pytest.mark.parametrize("utc", [False, True])
def test_a_zoned_parquet_column_is_read_in_its_own_zone_unless_utc(tmp_path, utc):
    stamps = ["2025-03-31T23:30:00+02:00", "2025-04-01T00:30:00+02:00", "2025-04-02T12:00:00+02:00"]
    frame = pd.DataFrame(
        {
            "order_time": pd.to_datetime(stamps).tz_convert("Europe/Berlin"),
            "revenue": [10.5, 20.25, 30.0],
        }
    )
    frame.to_parquet(tmp_path / "s.parquet")
    out = stats(tmp_path, "s.parquet", **({"utc": True} if utc else {}))
    expected = {"2025-03": 30.75, "2025-04": 30.0} if utc else {"2025-03": 10.5, "2025-04": 50.25}
    assert {p["period"]: p["value"] for p in out["by_period"]} == expected
    assert ("UTC" if utc else "Europe/Berlin") in out["dates"]


def test_dates_without_offsets_are_as_written_and_say_nothing_more(tmp_path):
    (tmp_path / "s.csv").write_text("order_time,revenue\n2025-01-31 23:30,1\n2025-02-01,2\n")
    out = stats(tmp_path, "s.csv")
    assert by_period(out) == {"2025-01": Decimal(1), "2025-02": Decimal(2)}
    assert "dates" not in out


def test_the_report_says_which_months_it_shows(ws):
    out = stats(ws)
    with use_workspace(ws):
        call("write_report", title="Sales", stats=out, output_path="r.md")
    assert (
        "Periods: local time as written (UTC offsets +01:00, +02:00)." in (ws / "r.md").read_text()
    )


def test_utc_of_a_file_cleaned_in_local_time_is_refused_with_what_to_do(ws):
    with use_workspace(ws):
        cleaned = call("clean_data", dataset="sales.csv", date_columns=["order_time"])
    with pytest.raises(ToolError, match="options.utc=true"):
        stats(ws, cleaned["dataset"], utc=True)


def test_postgres_style_offsets_after_a_fraction_are_local_months(tmp_path):
    """PostgreSQL writes ``.123456+01`` (and leaves out a zero fraction): found by a hostile
    review, such values were grouped in UTC while the output said local time."""
    lines = ["order_time,revenue", "2025-02-01 00:30:00.123456+01,1", "2025-02-01 00:30:00+01,10",
             "2025-01-31T23+05,100", "2025-01-15 12:00:00+01,1000"]  # fmt: skip
    (tmp_path / "pg.csv").write_text("\n".join(lines) + "\n")
    out = stats(tmp_path, "pg.csv")
    assert by_period(out) == {"2025-01": Decimal(1100), "2025-02": Decimal(11)}


def test_a_chart_of_dates_without_offsets_names_no_clock(tmp_path):
    """Found by a hostile review: the axis said UTC for times written without offsets."""
    lines = ["order_time,revenue"] + [f"2025-{m:02}-10 10:00:00,{m}" for m in range(1, 13)] * 25
    (tmp_path / "plain.csv").write_text("\n".join(lines) + "\n")
    with use_workspace(tmp_path):
        out = call("generate_chart", kind="line", x="order_time", y="revenue", title="t",
                   dataset="plain.csv", options={"utc": True})  # fmt: skip
    assert out["x_label"] == "order_time (month)"
