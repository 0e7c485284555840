"""Structured statements about entities: the one clue representation of research tasks.

A :class:`Statement` says one thing about one entity (its type, a dated event, the first
letter of its name) or about two (a relation, with the predicate read from the sentence
that links them). The writer words it, the verifier evaluates its ``checks`` (each check
is implied by the statement, so a count of one under the checks proves the stated clues
single out the answer), and the oracle searches with its words. Entities are named only
by labels (``X`` the answer, ``B``, ``C``, ... the hidden intermediates).
"""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sailorfog.constraints import linked_size, unary_size
from sailorfog.corpus import CorpusIndex
from sailorfog.describe import (PERSON_HEADS, PLACE_HEADS, date_event, defining_type, event_of_another,
                                find_name, first_sentence, predicate, quantity_predicate, sentence_subject_is)
from sailorfog.extract import extract_dates, extract_numbers
from sailorfog.text import display_title
from sailorfog.uncertainty import period

RECENT = 2000
"""A year from here on is stated only with its event: a bare recent year (a census, an estimate) is
true of nearly every entity that exists today, so a reader cannot tell candidates apart by it."""
StatementKind = Literal["type", "date", "name", "name_words", "number", "relation"]
MIN_ALONE = 3
"""A type is stated with as many words as keep at least this many pages matching it alone."""


@dataclass
class Statement:
    """One clue of a research question."""

    id: str
    kind: StatementKind
    subject: str
    """Label of the entity the statement is about (for a relation: the page whose sentence states it)."""
    value: str = ""
    """``type``: the type phrase; ``date``: the period; ``name``: the first letter."""
    predicate: str = ""
    """``relation``: how the subject relates to the object (``"is a member of"``; ``"mentions"`` when the
    sentence gives no known predicate); ``date``: the event verb (``"founded"``; empty: an event); ``number``:
    what the quantity measures (``"area"``, ``"length"``, ``"population"``, ...)."""
    object: str = ""
    """``relation``: label of the other entity."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    """What the verifier evaluates (see :mod:`sailorfog.constraints`)."""
    evidence: dict[str, str] = field(default_factory=dict)
    """``{"title", "url", "sentence"}``: where the statement can be read."""
    alone: int = 0
    """Pages of the store that satisfy this statement alone (for its subject)."""
    search_top10: bool | None = None
    """Whether a search of the statement's own words puts its subject in the top 10."""
    uncertainty: list[str] = field(default_factory=list)
    apart: list[str] = field(default_factory=list)
    """``type``: labels of entities the question says this one is not ("a politician other than this
    nationalist"), where a reader could otherwise take one for the other."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.apart:  # said only of an answer told apart (the clues of other tasks read as before)
            del out["apart"]
        return out

    @property
    def labels(self) -> list[str]:
        return [self.subject] + ([self.object] if self.object else [])


def _evidence(index: CorpusIndex, title: str, sentence: str) -> dict[str, str]:
    from wiki_sim.records import title_to_url

    return {"title": title, "url": title_to_url(title), "sentence": " ".join(sentence.split())[:400]}


def type_statement(index: CorpusIndex, label: str, title: str, text: str, sid: str,
                   min_alone: int = MIN_ALONE) -> Statement | None:
    """``label`` is a <type>: the longest tail of the defining type that still fits ``min_alone`` pages
    (a person of a rarer type is "a person"; another entity of a rarer type gets no type statement)."""
    words = list(index.page_type[index.ids[title]]) or defining_type(text)
    if not words or _type_size(index, words[-1:]) < 2:  # a head no other page has is no type ("a narrow")
        return None
    evidence = _evidence(index, title, first_sentence(text))
    chosen, count = words[-1:], _type_size(index, words[-1:])
    if count < min_alone:
        if words[-1].lower() not in PERSON_HEADS:
            return None
        return Statement(sid, "type", label, value="person", checks=[{"type": "person", "node": label}],
                         evidence=evidence, alone=unary_size(index, {"type": "person"}))
    for k in range(2, len(words) + 1):
        n = _type_size(index, words[-k:])
        if n < min_alone:
            break
        chosen, count = words[-k:], n
    value = " ".join(chosen)
    if value.isupper() or value.lower() in BARE_VAGUE:
        return None
    return Statement(sid, "type", label, value=value, checks=[{"type": "type", "node": label, "words": chosen}],
                     evidence=evidence, alone=count)


BARE_VAGUE = frozenset("response system method technique approach model framework principle medium process "
                       "concept".split())
"""Heads that say nothing a reader can act on without their modifier: "A response whose name is a single word has
ties to this naturalist" (Disgust, "an emotional response"; blind play, seed 10808) is no type statement."""


