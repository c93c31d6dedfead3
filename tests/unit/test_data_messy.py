"""Each messy input of issue 11 is read right (numbers checked independently) or refused."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal

import pandas as pd
import pytest

from planexec.errors import ToolError
from planexec.tools.data import (
    calculate_stats,
    clean_data,
    detect_trends,
    generate_chart,
    load_csv,
)
from planexec.tools.workspace import use_workspace

PRODUCTS = ["Widget A", "Widget B", "Gadget X", "Gizmo Ü"]


def rows() -> list[tuple[dt.date, str, Decimal]]:
    """120 sales in 2025 with day numbers above 12 and revenue growing month by month."""
    out = []
    for i in range(120):
        day = dt.date(2025, 1 + i % 12, 1 + (i * 7) % 28)
        out.append((day, PRODUCTS[i % 4], Decimal(1000 + 37 * i) + Decimal(i % 100) / 100))
    return out


def monthly(data: list[tuple[dt.date, str, Decimal]]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for day, _, value in data:
        totals[day.strftime("%Y-%m")] += value
    return dict(totals)


def by_product(data: list[tuple[dt.date, str, Decimal]]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for _, product, value in data:
        totals[product] += value
    return dict(totals)


def assert_right(stats: dict, data: list[tuple[dt.date, str, Decimal]]) -> None:
    assert Decimal(str(stats["total"])) == sum(v for _, _, v in data)
    assert stats["rows"] == len(data)
    got = {p["period"]: Decimal(str(p["value"])) for p in stats["by_period"]}
    assert got == monthly(data)
    if "breakdown" in stats:
        groups = {b["group"]: Decimal(str(b["value"])) for b in stats["breakdown"]}
        assert groups == by_product(data)


def write(ws, name: str, lines: list[str], encoding: str = "utf-8") -> None:
    (ws / name).write_bytes(("\n".join(lines) + "\n").encode(encoding))


def stats_of(ws, name: str, **extra) -> dict:
    with use_workspace(ws):
        return calculate_stats.invoke(
            {
                "dataset": name,
                "value_column": "revenue",
                "date_column": "date",
                "group_by": "product",
                **extra,
            }
        )


def test_day_first_dates_are_detected_from_the_data(tmp_path):
    data = rows()
    write(
        tmp_path, "s.csv", ["date,product,revenue"] + [f"{d:%d/%m/%Y},{p},{v}" for d, p, v in data]
    )
    assert_right(stats_of(tmp_path, "s.csv"), data)
    with use_workspace(tmp_path):
        cleaned = clean_data.invoke({"dataset": "s.csv"})
        trend = detect_trends.invoke(
            {"dataset": cleaned["dataset"], "value_column": "revenue", "date_column": "date"}
        )
    assert cleaned["rows_after"] == len(data) and cleaned["removed_null_rows"] == 0
    assert trend["direction"] == "up" and trend["periods"] == 12


def test_ambiguous_day_month_dates_are_refused_with_what_to_pass(tmp_path):
    write(tmp_path, "s.csv", ["date,revenue", "01/02/2025,1", "03/04/2025,2", "05/06/2025,3"])
    with pytest.raises(ToolError, match=r"could be day- or month-first.*date_format"):
        stats_of(tmp_path, "s.csv", group_by=None)
    stats = stats_of(tmp_path, "s.csv", group_by=None, options={"date_format": "dayfirst"})
    assert [p["period"] for p in stats["by_period"]] == ["2025-02", "2025-04", "2025-06"]


def test_currency_strings_are_numbers_with_their_unit(tmp_path):
    data = rows()
    write(
        tmp_path,
        "s.csv",
        ["date,product,revenue"] + [f'{d:%Y-%m-%d},{p},"${v:,.2f}"' for d, p, v in data],
    )
    stats = stats_of(tmp_path, "s.csv")
    assert_right(stats, data)
    assert stats["unit"] == "USD"
    assert any(Decimal(str(v)) >= 1000 for v in [stats["min"]])  # "$1,000.00" is 1000, not 1


def test_a_column_that_is_mostly_text_is_refused_not_summed_as_nulls(tmp_path):
    write(
        tmp_path,
        "s.csv",
        ["date,revenue"] + [f"2025-01-0{i},pending" for i in range(1, 8)] + ["2025-01-09,5"],
    )
    with pytest.raises(ToolError, match=r"column 'revenue': 7 of 8 values are not numbers"):
        stats_of(tmp_path, "s.csv", group_by=None)


def test_padded_text_groups_once_on_pandas_string_dtype(tmp_path):
    data = rows()
    write(
        tmp_path,
        "s.csv",
        ["date,product,revenue"]
        + [
            f"{d:%Y-%m-%d},{'  ' + p + ' ' if i % 2 else p},{v}" for i, (d, p, v) in enumerate(data)
        ],
    )
    assert_right(stats_of(tmp_path, "s.csv"), data)
    with use_workspace(tmp_path):
        cleaned = clean_data.invoke({"dataset": "s.csv"})
    clean = pd.read_parquet(tmp_path / cleaned["dataset"])
    assert sorted(clean["product"].unique()) == sorted(PRODUCTS)


def test_excel_serial_dates_become_dates(tmp_path):
    data = rows()
    serial = lambda d: (d - dt.date(1899, 12, 30)).days  # noqa: E731
    write(
        tmp_path, "s.csv", ["date,product,revenue"] + [f"{serial(d)},{p},{v}" for d, p, v in data]
    )
    assert_right(stats_of(tmp_path, "s.csv"), data)


def test_numbers_that_are_not_serial_dates_are_refused(tmp_path):
    write(tmp_path, "s.csv", ["date,revenue", "1,5", "2,6", "3,7"])
    with pytest.raises(ToolError, match="not Excel serial dates.*date_format"):
        stats_of(tmp_path, "s.csv", group_by=None)


def test_semicolon_csv_with_decimal_commas(tmp_path):
    data = rows()
    write(
        tmp_path,
        "s.csv",
        ["date;product;revenue"]
        + [f"{d:%d.%m.%Y};{p};{str(v).replace('.', ',')}" for d, p, v in data],
    )
    with use_workspace(tmp_path):
        loaded = load_csv.invoke({"path": "s.csv"})
    assert list(loaded["columns"]) == ["date", "product", "revenue"]
    assert loaded["source"]["delimiter"] == ";" and loaded["source"]["decimal"] == ","
    assert_right(stats_of(tmp_path, "s.csv"), data)


def test_european_thousands_in_quoted_amounts(tmp_path):
    data = rows()
    write(
        tmp_path,
        "s.csv",
        ["date;product;revenue"]
        + [
            f"{d:%Y-%m-%d};{p};{v:,.2f} €".replace(",", "_").replace(".", ",").replace("_", ".")
            for d, p, v in data
        ],
    )
    stats = stats_of(tmp_path, "s.csv")
    assert_right(stats, data)
    assert stats["unit"] == "EUR"


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1", "utf-8-sig"])
def test_other_encodings_are_read_with_their_text_intact(tmp_path, encoding):
    data = rows()
    write(
        tmp_path,
        "s.csv",
        ["date,product,revenue"] + [f"{d:%Y-%m-%d},{p},{v}" for d, p, v in data],
        encoding=encoding,
    )
    stats = stats_of(tmp_path, "s.csv")
    assert_right(stats, data)
    assert "Gizmo Ü" in {b["group"] for b in stats["breakdown"]}


def test_a_wrong_encoding_given_explicitly_is_refused_with_what_to_pass(tmp_path):
    write(tmp_path, "s.csv", ["date,product,revenue", "2025-01-01,Ü,1"], encoding="latin-1")
    with pytest.raises(ToolError, match="not valid utf-8.*options.encoding"):
        stats_of(tmp_path, "s.csv", options={"encoding": "utf-8"})


def test_xlsx_is_read_and_old_xls_is_refused(tmp_path):
    data = rows()
    frame = pd.DataFrame(
        {
            "date": [pd.Timestamp(d) for d, _, _ in data],
            "product": [p for _, p, _ in data],
            "revenue": [float(v) for _, _, v in data],
        }
    )
    frame.to_excel(tmp_path / "s.xlsx", index=False)
    assert_right(stats_of(tmp_path, "s.xlsx"), data)
    (tmp_path / "old.xls").write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(ToolError, match=r"old \.xls workbook: save it as \.xlsx or CSV"):
        stats_of(tmp_path, "old.xls")


def test_mixed_utc_offsets_are_normalised_to_utc_when_asked(tmp_path):
    stamps = [
        "2025-03-30T01:30:00+01:00",
        "2025-03-31T23:30:00+02:00",
        "2025-04-01T00:30:00+02:00",
        "2025-04-01T03:00:00+02:00",
        "2025-10-26T02:30:00+01:00",
        "2025-11-01T00:30:00+01:00",
    ]
    values = [
        Decimal("10.5"),
        Decimal("20.25"),
        Decimal("30"),
        Decimal("40"),
        Decimal("5"),
        Decimal("7.75"),
    ]
    write(
        tmp_path,
        "s.csv",
        ["date,revenue"] + [f"{s},{v}" for s, v in zip(stamps, values, strict=True)],
    )
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for s, v in zip(stamps, values, strict=True):
        expected[dt.datetime.fromisoformat(s).astimezone(dt.UTC).strftime("%Y-%m")] += v
    stats = stats_of(tmp_path, "s.csv", group_by=None, options={"utc": True})
    assert {p["period"]: Decimal(str(p["value"])) for p in stats["by_period"]} == expected
    assert expected["2025-03"] == Decimal("60.75")  # 00:30+02:00 on 1 April is March in UTC
    local = stats_of(tmp_path, "s.csv", group_by=None)  # by default: the dates as written
    assert {p["period"]: Decimal(str(p["value"])) for p in local["by_period"]} == {
        "2025-03": Decimal("30.75"),
        "2025-04": Decimal("70"),
        "2025-10": Decimal("5"),
        "2025-11": Decimal("7.75"),
    }


def test_header_only_file_is_refused(tmp_path):
    write(tmp_path, "s.csv", ["date,product,revenue"])
    for call in (
        lambda: stats_of(tmp_path, "s.csv"),
        lambda: load_csv.invoke({"path": "s.csv"}),
        lambda: clean_data.invoke({"dataset": "s.csv"}),
        lambda: detect_trends.invoke(
            {"dataset": "s.csv", "value_column": "revenue", "date_column": "date"}
        ),
        lambda: generate_chart.invoke(
            {"kind": "line", "x": "date", "y": "revenue", "title": "t", "dataset": "s.csv"}
        ),
    ):
        with use_workspace(tmp_path), pytest.raises(ToolError, match="header but no rows"):
            call()
    assert not (tmp_path / "chart.png").exists()  # no chart (nor report) of nothing


def test_explicit_options_override_sniffing(tmp_path):
    write(tmp_path, "s.txt", ["date|revenue", "2025-01-01|1,5", "2025-02-01|2,5", "2025-03-01|4,5"])
    stats = stats_of(tmp_path, "s.txt", group_by=None, options={"delimiter": "|", "decimal": ","})
    assert stats["total"] == 8.5


def test_missing_column_names_the_columns_there_are(tmp_path):
    write(tmp_path, "s.csv", ["order_date,amount", "2025-01-01,1"])
    with pytest.raises(
        ToolError, match=r"no column 'revenue' in 's.csv' \(columns: order_date, amount\)"
    ):
        stats_of(tmp_path, "s.csv", group_by=None)


def test_a_column_mixing_decimal_notations_is_refused(tmp_path):
    write(
        tmp_path,
        "s.csv",
        ["date,revenue", '2025-01-31,"1.234.567"', '2025-02-01,"-$5.00"', '2025-03-01,"(3.00)"'],
    )
    with pytest.raises(ToolError, match=r"1 of 3 values are not numbers \(e.g. '1.234.567'\)"):
        stats_of(tmp_path, "s.csv", group_by=None)


def test_spaces_as_thousands_negatives_and_infinity(tmp_path):
    write(
        tmp_path,
        "s.csv",
        ["date;revenue", "2025-01-31;1 234,50", '2025-02-01;"(12,5)"', "2025-03-01;-3"],
    )
    stats = stats_of(tmp_path, "s.csv", group_by=None)
    assert [p["value"] for p in stats["by_period"]] == [1234.5, -12.5, -3.0]
    write(tmp_path, "t.csv", ["date,revenue", "2025-01-31,1e400", "2025-02-01,5"])
    with pytest.raises(ToolError, match="not finite numbers"):
        stats_of(tmp_path, "t.csv", group_by=None)


@pytest.mark.parametrize("huge", ["1e400", "-1e400", "$1e400", "(1e400)", "1e400 €"])
def test_an_overflowing_number_is_named_as_such_in_any_notation(tmp_path, huge):
    """Read as text (a currency, or pandas 2's CSV reader) or as a float: the same message."""
    write(tmp_path, "t.csv", ["date,revenue", f'2025-01-31,"{huge}"', '2025-02-01,"5"'])
    with pytest.raises(ToolError, match=r"1 of 2 values are not finite numbers"):
        stats_of(tmp_path, "t.csv", group_by=None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"encoding": "bogus"}, "unknown encoding: bogus"),
        ({"delimiter": "ab"}, "delimiter"),
        ({"date_format": "%Q"}, "date_format '%Q' is not usable"),
    ],
)
def test_bad_reading_options_are_one_line_tool_errors(tmp_path, options, message):
    write(tmp_path, "s.csv", ["date,revenue", "2025-01-31,1"])
    with pytest.raises(ToolError, match=message) as caught:
        stats_of(tmp_path, "s.csv", group_by=None, options=options)
    assert "\n" not in str(caught.value)


