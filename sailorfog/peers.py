"""Second answers that have no page: the answer's peers named beside it in a neighbour's text.

The uniqueness checks count pages, but a reader also counts what a page names. "A drama film has
ties to an actor whose name has two words" answered by Peter O'Toole has eight more answers in the
film's text ("It also stars Jack Hawkins, Anthony Quinn, Omar Sharif, ..."), none with a page; "cities
such as Timbuktu and Djenné" gives Djenné with Timbuktu. A peer is

- a name listed with the answer's own name, separated from it only by commas, "and", "or" or "&"
  (one chain of names in one sentence), or at the other end of a span ("from Basra to Khasab"), or
- for an actor or actress, any name in a sentence of the cast ("stars", "starring", "cast") among the
  three from the one that names the answer, or
- any name the text writes with the head of the answer's type after it ("south of the Uda River" beside the
  Amur, for "a river"), or
- any name the text gives a word of the answer's type in apposition ("the provincial capital, Quebec
  City" beside "the national capital, Ottawa", for "a capital city"), and for "a person" any name it gives
  a person's role ("Augusto Pinochet's spy chief, Manuel Contreras"), or
- for a city, town or other settlement, any name the text writes with a place's page after a comma ("Born
  in Lausanne, Switzerland", beside "grew up in Havana, Cuba") or before a noun of places ("4 Zhangzhou
  districts", beside Quanzhou).

A peer with a page is left to the page-level checks; a name clue the question states of the answer
(its first letter, its number of words) rules a peer out as it rules pages out.

Every routine is linear in the text: one sentence split, one bounded-repetition name pattern.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

from sailorfog.describe import PERSON_HEADS

_WORD = r"[A-Z][\w'’-]*\.?"
NAME = re.compile(_WORD + r"(?:\s+(?:(?:de|da|di|do|dos|van|von|der|den|del|della|la|le|du|bin|ibn|al|y)\s+)?"
                  + _WORD + r"){0,3}")
"""A proper name: one to four capitalized words, with the particles of names between them."""
_SEPARATOR = re.compile(r"(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)")
_COMMA = re.compile(r",\s+")
_PLACE_NOUN = re.compile(r"\s+(?:district|county|prefecture|province|municipality|township)s?\b")
_SPAN = re.compile(r"\bfrom (" + NAME.pattern + r") to (" + NAME.pattern + ")")
_CAST = re.compile(r"\b(?:stars?|starring|starred|co-stars?|cast)\b")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)][.!?])\s+")
_NOT_NAMES = frozenset("The It He She They In On At A An This That His Her Its Their".split())
_DEMONYM = re.compile(r"(?:ese|ian|ish)$")
CAST_HEADS = frozenset(["actor", "actress"])
SETTLEMENT_HEADS = frozenset("city town village capital port municipality metropolis settlement".split())
"""Types whose peers include a place written with the page of what holds it ("Lausanne, Switzerland")."""
MAX_TEXT = 20_000
"""Characters of a neighbour's text read."""


def _clean(name: str) -> str:
    """The name without a full stop or a possessive ending."""
    name = name.rstrip(".")
    return name[:-2] if name.endswith(("'s", "’s")) else name


def _is_name(name: str) -> bool:
    words = name.split()
    return bool(words) and words[0] not in _NOT_NAMES and not (len(words) == 1 and _DEMONYM.search(name))


def _chains(sentence: str, is_page: Callable[[str], bool]) -> list[list[str]]:
    """The sentence's names grouped into chains: consecutive names with only a list separator between them
    (two joined by "and" into one where that is a page's name: "São Tomé and Príncipe")."""
    chains: list[list[str]] = []
    end = -1
    for m in NAME.finditer(sentence):
        sep = sentence[end:m.start()] if end >= 0 else ""
        if chains and end >= 0 and _SEPARATOR.fullmatch(sep):
            joined = f"{chains[-1][-1]}{sep}{m.group(0)}"
            if sep.strip() == "and" and is_page(_clean(joined)):
                chains[-1][-1] = joined
            else:
                chains[-1].append(m.group(0))
        else:
            chains.append([m.group(0)])
        end = m.end()
    return chains


@lru_cache(maxsize=256)
def _apposition(kind: str) -> re.Pattern | None:
    words = [w for w in kind.lower().split() if len(w) >= 4]
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")s?,\s+(" + NAME.pattern + ")") if words else None


def typed(text: str, kind: str) -> set[str]:
    """The names that ``text`` gives a word of the type ``kind`` in apposition ("the provincial capital, Quebec
    City" for "a capital city")."""
    pattern = _apposition(kind)
    if pattern is None:
        return set()
    return {_clean(m.group(1)) for sentence in _SENTENCE_END.split(text[:MAX_TEXT]) for m in pattern.finditer(sentence)
            if _is_name(_clean(m.group(1)))}


NAMING_HEADS = frozenset("river lake sea ocean strait bay gulf island islands mountain mountains range desert valley "
                          "peninsula plateau basin canal dynasty empire kingdom language province".split())
"""Type heads that a text writes after a name to name an instance ("the Uda River", "the Jin dynasty", "the
Malay language"), in either case."""


