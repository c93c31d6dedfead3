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


# Issue 33: a column mixing ISO dates with day/month-first ones is read, value by value.
# ISO values are year-first and never ambiguous; the day/month order of the others is the
# option's, or inferred when one of them settles it; an error lists only values that parse
# under no rule, never one that parsed.

ISO = ["2025-01-03", "2025-01-10", "2025-01-15", "2025-01-20"]


def clean_dates(tmp_path, values: list[str], **options: Any) -> pd.Series:
    """Clean a CSV of ``values`` as the planner calls the tool; return the dates written."""
    lines = ["order_date,amount"] + [f"{v},{i}" for i, v in enumerate(values, 1)]
    (tmp_path / "mixed.csv").write_text("\n".join(lines) + "\n")
    with use_workspace(tmp_path):
        cleaned = call("clean_data", dataset="mixed.csv", options=options or None)
    assert cleaned["converted"]["order_date"].startswith("datetime")
    assert cleaned["rows_after"] == len(values) and not cleaned["unreadable_values"]
    return pd.read_parquet(tmp_path / cleaned["dataset"])["order_date"]


def clean_error(tmp_path, values: list[str], **options: Any) -> str:
    lines = ["order_date,amount"] + [f"{v},{i}" for i, v in enumerate(values, 1)]
    (tmp_path / "mixed.csv").write_text("\n".join(lines) + "\n")
    with use_workspace(tmp_path), pytest.raises(ToolError) as caught:
        call("clean_data", dataset="mixed.csv", options=options or None)
    return str(caught.value)


def stamps(*values: str) -> list[pd.Timestamp]:
    return [pd.Timestamp(v) for v in values]


@pytest.mark.parametrize("options", [{}, {"date_format": "monthfirst"}])
def test_iso_dates_with_one_month_first_date_are_read(tmp_path, options):
    """The report: "4 of 5 values are not dates (e.g. '2025-01-03' ...)", with or without
    the option. 01/28/2025 can only be month-first."""
    dates = clean_dates(tmp_path, [*ISO, "01/28/2025"], **options)
    assert list(dates) == stamps(*ISO, "2025-01-28")


@pytest.mark.parametrize("options", [{}, {"date_format": "dayfirst"}])
def test_iso_dates_with_a_day_first_date_are_read(tmp_path, options):
    assert list(clean_dates(tmp_path, [*ISO, "28/01/2025"], **options)) == stamps(
        *ISO, "2025-01-28"
    )


def test_iso_dates_with_dotted_dates_are_day_first(tmp_path):
    assert list(clean_dates(tmp_path, [*ISO, "28.01.2025", "05.02.2025"])) == stamps(
        *ISO, "2025-01-28", "2025-02-05"
    )


def test_iso_times_with_month_first_times_keep_the_time(tmp_path):
    values = ["2025-01-03 09:15", "2025-01-10T17:00:00", "01/28/2025 14:30", "2/3/25 08:00"]
    assert list(clean_dates(tmp_path, values)) == stamps(
        "2025-01-03 09:15", "2025-01-10 17:00", "2025-01-28 14:30", "2025-02-03 08:00"
    )


def test_the_option_decides_an_order_the_values_leave_open(tmp_path):
    message = clean_error(tmp_path, [*ISO, "01/02/2025"])
    assert "could be day- or month-first" in message and "'01/02/2025'" in message
    assert "2025-01-03" not in message
    month_first = clean_dates(tmp_path, [*ISO, "01/02/2025"], date_format="monthfirst")
    assert month_first.iloc[-1] == pd.Timestamp("2025-01-02")
    day_first = clean_dates(tmp_path, [*ISO, "01/02/2025"], date_format="dayfirst")
    assert day_first.iloc[-1] == pd.Timestamp("2025-02-01")


def test_the_error_lists_only_values_that_do_not_parse(tmp_path):
    message = clean_error(tmp_path, [*ISO, "01/28/2025", "soon"])
    assert "1 of 6 values are not dates (e.g. 'soon')" in message
    assert "2025-01" not in message and "01/28/2025" not in message


def test_a_value_the_option_rules_out_is_the_only_one_listed(tmp_path):
    message = clean_error(tmp_path, [*ISO, "01/28/2025", "28/01/2025"], date_format="monthfirst")
    assert "1 of 6 values are not dates (e.g. '28/01/2025')" in message
    assert "2025-01" not in message and "01/28/2025" not in message


def test_day_first_and_month_first_together_name_one_of_each(tmp_path):
    message = clean_error(tmp_path, [*ISO, "01/28/2025", "28/01/2025"])
    assert "mixes day-first (e.g. '28/01/2025') and month-first (e.g. '01/28/2025')" in message
    assert "2025-01" not in message


def test_a_month_first_date_after_a_thousand_iso_dates_is_read_not_nulled(tmp_path):
    """The order was guessed from the first 1,000 values: one further down became a null."""
    days = pd.date_range("2022-01-01", periods=1500).strftime("%Y-%m-%d").tolist()
    dates = clean_dates(tmp_path, [*days, "01/28/2026"])
    assert dates.iloc[-1] == pd.Timestamp("2026-01-28") and dates.notna().all()


def test_an_explicit_format_still_reads_the_iso_values(tmp_path):
    dates = clean_dates(tmp_path, [*ISO, "28|01|2025"], date_format="%d|%m|%Y")
    assert list(dates) == stamps(*ISO, "2025-01-28")


def test_a_mixed_column_is_a_date_to_the_planner_and_groups_by_month(tmp_path):
    lines = ["order_date,revenue"] + [f"{v},10" for v in [*ISO, "02/28/2025"]]
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    assert '"order_date" date e.g.' in workspace_files(Workspace(tmp_path))
    with use_workspace(tmp_path):
        out = call("calculate_stats", dataset="s.csv", value_column="revenue",
                   date_column="order_date")  # fmt: skip
    assert by_period(out) == {"2025-01": Decimal(40), "2025-02": Decimal(10)}