def _type_size(index: CorpusIndex, words: list[str]) -> int:
    return unary_size(index, {"type": "type", "words": list(words)})


_MONTHS = frozenset("January February March April May June July August September October November December "
                    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec".split())
_LEADS = frozenset("In By Since From Until Till During Before After Around About Circa And Or On As Between To "
                   "Through Throughout Early Late Mid Spring Summer Autumn Winter".split())
_NOT_NAMES = _MONTHS | _LEADS


def year_in_name(sentence: str, year: int) -> bool:
    """Whether every mention of ``year`` in ``sentence`` is part of a name ("the 1812 Overture", "Expo 2010",
    "Windows 2000"): a capitalized word right after it, or right before it that is no month or leading word."""
    found = False
    for m in re.finditer(rf"(?<![\w-]){year}(?![\w-])", sentence):
        found = True
        before = re.search(r"([\w'’-]+)\s+$", sentence[max(0, m.start() - 40):m.start()])
        after = re.match(r"\s+([A-Z][\w'’-]*)", sentence[m.end():m.end() + 40])
        lead = before is not None and before.group(1).capitalize() in _LEADS  # "in 1812 Napoleon ..."
        named = not lead and (after is not None and after.group(1) not in _NOT_NAMES or
                              before is not None and before.group(1)[:1].isupper() and before.group(1) not in _MONTHS)
        if not named:
            return False
    return found


_NAME_BEFORE_PARENS = re.compile(r"((?:[A-Z][\w'’.\-]*\s+(?:(?:of|the|and|a|an|in|on|at|to|for|de|la|von|van)\s+)?)"
                                 r"{0,5}[A-Z][\w'’.\-]*)\s*\($")
"""The name before an opening parenthesis, with the small words of a title ("A Woman of No Importance (")."""


_APPOSITION_CLAUSE = re.compile(r"((?:[A-Z][\w'’.\-]*\s+){0,3}[A-Z][\w'’.\-]*),\s+(?:an?|the)\s+[^,;()]{0,40}?"
                                r"\b(?:that|which|who)\b[^,;()]{0,60}$")
"""A name, an apposition and its relative clause, open up to a year: "Brasília, a planned city that became
Brazil's capital in"."""


_SAYS = re.compile(r"(?:\b((?:[A-Z][\w'’.\-]*\s+){0,3}[A-Z][\w'’.\-]*),?\s+(?:wrote|writing|said|argued|noted|stated|"
                   r"claimed|remarked|described|called)\b|\b[Aa]ccording to\s+(?:[a-z]+\s+){0,2}"
                   r"((?:[A-Z][\w'’.\-]*\s+){0,3}[A-Z][\w'’.\-]*))[^.;]{0,80}$")
"""Someone else's words, dated: "Bertrand Russell wrote in", "According to philosopher Paul Weiss, writing in"."""
_NAME_PARTICIPLE = re.compile(r"((?:[A-Z][\w'’.\-]*\s+){0,3}[A-Z][\w'’.\-]*)(?:\s*\([^()]*\))?,\s+(?:established|founded|"
                              r"formed|created|built|launched|signed|completed|opened)\b[^,;()]{0,40}$")
"""A name and the participle that dates it: "the Organisation of African Unity (OAU), established on 25 May"."""
_DETERMINER_BEFORE = re.compile(r"\b(?:the|his|her|its|their)\s+$")
_KIND_THEN_NAME = re.compile(r"\s+(?:[a-z][\w\-]*\s+){1,3}((?:[A-Z][\w'’.\-]*\s?){1,4})")
"""A dated kind and the name it is given: "based on the 1954 novel D'entre les morts" dates the novel."""
_NAME_OF = re.compile(r"((?:[A-Z][\w'’.\-]*\s+){0,3}[A-Z][\w'’.\-]*)\s+of\s+$")
_SAYS_AFTER = re.compile(r"^\s*(?:described|wrote|called|said|noted|praised|ranked|listed|named)\b")
"""A dated work that says something: "the Encyclopædia Britannica of 1888 described ..."."""


def year_of_another(sentence: str, year: int, title: str) -> bool:
    """Whether every mention of ``year`` in ``sentence`` is another entity's: in the parentheses after its name
    ("Giuseppe Peano (1858–1932)" on Frege's page, "George Orwell's Nineteen Eighty-Four (1949)" on Brave New
    World's), in a relative clause of an apposition to it ("Brasília, a planned city that became Brazil's
    capital in 1960" on Niemeyer's), in a participle after it ("the Organisation of African Unity (OAU),
    established on 25 May 1963" on the African Union's), before the kind and name it dates ("based on the 1954
    novel D'entre les morts" on Vertigo's) or in its dated words ("Bertrand Russell wrote in 1959" on Peirce's, "the Encyclopædia Britannica of 1888 described" on Keats's). A name whose words hold
    the title's, or are among them, is the page's own (:func:`_other_name`)."""
    own = {w.lower() for w in re.findall(r"\w+", display_title(title)) if len(w) >= 3}

    def another(name: re.Match | None) -> bool:
        return name is not None and _other_name(name.group(1), own)

    found = False
    for m in re.finditer(rf"(?<![\w-]){year}(?![\w-])", sentence):
        found = True
        head = sentence[max(0, m.start() - 160):m.start()]
        opened = head.rfind("(")
        if opened >= 0 and ")" not in head[opened:] and ")" in sentence[m.end():m.end() + 40]:
            if not another(_NAME_BEFORE_PARENS.search(head[:opened + 1])):
                return False
        elif not (another(_APPOSITION_CLAUSE.search(head)) or another(_NAME_PARTICIPLE.search(head))
                  or _DETERMINER_BEFORE.search(head) and another(_KIND_THEN_NAME.match(sentence, m.end()))
                  or _says_another(_SAYS.search(head), own)
                  or another(_NAME_OF.search(head)) and _SAYS_AFTER.match(sentence[m.end():])):
            return False
    return found


def _other_name(name: str, own: set[str]) -> bool:
    """Whether ``name`` names another entity than the page's (title words ``own``): neither holds all the
    other's words ("Frege" and "Friedrich Ludwig Gottlob Frege" are Gottlob Frege; "African Unity" is not
    the African Union)."""
    words = {w.lower() for w in re.findall(r"\w+", name) if len(w) >= 3}
    return bool(words) and not (words <= own or own <= words)


def _says_another(m: re.Match | None, own: set[str]) -> bool:
    """Whether a :data:`_SAYS` match names someone other than the page's entity."""
    name = m and (m.group(1) or m.group(2))
    return bool(name) and _other_name(name, own)


_LIFESPAN = re.compile(r"\((?:c\.\s*)?(\d{3,4})\s*[–-]\s*(?:c\.\s*)?(\d{3,4})\)\s*$")


def lifespan(description: str) -> tuple[int, int] | None:
    """A person's years of birth and death from a short description ending "(1888–1935)"."""
    m = _LIFESPAN.search(description[:300])
    if not m:
        return None
    born, died = int(m.group(1)), int(m.group(2))
    return (born, died) if born <= died else None


DENIED = re.compile(r"\b(?:wrongly|mistakenly|erroneously|falsely|incorrectly|misattributed|apocryphal(?:ly)?)\b",
                    re.I)
"""A sentence that denies what it dates ("The painting is sometimes wrongly thought to depict the French Revolution of
1789"): no date of the entity."""


def another_occasion(sentence: str, year: int) -> bool:
    """Whether the sentence dates to ``year`` only an occasion of something else: an anniversary ("after the 1919
    centennial of its author's birth" on Moby-Dick's page, published in 1851) or another one's life ("out of print
    at the time of the author's death in 1891")."""
    return re.search(rf"\b{year}\s+(?:\w+\s+){{0,2}}(?:centennial|centenary|bicentennial|bicentenary|tercentenary|"
                     r"anniversary|jubilee)\b", sentence, re.I) is not None \
        or re.search(r"\b\w+['’]s?\s+(?:death|birth|funeral|wedding|marriage|retirement)\s+(?:\w+\s+){0,2}in\s+"
                     rf"{year}\b", sentence) is not None


def date_statements(index: CorpusIndex, label: str, title: str, text: str, sid: str,
                    rng: random.Random, life: tuple[int, int] | None = None) -> list[Statement]:
    """One statement per dated event of the page (events with a verb first), the year blurred to a period;
    for a person who lived ``life`` (born, died), none outside it (T. E. Lawrence, 1888-1935, is not "tied to a
    date in the 1960s" by "a title used for the 1962 film")."""
    out, seen = [], set()
    pid = index.ids.get(title)
    kind = " ".join(index.page_type[pid]) if pid is not None else ""
    for d in extract_dates(text, max_chars=6000, max_items=12):
        year = d.get("year")
        if not isinstance(year, int) or not 1000 <= year <= 2099 or year in seen:
            continue
        seen.add(year)
        if life and not life[0] <= year <= life[1]:
            continue
        if year_in_name(d.get("sentence", ""), year) or DENIED.search(d.get("sentence", "")) \
                or another_occasion(d.get("sentence", ""), year):
            continue  # "Tchaikovsky ... the 1812 Overture": no event of his in the 1810s
        if year_of_another(d.get("sentence", ""), year, title) or event_of_another(d.get("sentence", ""), year):
            continue  # "Giuseppe Peano (1858–1932)" on Frege's page: Peano's birth, not a date of Frege's
        verb = date_event(d.get("sentence", ""), year) or ""
        if verb and not sentence_subject_is(d.get("sentence", ""), title, kind):
            verb = ""  # "... after the Jamestown Settlement founded in 1607" on New England's page
        if not verb and year >= RECENT:
            continue  # "As of 2024 the population was ...": every living city is "tied to a date in the 2020s"
        phrase, lo, hi = period(year, rng)
        check = {"type": "year", "node": label, "lo": lo, "hi": hi}
        out.append(Statement(f"{sid}{len(out)}", "date", label, value=phrase, predicate=verb, checks=[check],
                             evidence=_evidence(index, title, d.get("sentence", "")),
                             alone=unary_size(index, check), uncertainty=["vague_time"]))
    out.sort(key=lambda s: (not s.predicate, s.id))
    return out


def name_statement(index: CorpusIndex, label: str, title: str, sid: str) -> Statement | None:
    """The first letter of the entity's name (a weak partial name)."""
    name = display_title(title)
    letter = name[:1].upper()
    if not letter.isascii() or not letter.isalpha():
        return None
    return Statement(sid, "name", label, value=letter, checks=[{"type": "prefix", "node": label, "prefix": letter}],
                     evidence=_evidence(index, title, name),
                     alone=unary_size(index, {"type": "prefix", "prefix": letter}),
                     uncertainty=["partial_names"])


_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six")
_CLASS_NOUNS = frozenset(["language", "languages", "people", "peoples"])
"""Words a title adds to a name to tell it from a namesake ("Portuguese language", "Igbo people")."""


_INITIALS = re.compile(r"(?:[^\W\d_]\.)+")
"""A word of initials ("D.", "H.", "J.R.R.")."""

MAX_HINTED_WORDS = 3
"""The longest name whose word count is stated: on the default corpus 985 of 10,033 titles have three
words, 261 four and 108 five or six, so "an island country whose name has four words" names São Tomé and
Príncipe to anyone who knows the world (blind play, seed 9191)."""


def name_words_statement(index: CorpusIndex, label: str, title: str, sid: str) -> Statement | None:
    """How many words the entity's name has (one to :data:`MAX_HINTED_WORDS`); not said of a hyphenated name
    ("Timor-Leste": one word or two?), nor of a title with a qualifier after a comma ("Balochistan, Pakistan":
    the page's name is one word; audit, seed 21111), nor of a name with initials ("D. H. Lawrence": three words,
    or a name of one?), nor of a title that adds a class noun to the name ("Portuguese language": the name is
    "Portuguese")."""
    words = display_title(title).split()
    n = len(words)
    if not 1 <= n <= MAX_HINTED_WORDS or any(c in title for c in "-\u2010\u2011\u2013,") \
            or words[-1].lower() in _CLASS_NOUNS or any(_INITIALS.fullmatch(w) for w in words):
        return None
    return Statement(sid, "name_words", label, value=_NUMBER_WORDS[n - 1],
                     checks=[{"type": "name_words", "node": label, "n": n}], evidence=_evidence(index, title, title),
                     alone=unary_size(index, {"type": "name_words", "n": n}), uncertainty=["partial_names"])


_UNIT_NAMES = {"km": "kilometres", "km2": "square kilometres", "km²": "square kilometres", "m": "metres",
               "kg": "kilograms", "%": "per cent", "ft": "feet", "mi2": "square miles"}


MAX_QUANTITY = 1e15
"""The largest quantity stated as a range; a larger number on a page is a typo, a code or an attack."""


def number_statements(index: CorpusIndex, label: str, title: str, text: str, sid: str,
                      rng: random.Random) -> list[Statement]:
    """A quantity with a unit from the page, as a range around it (``between 2,000 and 3,000 kilometres``),
    with what it measures (``predicate``: ``area``, ``length``, ...; :func:`~sailorfog.describe.quantity_predicate`).
    A quantity whose sentence does not say what it measures of the entity is not stated."""
    from sailorfog.uncertainty import fuzzy_range

    out = []
    for q in extract_numbers(text, max_chars=6000, max_items=6):
        unit, raw = q.get("unit") or "", q.get("text", "")
        if not unit or re.search(r"thousand|million|billion|trillion", raw) or not 10 <= q["value"] <= MAX_QUANTITY:
            continue  # (a 400-digit number reads as infinity: no range can hold it)
        measure = quantity_predicate(q.get("sentence", ""), raw, unit)
        if measure is None:
            continue
        phrase, lo, hi = fuzzy_range(float(q["value"]), rng)
        unit = _UNIT_NAMES.get(unit, unit)
        out.append(Statement(f"{sid}{len(out)}", "number", label, value=f"{phrase} {unit}", predicate=measure,
                             checks=[{"type": "number", "node": label, "lo": lo, "hi": hi}],
                             evidence=_evidence(index, title, q.get("sentence", "")),
                             alone=unary_size(index, {"type": "number", "lo": lo, "hi": hi}),
                             uncertainty=["fuzzy_quantities"]))
    return out[:2]


def link_sentence(sim: Any, source: str, target: str) -> tuple[str, str] | None:
    """``(sentence, anchor)`` of ``source``'s page where it links ``target``, or ``None``."""
    from wiki_sim.sentences import sentence_spans

    anchor = next((lk.get("anchor") or target for lk in sim.links(source, "out") if lk.get("target") == target),
                  None)
    if anchor is None:
        return None
    text = (sim.page(source) or {}).get("text", "")[:20_000]
    at = find_name(text, anchor)
    if at < 0:
        return None
    for start, end in sentence_spans(text):
        if start <= at < end:
            return text[start:end], anchor
    return None


_NOT_A_HEAD = frozenset("of in on at for with by to from and or but nor is was are were be been has have had that "
                        "which who whom whose as into than so if when where while s".split())


def modifier_use(sentence: str, anchor: str) -> bool:
    """Whether a lower-case linked word only modifies the noun after it ("pen" in "pen name", "water" in
    "water table"): the sentence is then not about the linked entity."""
    if not anchor[:1].islower():
        return False
    at = find_name(sentence, anchor)
    if at < 0:
        return False
    m = re.match(r"\s+([a-z][a-z\-]*)", sentence[at + len(anchor):])
    return bool(m) and m.group(1) not in _NOT_A_HEAD


def _type_head(index: CorpusIndex, title: str) -> str:
    """The lower-case head of a page's extracted type, empty for an untyped or unknown page."""
    kind = index.page_type[index.ids[title]] if title in index.ids else ()
    return kind[-1].lower() if kind else ""


_CHARACTER_HEADS = frozenset("fisherman boy girl child character protagonist narrator hero heroine".split())
"""Words for a person in a story, beside :data:`~sailorfog.describe.PERSON_HEADS`."""
_APPOSITION = re.compile(r",\s+(?:an?|the)\s+((?:[\w-]+\s+){0,3}[\w-]+)")


def namesake_person(index: CorpusIndex, target: str, sentence: str, anchor: str) -> bool:
    """Whether the linked name is a person's in this sentence while the linked page is no person's: "the story
    of Santiago, an aging fisherman" names the fisherman, not the city (blind play, seed 9696)."""
    if _type_head(index, target) in PERSON_HEADS:
        return False
    at = find_name(sentence, anchor)
    m = _APPOSITION.match(sentence, at + len(anchor)) if at >= 0 else None
    return bool(m) and any(w.lower() in PERSON_HEADS or w.lower() in _CHARACTER_HEADS for w in m.group(1).split())


_WORK_KINDS = (frozenset("play tragedy comedy drama".split()), frozenset("film movie".split()),
               frozenset("novel novella book".split()), frozenset("song single".split()), frozenset("poem epic".split()),
               frozenset(["opera"]), frozenset(["ballet"]), frozenset(["album"]), frozenset(["musical"]),
               frozenset(["symphony"]), frozenset(["painting"]), frozenset(["sculpture", "statue"]),
               frozenset(["ship"]), frozenset(["series"]))
"""Nouns a sentence sets before a title to say what it names ("the opera Eugene Onegin"), in groups a reader takes
for one another ("the play Hamlet" is the tragedy)."""
_KIND_BEFORE = re.compile(r"\b(?:the|his|her|its|their|an?)\s+(?:[a-z][a-z\-]*\s+)?([a-z]+)\s+$")


def named_as_other_kind(index: CorpusIndex, target: str, sentence: str, anchor: str) -> bool:
    """Whether the sentence calls the linked name a work of another kind than its page's: "the opera Eugene Onegin"
    on Tchaikovsky's page names his opera, not Pushkin's novel (audit, seed 21313: "This composer is connected
    with a novel")."""
    head = _type_head(index, target)
    at = find_name(sentence, anchor)
    m = _KIND_BEFORE.search(sentence[max(0, at - 40):at]) if at >= 0 and head else None
    if not m:
        return False
    kind = next((group for group in _WORK_KINDS if m.group(1) in group), None)
    return kind is not None and head not in kind


_TIME_HEADS = frozenset("period era age epoch".split())
"""Type heads of a span of time."""
_TIME_PREPOSITION = re.compile(r"\b(?:in|since|during|throughout|until|till|from|before|after|by)\s+(?:the\s+)?$",
                               re.I)


def adverbial_period(index: CorpusIndex, target: str, sentence: str, anchor: str) -> bool:
    """Whether a lower-case link to a span of time only says when ("In ancient history, the river was regarded
    as ...", "known since ancient history"): the sentence is about something else, and "the river has ties to a
    period" reads as nothing a reader could follow (blind play, seed 9595)."""
    if not anchor[:1].islower() or _type_head(index, target) not in _TIME_HEADS:
        return False
    at = find_name(sentence, anchor)
    return at >= 0 and bool(_TIME_PREPOSITION.search(sentence[max(0, at - 40):at]))


_NAMED_AFTER = frozenset("Park City Street Avenue Square Bridge Airport Station Stadium Building Tower Hall Centre "
                        "Center Memorial Prize Award Medal Foundation Institute School College University Library "
                        "Museum Boulevard Road Highway Dam Island Glacier Crater".split())
"""Nouns that make a longer name of a name before them ("Theodore Roosevelt Park", "African Union City")."""


_NAME_SUFFIX = re.compile(r"\s+(?:fils|père|Jr\b|Sr\b|the\s+(?:Younger|Elder)\b|II\b|III\b|IV\b)")
"""What makes a person's name another's ("Alexandre Dumas fils" is the son, not Alexandre Dumas)."""


def inside_longer_name(sentence: str, anchor: str) -> bool:
    """Whether every mention of the linked name is the start of a longer name ("Located in Theodore Roosevelt
    Park" names a park, not the president; "African Union City" a building, not the union; "Alexandre Dumas fils"
    the son, not the father)."""
    found = False
    for m in re.finditer(r"(?<!\w)" + re.escape(anchor) + r"(?!\w)", sentence):
        found = True
        after = re.match(r"\s+([A-Z][a-z]+)\b", sentence[m.end():])
        if (not after or after.group(1) not in _NAMED_AFTER) and not _NAME_SUFFIX.match(sentence, m.end()):
            return False
    return found


_KIND_OF_PERSON = re.compile(r"\s+(?:man|woman|men|women)\b")
"""A person noun right after a name, which then says what kind of person ("a Renaissance man")."""
_QUOTED = re.compile(r"[\"“]([^\"“”]{1,120})[\"”]")
_SUPERLATIVE_SINCE = re.compile(r"\b(?:greatest|best|finest|most|first|largest|biggest|worst|only)\b(?:\s+\S+){0,4}?"
                                r"\s+since\s+$")


def figurative_use(sentence: str, anchor: str) -> bool:
    """Whether every mention of the linked name only serves a comparison: the head of a quoted nickname
    ("called “China's Mona Lisa”", "the “Peter the Great of Turkey”", "the “Charlie Chaplin of Indian
    cinema”") or the yardstick of a superlative ("the greatest experimentalist since Michael Faraday").
    Neither ties the page to the entity named ("the “Sibyl of the Rhine”" does: the name is not the head), nor
    does a name that only says what kind of person someone is ("a Renaissance man": Bernini, not the period)."""
    name = r"(?<!\w)" + re.escape(anchor) + r"(?!\w)"
    spans = [(m.start(1), m.group(1)) for m in _QUOTED.finditer(sentence)]  # disjoint, in order
    starts = [start for start, _ in spans]
    found = False
    for m in re.finditer(name, sentence):
        found = True
        i = bisect_right(starts, m.start()) - 1  # the quote that opens last before the mention, if it holds it
        quoted = spans[i] if i >= 0 and m.start() < spans[i][0] + len(spans[i][1]) else None
        head = False
        if quoted is not None:
            start, text = quoted
            before, after = text[:m.start() - start], text[m.end() - start:]
            head = bool(re.search(r"\w['’]s\s+$", before) or re.match(r"\s+of\b", after))
        if not head and not _SUPERLATIVE_SINCE.search(sentence[max(0, m.start() - 80):m.start()]) \
                and not _KIND_OF_PERSON.match(sentence, m.end()):
            return False
    return found


def other_place(sim: Any, target: str, sentence: str, anchor: str) -> bool:
    """Whether the linked name is qualified by a place its target's page never mentions: "Manchester, New
    Hampshire" is not the English city."""
    at = find_name(sentence, anchor)
    if at < 0:
        return False
    m = re.match(r",\s+((?:[A-Z][\w\-]+\s?){1,3})", sentence[at + len(anchor):])
    if not m:
        return False
    qualifier = m.group(1).strip()
    return find_name((sim.page(target) or {}).get("text", ""), qualifier) < 0


def article_of_another(index: CorpusIndex, sim: Any, target: str, sentence: str, anchor: str) -> bool:
    """Whether the sentence writes the linked name with "the" where its target's page never does: "the Argentine
    provinces of the Mesopotamia" name Argentina's region, not the Mesopotamia of West Asia; "the St. Louis
    Post-Dispatch" and "the Franz Kafka Prize" name no city and no writer. (A name its page writes with "the", "the
    Levant", and a possessive, "the Earth's surface", are the page's.) Read of places only."""
    kind = index.page_type[index.ids[target]] if target in index.ids else ()
    if not kind or kind[-1].lower() not in PLACE_HEADS or not anchor[:1].isupper() \
            or anchor.lower().startswith("the "):
        return False  # of a place only: "the Earth", "the Latin", "the Nobel Prize" are idioms
    if not re.search(r"\bthe\s+" + re.escape(anchor) + r"(?![\w\-]|['’]s\b)", sentence):
        return False  # "the Earth's surface" is Earth's
    own = (sim.page(target) or {}).get("text", "")[:20_000]
    return re.search(r"\b[Tt]he\s+" + re.escape(anchor) + r"(?![\w\-])", own) is None


_NAME_END = re.compile(r"\s\(|\s(?:was|is|were|are)\s|,")
_NAME_PARTICLES = {"van", "von", "de", "da", "di", "del", "der", "den", "du", "la", "le", "bin", "ibn", "al", "y"}


def own_name(index: CorpusIndex, source: str, anchor: str, sentence: str = "") -> bool:
    """Whether a person's page links a word of the person's own name ("Jordan" on Michael Jordan's page
    is his name, not the country), or a name inside the full name its sentence opens with ("John Milton
    Cage Jr. was an American composer" names the composer, not the poet)."""
    pid = index.ids.get(source)
    kind = index.page_type[pid] if pid is not None else ()
    if not kind or kind[-1].lower() not in PERSON_HEADS:
        return False
    words = {w.lower() for w in re.findall(r"\w+", display_title(source))}
    if bool(words) and {w.lower() for w in re.findall(r"\w+", anchor)} <= words:
        return True
    end = _NAME_END.search(sentence[:200])
    opening = sentence[:end.start()].split() if end else []
    if not 1 < len(opening) <= 8 or not all(w[:1].isupper() or w in _NAME_PARTICLES for w in opening):
        return False  # not one full name ("Newton and Leibniz were ...")
    rest = " ".join(opening).replace(anchor, " ")
    return find_name(" ".join(opening), anchor) >= 0 and bool(words & {w.lower() for w in re.findall(r"\w+", rest)})


def relation_statement(index: CorpusIndex, sim: Any, a: tuple[str, str], b: tuple[str, str],
                       sid: str) -> Statement | None:
    """The relation between entities ``a`` and ``b`` (``(label, title)`` each), read from whichever
    page links the other; a known predicate is preferred over a bare mention."""
    options = []
    for (sl, st), (ol, ot) in ((a, b), (b, a)):
        found = link_sentence(sim, st, ot)
        if found and not modifier_use(*found) and not other_place(sim, ot, *found) \
                and not own_name(index, st, found[1], found[0]) and not inside_longer_name(*found) \
                and not figurative_use(*found) and not adverbial_period(index, ot, *found) \
                and not namesake_person(index, ot, *found) and not article_of_another(index, sim, ot, *found) \
                and not named_as_other_kind(index, ot, *found):
            sentence, anchor = found
            kind = " ".join(index.page_type[index.ids[st]]) if st in index.ids else ""
            options.append((predicate(sentence, anchor, st, kind) or "mentions", sl, ol, st, sentence))
    if not options:
        return None
    options.sort(key=lambda o: o[0] == "mentions")
    pred, sl, ol, st, sentence = options[0]
    return Statement(sid, "relation", sl, predicate=pred, object=ol,
                     checks=[{"type": "link", "a": sl, "b": ol}], evidence=_evidence(index, st, sentence),
                     alone=linked_size(index))
