"""Dated and numeric statements in page text: the raw material of time and quantity clues.

Every routine is one left-to-right regex pass (no nested quantifiers, so linear time) over
text cut to ``max_chars`` first, and returns at most ``max_items`` statements, each with
the sentence it stands in (the evidence a clue is written from).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any

from wiki_sim.sentences import sentence_spans

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_MONTH_NUM = {m: i + 1 for i, m in enumerate(MONTHS)}
_M = "|".join(MONTHS)


def _era(n: int) -> str:
    return rf"(?:\s?(?P<era{n}>BCE|BC|CE|AD)\b)?"



# Alternatives in order of precedence at one position: the most specific date first.
_DATE = re.compile(
    rf"\b(?P<d1>\d{{1,2}}) (?P<m1>{_M}),? (?P<y1>\d{{1,4}})\b{_era(1)}"
    rf"|\b(?P<m2>{_M}) (?P<d2>\d{{1,2}}), (?P<y2>\d{{1,4}})\b{_era(2)}"
    rf"|\b(?P<m3>{_M}),? (?P<y3>\d{{3,4}})\b{_era(3)}"
    rf"|\b(?P<y4>\d{{1,4}})\s?(?P<era4>BCE|BC)\b"
    r"|(?<![\w$£€.,])(?P<y5>1\d{3}|20\d{2})\b(?!s\b|,\d|\.\d|\s?%)"
)
# A bare year needs a word before it that makes it a year ("in 1879", "(1879–1955)").
_YEAR_CUE = re.compile(
    r"(?:\b(?:in|since|from|until|till|to|by|before|after|around|circa|c\.|between|and|during|of|year|early|"
    r"late|mid|the|on|ca\.|born|died|founded|established|built|until)|[(–\-,])\s*$", re.I)
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_UNITS = (r"%|percent|per cent|km²|km2|mi2|sq mi|square kilometres|square kilometers|square miles|km/h|mph|km|"
          r"kilometres|kilometers|metres|meters|miles|m|cm|mm|ft|feet|inches|kg|kilograms|tonnes|tons|"
          r"lb|pounds|°C|°F|ha|hectares|acres|people|inhabitants|residents|species|members|students|"
          r"employees|copies|votes|seats|languages|islands|years|days|hours|minutes|seconds|MW|GW|kW|kWh|"
          r"AU|light-years|ly|GHz|MHz|Hz|USD|dollars|euros|pounds sterling")
_NUMBER = re.compile(
    r"(?<![\w.,/])(?P<cur>[$£€])?(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?![\d,]\d)"
    r"(?:[ \u00a0]?(?P<scale>thousand|million|billion|trillion)\b)?"
    rf"(?:[ \u00a0]?(?P<unit>{_UNITS})(?![\w²]))?"
)
DEFAULT_MAX_CHARS = 20_000
DEFAULT_MAX_ITEMS = 30


class _Sentences:
    """The sentence around an offset, by binary search over the text's sentence spans."""

    def __init__(self, text: str):
        self.text = text
        self.spans = sentence_spans(text)
        self.starts = [s for s, _ in self.spans]

    def at(self, pos: int) -> str:
        if not self.spans:
            return ""
        s, e = self.spans[max(0, bisect_right(self.starts, pos) - 1)]
        return self.text[s:e].strip()


def _year(text: str, era: str | None) -> int | None:
    y = int(text)
    if era in ("BC", "BCE"):
        return -y
    return y if 0 < y <= 2100 else None


_RANGE_NEXT = re.compile(r"\s?[–-]\s?\d{3,4}\b")


def _date_matches(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """``(start, end, {text, year, month, day})`` of every date of ``text``, in order."""
    out = []
    for m in _DATE.finditer(text):
        g = m.groupdict()
        if g["y5"] is not None and not (_YEAR_CUE.search(text[max(0, m.start() - 12):m.start()])
                                        or _RANGE_NEXT.match(text, m.end())):
            continue
        month = day = None
        if g["y1"]:
            year, month, day = _year(g["y1"], g["era1"]), _MONTH_NUM[g["m1"]], int(g["d1"])
        elif g["y2"]:
            year, month, day = _year(g["y2"], g["era2"]), _MONTH_NUM[g["m2"]], int(g["d2"])
        elif g["y3"]:
            year, month = _year(g["y3"], g["era3"]), _MONTH_NUM[g["m3"]]
        elif g["y4"]:
            year = _year(g["y4"], g["era4"])
        else:
            year = _year(g["y5"], None)
        if year is None or day is not None and not 1 <= day <= 31:
            continue
        out.append((m.start(), m.end(), {"text": m.group(0).strip(), "year": year, "month": month, "day": day}))
    return out


def extract_dates(text: str, max_chars: int = DEFAULT_MAX_CHARS, max_items: int = DEFAULT_MAX_ITEMS,
                  sentences: _Sentences | None = None) -> list[dict[str, Any]]:
    """``{text, year, month, day, sentence}`` for each date in ``text`` (BC years negative).

    Full dates (``14 March 1879``, ``March 14, 1879``), months (``March 1879``), years
    with an era (``44 BC``) and bare years after a cue word (``in 1879``, ``(1879–1955)``).
    """
    text = text[:max_chars]
    sentences = sentences or _Sentences(text)
    return [{**d, "sentence": sentences.at(start)} for start, _, d in _date_matches(text)[:max_items]]


def extract_numbers(text: str, max_chars: int = DEFAULT_MAX_CHARS, max_items: int = DEFAULT_MAX_ITEMS,
                    sentences: _Sentences | None = None) -> list[dict[str, Any]]:
    """``{text, value, unit, sentence}`` for each quantity in ``text``.

    Kept: numbers with a unit (``12 km``, ``45%``), a scale (``3.5 million``), a currency
    sign, or digit grouping (``1,234``). Years and day numbers of dates are not quantities.
    """
    text = text[:max_chars]
    sentences = sentences or _Sentences(text)
    date_spans = [(start, end) for start, end, _ in _date_matches(text)]
    starts = [s for s, _ in date_spans]
    out: list[dict[str, Any]] = []
    for m in _NUMBER.finditer(text):
        g = m.groupdict()
        if not (g["unit"] or g["scale"] or g["cur"] or "," in g["int"]):
            continue
        i = bisect_right(starts, m.start()) - 1
        if i >= 0 and date_spans[i][0] <= m.start() < date_spans[i][1]:
            continue
        value = float(g["int"].replace(",", "") + (g["frac"] or "")) * _SCALE.get(g["scale"] or "", 1.0)
        unit = g["unit"] or {"$": "USD", "£": "GBP", "€": "EUR"}.get(g["cur"] or "", "")
        out.append({"text": m.group(0).strip(), "value": value, "unit": unit, "sentence": sentences.at(m.start())})
        if len(out) >= max_items:
            break
    return out


def extract_statements(text: str, max_chars: int = DEFAULT_MAX_CHARS,
                       max_items: int = DEFAULT_MAX_ITEMS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(dates, numbers)`` of ``text``, sharing one sentence split."""
    text = text[:max_chars]
    sentences = _Sentences(text)
    return (extract_dates(text, max_chars, max_items, sentences),
            extract_numbers(text, max_chars, max_items, sentences))
