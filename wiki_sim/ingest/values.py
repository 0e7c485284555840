"""Pure formatting helpers for template values: dates, ages, numbers, units, coordinates.

Dates are always written day-month-year (``14 March 1879``) whatever the template's
``df``/``mf`` flag, so facts from different articles read the same way; a date the
helpers cannot read is passed through as its parameters joined with ``-``.
"""

from __future__ import annotations

import re

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
_INT = re.compile(r"^\s*-?\d+\s*$")
_MONTH_NAMES = {m.lower(): i + 1 for i, m in enumerate(MONTHS)} | {m[:3].lower(): i + 1 for i, m in enumerate(MONTHS)}


def as_int(text: str) -> int | None:
    return int(text) if text and _INT.match(text) else None


def month_number(text: str) -> int | None:
    """``'3'`` or ``'March'`` or ``'Mar'`` -> 3."""
    n = as_int(text)
    if n is not None:
        return n if 1 <= n <= 12 else None
    return _MONTH_NAMES.get(text.strip().lower().rstrip("."))


def format_date(year: str, month: str = "", day: str = "") -> str:
    """``('1879', '3', '14')`` -> ``'14 March 1879'``; ``('1879', '3')`` -> ``'March 1879'``."""
    y, m, d = as_int(year), month_number(month) if month else None, as_int(day) if day else None
    if y is None:
        return "-".join(p for p in (year, month, day) if p)
    if month and m is None or day and (d is None or not 1 <= d <= 31):
        return "-".join(p for p in (year, month, day) if p)
    ytxt = f"{-y + 1} BC" if y <= 0 else str(y)  # astronomical year 0 is 1 BC
    if m is None:
        return ytxt
    if d is None:
        return f"{MONTHS[m - 1]} {ytxt}"
    return f"{d} {MONTHS[m - 1]} {ytxt}"


def age_between(y1: int, m1: int | None, d1: int | None, y2: int, m2: int | None, d2: int | None) -> int:
    """Whole years from date 1 to date 2 (month/day missing: compare years only)."""
    age = y2 - y1
    if m1 and m2 and (m2, d2 or 0) < (m1, d1 or 0):
        age -= 1
    return age


def ordinal(n: int) -> str:
    """3 -> '3rd', 11 -> '11th', 22 -> '22nd'."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def format_number(text: str) -> str:
    """``'1234567.5'`` -> ``'1,234,567.5'`` (formatnum); other text unchanged."""
    m = re.fullmatch(r"(-?)(\d+)(\.\d+)?", text.strip())
    if not m:
        return text.strip()
    return f"{m.group(1)}{int(m.group(2)):,}{m.group(3) or ''}"


# {{convert}} unit codes whose printed symbol differs from the code; the rest print as written.
_UNIT_SYMBOLS = {
    "km2": "km²", "m2": "m²", "cm2": "cm²", "mm2": "mm²", "sqmi": "sq mi", "sqkm": "km²", "sqft": "sq ft",
    "sqin": "sq in", "sqyd": "sq yd", "m3": "m³", "km3": "km³", "cm3": "cm³", "cuft": "cu ft", "cuin": "cu in",
    "C": "°C", "F": "°F", "K": "K", "acre": "acres", "ha": "ha", "USgal": "US gal", "impgal": "imp gal",
    "ft2": "sq ft", "mi2": "sq mi", "in2": "sq in", "kgf": "kgf", "lb": "lb", "ST": "short tons",
    "LT": "long tons", "t": "t", "nmi": "nmi", "kn": "kn", "mph": "mph", "km/h": "km/h", "kph": "km/h",
    "m/s": "m/s", "ft/s": "ft/s", "e6km2": "million km²", "e6sqmi": "million sq mi", "e3km2": "thousand km²",
    "e6acre": "million acres", "e3acre": "thousand acres", "e6m3": "million m³", "e9m3": "billion m³",
    "e3mi": "thousand mi", "e3km": "thousand km", "e6km": "million km", "e6mi": "million mi",
    "e9km": "billion km", "e6t": "million t", "e3t": "thousand t", "e6USgal": "million US gal",
    "Gm": "Gm", "AU": "AU", "ly": "ly", "pc": "pc", "kpc": "kpc", "Mpc": "Mpc", "ha2": "ha",
    "mi": "mi", "km": "km", "m": "m", "cm": "cm", "mm": "mm", "ft": "ft", "in": "in", "yd": "yd",
    "kg": "kg", "g": "g", "oz": "oz", "L": "L", "l": "L", "ml": "mL", "mL": "mL",
}
CONVERT_RANGE_WORDS = {"-": "–", "–": "–", "to": " to ", "and": " and ", "or": " or ", "by": " by ",
                       "x": " × ", "×": " × ", "+/-": " ± ", "±": " ± ", "to(-)": " to ", "and(-)": " and ",
                       "+": " + ", "&": " & ", "cross": " × "}


def unit_symbol(code: str) -> str:
    return _UNIT_SYMBOLS.get(code.strip(), code.strip())


def format_convert(params: list[str]) -> str:
    """Positional params of ``{{convert}}`` -> ``'12 km'``, ``'1–3 km'`` (no conversion is computed)."""
    params = [p.strip() for p in params]
    if not params or not params[0]:
        return ""
    values = [params[0]]
    i = 1
    while i + 1 < len(params) and params[i] in CONVERT_RANGE_WORDS:
        values.append(CONVERT_RANGE_WORDS[params[i]])
        values.append(params[i + 1])
        i += 2
    unit = unit_symbol(params[i]) if i < len(params) and params[i] else ""
    number = "".join(values)
    return f"{number} {unit}" if unit else number


def format_coord(params: list[str]) -> str:
    """``{{coord|40|26|N|79|58|W}}`` -> ``'40°26′N 79°58′W'``; decimal ``{{coord|40.4|-79.9}}`` kept."""
    params = [p.strip() for p in params if p.strip() and "=" not in p and ":" not in p]
    hemis = [i for i, p in enumerate(params) if p.upper() in ("N", "S", "E", "W")]
    if len(hemis) == 2:
        lat, lon = params[: hemis[0]], params[hemis[0] + 1: hemis[1]]
        return f"{_dms(lat)}{params[hemis[0]].upper()} {_dms(lon)}{params[hemis[1]].upper()}"
    if len(params) >= 2:
        return f"{params[0]}, {params[1]}"
    return ""


def _dms(parts: list[str]) -> str:
    marks = ["°", "′", "″"]
    return "".join(f"{p}{marks[i]}" for i, p in enumerate(parts[:3]))
