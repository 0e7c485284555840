"""Dated and numeric statements: hand-written expectations, and bounded work on hostile text."""

from __future__ import annotations

import time

from sailorfog.extract import extract_dates, extract_numbers, extract_statements

TEXT = ("Albert Einstein (14 March 1879 – 18 April 1955) was born in Ulm. In 1905 he wrote 4 papers. "
        "The city has 126,329 inhabitants and covers 118.69 km2. Caesar died on March 15, 44 BC. "
        "Its budget was $3.5 million in March 2010. About 45% of them won 3 in a row. "
        "The 1990s saw 1500 people there. He lived 1850–1900.")


def test_dates():
    got = [(d["text"], d["year"], d["month"], d["day"]) for d in extract_dates(TEXT)]
    assert got == [("14 March 1879", 1879, 3, 14), ("18 April 1955", 1955, 4, 18), ("1905", 1905, None, None),
                   ("March 15, 44 BC", -44, 3, 15), ("March 2010", 2010, 3, None), ("1850", 1850, None, None),
                   ("1900", 1900, None, None)]
    first = extract_dates(TEXT)[0]
    assert first["sentence"].startswith("Albert Einstein (14 March 1879") and first["sentence"].endswith("Ulm.")
    assert extract_dates("It had 1500 members.") == []  # a bare number is no year without a cue


def test_numbers():
    got = [(n["text"], n["value"], n["unit"]) for n in extract_numbers(TEXT)]
    assert got == [("126,329 inhabitants", 126329.0, "inhabitants"), ("118.69 km2", 118.69, "km2"),
                   ("$3.5 million", 3_500_000.0, "USD"), ("45%", 45.0, "%"), ("1500 people", 1500.0, "people")]
    assert extract_numbers(TEXT)[3]["sentence"] == "About 45% of them won 3 in a row."


def test_limits_bound_the_work():
    dates, numbers = extract_statements(TEXT, max_items=2)
    assert len(dates) == 2 and len(numbers) == 2
    assert extract_dates(TEXT, max_chars=60) == extract_dates(TEXT[:60])
    hostile = "1" * 200_000 + " March " * 50_000 + "(" * 100_000 + "1,0" * 100_000
    start = time.perf_counter()
    extract_statements(hostile, max_chars=len(hostile))
    assert time.perf_counter() - start < 5  # linear: well under a second; quadratic would take minutes
