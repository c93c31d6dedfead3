"""Sniffing a text table's encoding, delimiter and decimal mark from its first bytes.

Hand-rolled (a few lines each) because the standard-library ``csv.Sniffer`` guesses wrong on
quoted numbers with commas, and an encoding detector guesses freely on short samples: here a
BOM decides, then UTF-8 if it decodes, then cp1252 (said so in the result, never silent).
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections import Counter

SAMPLE_BYTES = 64 * 1024
DELIMITERS = (",", ";", "\t", "|")
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
COMMA_DECIMAL = re.compile(r"^-?\d+,\d+$")
POINT_DECIMAL = re.compile(r"^-?\d+\.\d+$")


def sniff_encoding(head: bytes) -> str:
    """Return the encoding of a file that starts with ``head``."""
    for bom, name in BOMS:
        if head.startswith(bom):
            return name
    if head[:2000].count(b"\x00") > len(head[:2000]) // 4:  # UTF-16 without a BOM
        even_nuls = head[0:2000:2].count(b"\x00")
        return "utf-16-be" if even_nuls > head[1:2000:2].count(b"\x00") else "utf-16-le"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the sample's end
            return "cp1252"
    return "utf-8"


def sniff_delimiter(text: str) -> str:
    """Return the delimiter that splits the sample's lines into the most, consistent fields."""
    lines = text.splitlines()[:50]
    if len(lines) > 1 and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the last line may be cut by the sample
    best, best_fields = ",", 1
    for delimiter in DELIMITERS:
        widths = Counter(
            len(row)
            for row in csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter)
            if row
        )
        if not widths:
            continue
        width, count = widths.most_common(1)[0]
        if width > best_fields and count >= 0.9 * sum(widths.values()):
            best, best_fields = delimiter, width
    return best


def sniff_decimal(text: str, delimiter: str) -> str:
    """Return "," when the sample's unquoted numbers use decimal commas, else "."."""
    if delimiter == ",":
        return "."
    cells = [c.strip() for row in csv.reader(io.StringIO(text), delimiter=delimiter) for c in row]
    commas = sum(1 for c in cells if COMMA_DECIMAL.match(c))
    points = sum(1 for c in cells if POINT_DECIMAL.match(c))
    return "," if commas > points else "."