def headed(text: str, kind: str) -> set[str]:
    """The names ``text`` gives with the head of the type ``kind`` after them, as a reader counts them: "south of
    the Uda River" names a river, "the Jin dynasty" a dynasty (a head outside :data:`NAMING_HEADS` only
    capitalized, as part of the name: "Mexico City")."""
    head = kind.split()[-1].lower() if kind.split() else ""
    if not head:
        return set()
    out = set()
    after = re.compile(r"\s+" + re.escape(head) + r"\b") if head in NAMING_HEADS else None
    for sentence in _SENTENCE_END.split(text[:MAX_TEXT]):
        for m in NAME.finditer(sentence):
            name = _clean(m.group(0))
            words = name.split()
            if len(words) > 1 and words[-1].lower() == head:
                out.add(name)
            elif after is not None and after.match(sentence, m.end()) \
                    and _is_name(name) and not name.endswith(("'s", "’s")):
                out.add(f"{name} {head}")
    return {n for n in out if _is_name(n)}


ROLE_NOUNS = PERSON_HEADS | frozenset("chief head secretary minister spokesman spokeswoman adviser advisor aide deputy "
                                     "agent officer official commander".split())
"""Nouns that make a name in apposition a person's ("spy chief, Manuel Contreras"), for "a person"."""
_ROLE_APPOSITION = re.compile(r"\b(?:" + "|".join(sorted(ROLE_NOUNS)) + r")s?,\s+(" + NAME.pattern + ")")


def persons(text: str) -> set[str]:
    """The names that ``text`` gives a person's role in apposition ("Augusto Pinochet's spy chief, Manuel
    Contreras, invited ..."): people for a reader asked for "a person"."""
    return {_clean(m.group(1)) for sentence in _SENTENCE_END.split(text[:MAX_TEXT])
            for m in _ROLE_APPOSITION.finditer(sentence) if _is_name(_clean(m.group(1)))}


def located(text: str, is_place: Callable[[str], bool]) -> set[str]:
    """The names that ``text`` writes with a place after a comma ("Born in Lausanne, Switzerland") or before
    a noun of places ("4 Zhangzhou districts"): places for a reader."""
    out = set()
    for sentence in _SENTENCE_END.split(text[:MAX_TEXT]):
        names = list(NAME.finditer(sentence))
        for a, b in zip(names, names[1:]):
            if _COMMA.fullmatch(sentence, a.end(), b.start()) and is_place(_clean(b.group(0))):
                out.add(_clean(a.group(0)))
        out.update(_clean(m.group(0)) for m in names if _PLACE_NOUN.match(sentence, m.end()))
    return {n for n in out if _is_name(n)}


def peers(text: str, name: str, cast: bool = False, is_page: Callable[[str], bool] = lambda _: False,
          kind: str = "", is_place: Callable[[str], bool] = lambda _: False) -> set[str]:
    """The names listed with ``name`` in ``text`` (and, with ``cast``, every name of the cast sentences
    near it; with the answer's type ``kind``, every name the text gives that type in apposition), without
    ``name`` itself and without words that are no names."""
    sentences = _SENTENCE_END.split(text[:MAX_TEXT])
    out: set[str] = {n for n in typed(text, kind) | headed(text, kind) if name not in n} if kind else set()
    if kind and kind.split()[-1].lower() in SETTLEMENT_HEADS:
        out |= {n for n in located(text, is_place) if name not in n}
    if kind and kind.split()[-1].lower() == "person":
        out |= {n for n in persons(text) if name not in n}
    for i, sentence in enumerate(sentences):
        if name not in sentence:
            continue
        for chain in _chains(sentence, is_page):
            names = [_clean(n) for n in chain]
            if len(names) > 1 and name in names:
                out.update(n for n in names if n != name)
        for m in _SPAN.finditer(sentence):  # "stretching from Basra to Khasab"
            ends = {_clean(m.group(1)), _clean(m.group(2))}
            if name in ends:
                out.update(ends - {name})
        if cast:
            for near in sentences[i:i + 3]:
                if _CAST.search(near):
                    out.update(_clean(m.group(0)) for m in NAME.finditer(near) if name not in m.group(0))
    return {n for n in out if _is_name(n)}


def fits_name_checks(name: str, checks: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a name satisfies the name clues among ``checks`` (a first letter, a number of words);
    other checks cannot be read of a name and are taken to hold."""
    for check in checks:
        if check.get("type") == "prefix" and not name.lower().startswith(str(check["prefix"]).lower()):
            return False
        if check.get("type") == "name_words" and len(name.split()) != int(check["n"]):
            return False
    return True


def unpaged_peers(statements: Iterable[Any], target: str, text_of: Callable[[str], str],
                  titles: Mapping[str, str], is_page: Callable[[str], bool],
                  is_place: Callable[[str], bool] = lambda _: False) -> list[str]:
    """The peers of the answer (label ``X``, name ``target``) in the texts of the pages it is tied to
    (``titles``: label -> page title) that have no page (``is_page``) and fit the answer's name clues
    (``is_place``: whether a name is a place's page)."""
    statements = list(statements)
    checks = [c for s in statements if s.subject == "X" and s.kind in ("name", "name_words") for c in s.checks]
    kind = next((s.value for s in statements if s.kind == "type" and s.subject == "X"), "")
    cast = bool(kind) and kind.split()[-1].lower() in CAST_HEADS
    found: set[str] = set()
    for s in statements:
        if s.kind == "relation" and "X" in (s.subject, s.object):
            other = titles.get(s.object if s.subject == "X" else s.subject)
            if other:
                found |= peers(text_of(other), target, cast, is_page, kind, is_place)
    return sorted(n for n in found if not is_page(n) and fits_name_checks(n, checks))