def test_a_workbook_sheet_is_chosen_by_name_or_index_and_a_missing_one_refused(tmp_path):
    data = rows()
    frame = pd.DataFrame(
        {
            "date": [pd.Timestamp(d) for d, _, _ in data],
            "product": [p for _, p, _ in data],
            "revenue": [float(v) for _, _, v in data],
        }
    )
    with pd.ExcelWriter(tmp_path / "book.xlsx") as book:
        pd.DataFrame({"note": ["cover sheet"]}).to_excel(book, sheet_name="Cover", index=False)
        frame.to_excel(book, sheet_name="Sales 2025", index=False)
    assert_right(stats_of(tmp_path, "book.xlsx", options={"sheet": "Sales 2025"}), data)
    assert_right(stats_of(tmp_path, "book.xlsx", options={"sheet": 1}), data)
    with pytest.raises(ToolError, match="revenue") as first_sheet:
        stats_of(tmp_path, "book.xlsx")  # the first sheet is the cover: no revenue column
    assert "\n" not in str(first_sheet.value)
    with pytest.raises(ToolError, match="Sales 2026") as missing:
        stats_of(tmp_path, "book.xlsx", options={"sheet": "Sales 2026"})
    assert "\n" not in str(missing.value)


def test_timezone_aware_parquet_is_read_in_utc_when_asked(tmp_path):
    stamps = ["2025-03-31T23:30:00+02:00", "2025-04-01T00:30:00+02:00", "2025-04-02T12:00:00+02:00"]
    frame = pd.DataFrame(
        {
            "date": pd.to_datetime(stamps).tz_convert("Europe/Berlin"),
            "revenue": [10.5, 20.25, 30.0],
        }
    )
    frame.to_parquet(tmp_path / "s.parquet")
    stats = stats_of(tmp_path, "s.parquet", group_by=None, options={"utc": True})
    assert {p["period"]: p["value"] for p in stats["by_period"]} == {
        "2025-03": 30.75,  # 23:30 and 00:30 (+02:00) on 31 March / 1 April are March in UTC
        "2025-04": 30.0,
    }


def test_load_csv_counts_duplicate_rows_exactly(tmp_path):
    lines = [f"2025-01-{1 + i % 28:02},{PRODUCTS[i % 4]},{i % 7}" for i in range(1000)]
    write(tmp_path, "s.csv", ["date,product,revenue"] + lines + lines[:13] + [lines[0]] * 3)
    with use_workspace(tmp_path):
        loaded = load_csv.invoke({"path": "s.csv"})
    expected = pd.read_csv(tmp_path / "s.csv").duplicated().sum()
    assert loaded["duplicate_rows"] == expected
    assert loaded["rows"] == 1016
