"""A second, looser uniqueness check: which pages would a careful reader accept as the answer?

The verifier (:mod:`sailorfog.constraints`) evaluates each statement's checks exactly: a type
is the words of the page's extracted type, a relation is a link. A reader is more generous,
and a task is fair only if the answer stays unique under the reader's reading too:

- **Types.** "A poet" fits every page whose defining phrase calls its entity a poet, in any
  conjunct ("a Russian writer, poet and painter"), and every page of a synonym a reader accepts
  (:data:`TYPE_SYNONYMS`: a statesman for a politician); a modifier must be written on the page,
  except vague ones and "extinct" for a fossil taxon; "a person" fits everyone.
- **Relations.** Any link, in either direction, or a mention of the other's name in the page
  text, long words by their stem ("connected with Romanticism" fits a composer of the Romantic period).
  A relation of place (``is found in``, ``is located in``, ``lived in``, ``native to``, ``was born in``
  and their paraphrases, :data:`PLACE_PREDICATES`), and any tie to a place, also holds through
  containment: a genus that lived in Belgium is found in Europe, since Belgium's defining sentence
  places it there; a yak found in Mongolia is associated with Asia.
- Dates, numbers and names are read as the verifier reads them (the same year, number and
  letter indexes), since a reader reads the same text.

Candidate sets are made arc-consistent over the looser relations, as in the verifier; more
than one candidate for the answer means a second answer on a plain reading.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sailorfog.constraints import unary_pages
from sailorfog.corpus import CorpusIndex
from sailorfog.describe import (PERSON_HEADS, PLACE_HEADS, first_sentence, loose_measure, other_names,
                                types_alike)
from sailorfog.extract import extract_numbers
from sailorfog.statements import Statement
from sailorfog.text import display_title
from wiki_sim.focus import tokenize
from wiki_sim.snippets import CASE_ODDITIES

PLACE_PREDICATES = frozenset([
    "is located in", "is found in", "originated in", "was born in", "died in", "is spoken in", "is grown in",
    "is produced in", "flows through", "is part of", "lived in", "is native to",
])
"""Predicates that a reader reads as containment in a place (their paraphrases map onto these)."""
UNSTATED_MODIFIERS = frozenset("large small big little major minor famous important notable prominent common populous "
                               "largest biggest narrative".split())
"""Modifiers a reader grants a page that does not write them (an Iguanodon page need not say "extinct"; the
Aeneid, "a Latin epic poem that tells the legendary story of Aeneas", is a narrative poem)."""
_EXTINCT = re.compile(r"\b(?:extinct|fossils?|million years ago|dinosaurs?|Cretaceous|Jurassic|Triassic|Permian|"
                      r"Carboniferous|Devonian|Pleistocene|Miocene|Eocene)\b", re.I)
MAX_NAMES = 400
"""Text mentions are read when a side has at most this many candidates (links alone beyond)."""
WORD_SETS_KEPT = 4096
"""Pages whose word sets the reader keeps (least recently used dropped): its memory stays bounded on a large
corpus, where a long run reads hundreds of thousands of pages."""
MAX_UNSTATED = 2000
"""A number statement also holds, for a reader, on a page that states no quantity of its measure (the
corpus gives no area for Estonia, a reader knows it), read where the subject's other unary statements
leave at most this many pages (exact beyond)."""
MAX_YEARS = 400
"""Years of a period read in the pages' short descriptions (a longer period: its first 400)."""
MAX_CONTAINERS = 40
"""Containment is read from the container's side when at most this many candidates are left there."""


TYPE_SYNONYMS = (
    frozenset("politician statesman stateswoman president leader ruler dictator premier chancellor monarch king queen "
              "emperor empress sultan tsar revolutionary activist".split()),
    frozenset("writer author novelist poet playwright dramatist essayist".split()),
    frozenset("painter artist sculptor illustrator".split()),
    frozenset("composer musician pianist songwriter".split()),
    frozenset("physicist scientist chemist mathematician astronomer".split()),
    frozenset("philosopher thinker theorist theologian".split()),
    frozenset("general commander officer soldier admiral".split()),
    frozenset("actor actress comedian".split()),
    frozenset("architect designer planner".split()),
    frozenset("filmmaker director producer screenwriter".split()),
    frozenset("city town capital metropolis municipality".split()),
    frozenset("country state nation kingdom republic".split()),
    frozenset("sea ocean gulf bay inlet strait".split()),
    frozenset("empire kingdom dynasty state caliphate sultanate khanate".split()),
    frozenset("region area territory province".split()),
    frozenset("conflict war battle".split()),
    frozenset("style movement school era period".split()),
    frozenset("period era epoch age phase".split()),
    frozenset("drama play opera operetta tragedy".split()),
    frozenset("discipline field science study subject branch".split()),
)
"""Heads a reader takes for one another ("a politician" fits a statesman who led a country; "a drama" an opera,
as the corpus's Drama page says: "a play, opera, mime, ballet"; "a discipline" political science, "a field which
aims to study the scientific aspect of politics")."""


_ADJECTIVE_ENDINGS = "n|an|ian|ese|i"
"""What a reader hears as the same name in an adjective ("Asian", "Japanese", "Iraqi", "Parisian")."""


def _adjectival(words: list[str], i: int) -> bool:
    """Whether a reader takes an adjective of the name's word ``i`` for the name: its last word, of 4-5
    letters (a longer word is read by its stem already)."""
    w = words[i]
    return i == len(words) - 1 and w.isascii() and w.isalpha() and 4 <= len(w) <= 5


def _adjective_base(w: str) -> str:
    """The part of a short last word that its adjectives keep: without a last a, y or e of five letters
    ("Chin" of China, "Ital" of Italy), else the word."""
    return w[:-1] if len(w) == 5 and w[-1] in "aAyYeE" else w


def _loose(name: str) -> str:
    """A pattern for a name as a reader recognizes it: long words by their stem ("Romantic" for
    "Romanticism", "Classical" for "classical"), a short last word in its adjectives too ("East Asian"
    for East Asia, "Chinese" for China), any case."""
    words, parts = name.split(), []
    for i, w in enumerate(words):
        if w.isalpha() and len(w) >= 6:
            parts.append(re.escape(w[:max(5, len(w) - 4)]) + r"\w*")
        elif _adjectival(words, i):
            base = _adjective_base(w)
            rest = f"(?:{_ADJECTIVE_ENDINGS})?" if base == w else \
                f"(?:{re.escape(w[-1])}(?:{_ADJECTIVE_ENDINGS})?|an|ian|ese)"
            parts.append(re.escape(base) + rest)
        else:
            parts.append(re.escape(w))
    return r"\s+".join(parts)


@lru_cache(maxsize=8192)
def _loose_pattern(names: tuple[str, ...]) -> re.Pattern:
    """One pattern for any of ``names`` read loosely (:func:`_loose`) as whole words, any case. The reader
    asks for the same names again and again while its candidate sets settle, so patterns are kept."""
    return re.compile(r"(?<!\w)(?:" + "|".join(_loose(n) for n in sorted(names, key=len, reverse=True))
                      + r")(?!\w)", re.I)


@lru_cache(maxsize=65536)
def _loose_keys(name: str) -> tuple[str, ...]:
    """Lower-case pieces that every loose match of ``name`` holds: each ASCII word, its stem, or what its
    adjectives keep (the longest first, then alphabetical; none for a name without ASCII words). A text whose
    lower case lacks one of them, and holds none of :data:`~wiki_sim.snippets.CASE_ODDITIES`, cannot match the
    name's :func:`_loose_pattern`."""
    split = name.split()
    words = [w[:max(5, len(w) - 4)] if w.isalpha() and len(w) >= 6 else _adjective_base(w) if _adjectival(split, i)
             else w for i, w in enumerate(split) if w.isascii()]
    return tuple(sorted({w.lower() for w in words}, key=lambda w: (-len(w), w)))


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=8192)
def _lower_pattern(name: str) -> re.Pattern:
    """:func:`_loose_pattern` of one ASCII ``name`` for a lower-case text: in lower case, case-sensitive and
    without its opening look-behind, so that ``re`` scans for its literal opening (:func:`_loose_in_lower`)."""
    return re.compile(_loose(name.lower()) + r"(?!\w)")


def _loose_in_lower(low: str, name: str) -> bool:
    """Whether :func:`_loose_pattern` of the ASCII ``name`` finds it in the text whose lower case is ``low``
    (a text without :data:`~wiki_sim.snippets.CASE_ODDITIES`): the leftmost match of :func:`_lower_pattern`
    that no word character precedes. Each search starts past the last one's start: linear in the text for
    a given name."""
    pattern, pos = _lower_pattern(name), 0
    while True:
        m = pattern.search(low, pos)
        if m is None:
            return False
        start = m.start()
        if start == 0 or not _is_word_char(low[start - 1]):
            return True
        pos = start + 1


@lru_cache(maxsize=65536)
def _word_key(name: str) -> tuple[bool, str] | None:
    """What a text's words must hold for a loose match of ``name``: ``(True, w)``, the name's longest
    ASCII word ``w`` made only of word characters, as a whole word of the text (lower case); ``(False, s)``,
    the first 5 letters of the stem of a long ASCII word, or the first 4 of a last word that adjectives
    keep (:func:`_adjective_base`), opening some word of the text; ``None`` for no such word."""
    split = name.split()
    for i, w in sorted(((i, w) for i, w in enumerate(split) if w.isascii()), key=lambda iw: len(iw[1]), reverse=True):
        if w.isalpha() and len(w) >= 6:
            return False, w[:5].lower()
        if _adjectival(split, i):
            return False, _adjective_base(w)[:4].lower()
        if _WORD.fullmatch(w):
            return True, w.lower()
    return None


def _is_word_char(c: str) -> bool:
    """``re``'s ``\\w`` for one character of a ``str``."""
    return c.isalnum() or c == "_"


def _has_word(text: str, name: str) -> bool:
    """Whether ``text`` holds ``name`` literally as whole words (``(?<!\\w)name(?!\\w)``), by
    ``str.find``: no pattern to compile per name."""
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or not _is_word_char(text[start - 1])) and (end == len(text) or not _is_word_char(text[end])):
            return True
        start = text.find(name, start + 1)
    return False


def _keys(text: str) -> set[str]:
    """The words of ``text`` that index defining sentences: those opening with a capital or a digit."""
    return {w for w in re.findall(r"\w+", text) if w[0].isupper() or w[0].isdigit()}


def singular(word: str) -> str:
    """A lower-case plural's singular as a reader forms it ("rivers" river, "cities" city, "churches" church),
    else the word itself."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def synonyms(head: str) -> set[str]:
    """The head and every head a reader would accept for it."""
    out = {head}
    for group in TYPE_SYNONYMS:
        if head in group:
            out |= group
    return out


_DEFINES = re.compile(r"\b(?:is|was|are|were|(?:emerged|began|arose|developed|originated) as)\s+(?:an?|the|one of the)\s+"
                      r"([^.;:()]{2,200})")
"""A defining sentence as a reader takes it: "Neoclassicism emerged as a Western cultural movement" defines a
movement as much as "is a" would."""
_NOMINAL_END = re.compile(r"\s(?:that|which|who|whom|whose|where|when|of|in|on|at|from|for|with|by|to|as|is|was|"
                          r"known|located|used|made|based|found|native|born|between|into|within|during|since|"
                          r"under|over|about|around|after|before|via|like|such)\s", re.I)


def defining_phrase(text: str) -> str:
    """The predicate nominal of a page's defining sentence with all its conjuncts ("Russian Romantic
    writer, poet and painter"), empty when the sentence defines nothing."""
    m = _DEFINES.search(first_sentence(text, 300))
    if not m or m.start() > 200:
        return ""
    rest = m.group(1)
    end = _NOMINAL_END.search(" " + rest + " ")
    return rest[: max(0, end.start() - 1)] if end else rest


def title_head(title: str) -> list[str]:
    """The last word of a title of two words or more when it is written lower-case, the noun that names
    what the page is ("Martial arts", "Classical music"); none for a proper name ("Bass Strait")."""
    words = display_title(title).split()
    last = words[-1] if len(words) >= 2 else ""
    return tokenize(last) if last.isalpha() and last.islower() else []


@dataclass
class PlainReader:
    """The looser reading of a clue set over one simulator (one per process: it indexes the
    defining sentences of every page once, on first use)."""

    index: CorpusIndex
    sim: Any
    _defining: dict[str, set[int]] | None = field(default=None, repr=False)
    _texts: dict[int, str] = field(default_factory=dict, repr=False)
    _places: set[int] | None = field(default=None, repr=False)
    _firsts: dict[int, str] = field(default_factory=dict, repr=False)
    _lowers: dict[int, str | None] = field(default_factory=dict, repr=False)
    _words: OrderedDict[int, tuple[frozenset[str], frozenset[str]] | None] = field(default_factory=OrderedDict,
                                                                                    repr=False)
    _place_keys: dict[str, set[int]] | None = field(default=None, repr=False)
    _measures: OrderedDict[int, frozenset[str]] = field(default_factory=OrderedDict, repr=False)
    _aliases: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    # --- what the reader accepts for one entity ------------------------------------------
    def defining_words(self) -> dict[str, set[int]]:
        """Lower-cased word -> pages whose defining phrase holds it (every conjunct of "X is a
        Russian writer, poet and painter", up to the first relative clause or preposition), a plural
        also as its singular ("the Dnieper is one of the major transboundary rivers": a river), or whose
        title ends in it lower-case (:func:`title_head`: "Martial arts" are an art, whatever their
        defining sentence says). The same pass reads the other names a person's first sentence gives
        (:func:`~sailorfog.describe.other_names`, none that is another page's title), by which a reader also
        knows the page."""
        if self._defining is None:
            words: dict[str, set[int]] = {}
            for pid in range(len(self.index)):
                said = tokenize(defining_phrase(self.text(pid))) + title_head(self.index.titles[pid])
                kind = self.index.page_type[pid]
                known = tuple(n for n in other_names(self.text(pid)) if len(n) >= 4 and n not in self.index.ids
                              and n.lower() not in PERSON_HEADS | PLACE_HEADS) \
                    if kind and kind[-1].lower() in PERSON_HEADS else ()  # ("Prince" is read in any case)
                if known:  # "Dante Alighieri, widely known mononymously as Dante"
                    self._aliases[pid] = known
                for w in {form for w in said for form in (w, singular(w))}:
                    words.setdefault(w, set()).add(pid)
            self._defining = words
        return self._defining

    def text(self, pid: int) -> str:
        found = self._texts.get(pid)
        if found is None:
            found = self._texts[pid] = (self.sim.page(self.index.titles[pid]) or {}).get("text", "")[:20_000]
        return found

    def _lower(self, pid: int) -> str | None:
        """The page's text in lower case, ``None`` when it holds a :data:`~wiki_sim.snippets.CASE_ODDITIES`
        character (kept once read)."""
        if pid not in self._lowers:
            text = self.text(pid)
            self._lowers[pid] = None if any(c in text for c in CASE_ODDITIES) else text.lower()
        return self._lowers[pid]

    def _word_sets(self, pid: int) -> tuple[frozenset[str], frozenset[str]] | None:
        """The words of the page's lower-case text and their 5- and 4-letter openings (the last
        :data:`WORD_SETS_KEPT` pages' kept); ``None`` where :meth:`_lower` is."""
        if pid in self._words:
            self._words.move_to_end(pid)
            return self._words[pid]
        low = self._lower(pid)
        if low is None:
            found = None
        else:
            words = frozenset(_WORD.findall(low))
            found = (words, frozenset(w[:n] for w in words for n in (4, 5) if len(w) >= n))
        self._words[pid] = found
        if len(self._words) > WORD_SETS_KEPT:
            self._words.popitem(last=False)
        return found

    def defining_sentence(self, pid: int) -> str:
        """The page's first sentence, where a place says what it lies in (kept once read)."""
        found = self._firsts.get(pid)
        if found is None:
            found = self._firsts[pid] = first_sentence(self.text(pid), 300)
        return found

    def _defining_mentions(self, pages: set[int], name: str) -> set[int]:
        """The pages of ``pages`` whose defining sentence may hold ``name`` as whole words: every word of a
        name found in a text is a whole word there too, so a place qualifies only if its sentence has the
        name's words that open with a capital or a digit (looked up in an index of the places' sentences);
        other pages all do."""
        keys = _keys(name)
        if not keys:
            return pages
        if self._place_keys is None:
            index: dict[str, set[int]] = {}
            for p in self.places():
                for w in _keys(self.defining_sentence(p)):
                    index.setdefault(w, set()).add(p)
            self._place_keys = index
        places = self.places()
        found = min((self._place_keys.get(k, set()) for k in keys), key=len)
        return (pages & found) | (pages - places)

    def type_pages(self, s: Statement) -> set[int]:
        """Pages a reader takes to be of the stated type: the head in the defining sentence, or the
        verifier's own type pages (a superset of both)."""
        exact = set(unary_pages(self.index, s.checks[0]).tolist())
        if s.value == "person":
            return exact | set(self.index.with_person())
        *modifiers, head = s.value.lower().split()
        by_head = set()
        for word in synonyms(head):
            for key in tokenize(word):
                by_head |= self.defining_words().get(key, set())
        stated = [m for m in modifiers if m not in UNSTATED_MODIFIERS]
        if "extinct" in stated:  # a page on a fossil taxon need not say "extinct"
            stated.remove("extinct")
            by_head = {p for p in by_head if _EXTINCT.search(self.text(p))}
        if stated:  # "a landlocked country": the page says "landlocked" somewhere
            pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(m) for m in stated) + r")(?!\w)", re.I)
            by_head = {p for p in by_head if len(set(m.lower() for m in pattern.findall(self.text(p))))
                       == len(set(stated))}
        if head in PERSON_HEADS:
            by_head &= set(self.index.with_person()) | exact | set().union(
                *(self.defining_words().get(w, set()) for w in synonyms(head) if w in PERSON_HEADS))
        return exact | by_head

    def measures(self, pid: int) -> frozenset[str]:
        """What the page's quantities may measure (:func:`sailorfog.describe.loose_measure`, over the first 12
        quantities of its first 6,000 characters; the last :data:`WORD_SETS_KEPT` pages' kept)."""
        if pid in self._measures:
            self._measures.move_to_end(pid)
            return self._measures[pid]
        found = self._measures[pid] = frozenset(
            loose_measure(q.get("sentence", ""), q.get("text", ""), q.get("unit") or "")
            for q in extract_numbers(self.text(pid), max_chars=6000, max_items=12)) - {None}
        if len(self._measures) > WORD_SETS_KEPT:
            self._measures.popitem(last=False)
        return found

    def unstated(self, s: Statement, pages: set[int]) -> set[int]:
        """The pages of ``pages`` that state no quantity of the number statement's measure (none beyond
        :data:`MAX_UNSTATED` pages)."""
        if len(pages) > MAX_UNSTATED:
            return set()
        return {p for p in pages if s.predicate not in self.measures(p)}

    def unary(self, s: Statement) -> set[int]:
        if s.kind == "type":
            return self.type_pages(s)
        pages: set[int] | None = None
        for check in s.checks:
            found = set(unary_pages(self.index, check).tolist())
            if check.get("type") == "year":
                found |= self.described_years(int(check["lo"]), int(check["hi"]))
            pages = found if pages is None else pages & found
        return pages if pages is not None else set(range(len(self.index)))

    def described_years(self, lo: int, hi: int) -> set[int]:
        """Pages whose short description names a year from ``lo`` to ``hi`` ("Prime Minister of India from 1947
        to 1964" ties Nehru to the 1960s for a reader, though his lead gives no year of them)."""
        out: set[int] = set()
        for year in range(lo, min(hi, lo + MAX_YEARS) + 1):
            out |= self.index.with_words([str(year)], description=True)
        return out

    # --- what the reader accepts for a relation ---------------------------------------------
    def _mentions(self, texts_of: Iterable[int], names_of: Iterable[int], defining: bool = False) -> set[int]:
        """Pages of ``texts_of`` whose text (``defining``: first sentence, where a place says what it lies
        in) names a page of ``names_of``: its title or short title as whole words, read loosely in the text
        (long words by their stem, any case: a page on a "Romantic" composer names Romanticism)."""
        names = self._names(names_of)
        if not names:
            return set()
        if defining:  # a name at a time, on the few places whose sentence has its capitalized words
            pages, out = set(texts_of), set()
            for n in names:
                out |= {p for p in self._defining_mentions(pages - out, n) if _has_word(self.defining_sentence(p), n)}
            return out
        return {p for p, _ in self._mention_pairs(texts_of, names)}

    def _named(self, texts_of: Iterable[int], names_of: Iterable[int]) -> set[int]:
        """Pages of ``names_of`` that some text of ``texts_of`` names (read as :meth:`_mentions` reads): one
        scan of the texts for all the names, where a :meth:`_mentions` per name scans them once each."""
        names = self._names(names_of)
        return {q for _, q in self._mention_pairs(texts_of, names, every=True)} if names else set()

    def _names(self, pages: Iterable[int]) -> dict[str, int]:
        """Each page's title, short title and the other names its defining sentence gives ("widely known
        mononymously as Dante"), four characters or more -> the page."""
        names = {}
        self.defining_words()  # reads the other names
        for p in pages:
            title = self.index.titles[p]
            for n in {title, display_title(title), *self._aliases.get(p, ())}:
                if len(n) >= 4:
                    names[n] = p
        return names

    def _mention_pairs(self, texts_of: Iterable[int], names: Mapping[str, int],
                       every: bool = False) -> Iterator[tuple[int, int]]:
        """(text page, named page) for the texts of ``texts_of`` that name a page of ``names`` loosely: the
        first name found in each text, or (``every``) each page the first time some text names it."""
        # names by the word a text must hold for them (:func:`_word_key`): a text's candidates are read off
        # its own words, then checked by their keys and their own pattern
        by_word: dict[str, list[str]] = {}
        by_opening: dict[str, list[str]] = {}
        always: list[str] = []
        for n in names:
            wk = _word_key(n)
            if wk is None:
                always.append(n)
            else:
                (by_word if wk[0] else by_opening).setdefault(wk[1], []).append(n)
        words, openings = frozenset(by_word), frozenset(by_opening)
        done: set[int] = set()
        wanted = len(set(names.values()))
        for p in texts_of:
            sets, low = self._word_sets(p), self._lower(p)
            if sets is None:
                found = list(names)
            else:
                found = always + [n for w in sets[0] & words for n in by_word[w]] \
                    + [n for w in sets[1] & openings for n in by_opening[w]]
            for n in found:
                if every and names[n] in done:
                    continue
                if low is None:  # a text with case oddities: the pattern itself
                    hit = _loose_pattern((n,)).search(self.text(p)) is not None
                elif not all(k in low for k in _loose_keys(n)):
                    hit = False
                else:  # an ASCII name in the lower-case text; any other by its pattern
                    hit = _loose_in_lower(low, n) if n.isascii() else \
                        _loose_pattern((n,)).search(self.text(p)) is not None
                if hit:
                    yield p, names[n]
                    if not every:
                        break
                    done.add(names[n])
            if every and len(done) == wanted:
                return

    def related(self, xs: set[int], ys: set[int], place: bool) -> set[int]:
        """The pages of ``xs`` a reader relates to some page of ``ys``."""
        linked_ys = self._linked(ys)
        out = xs & linked_ys
        if len(ys) <= MAX_NAMES and len(xs) <= 8 * MAX_NAMES:
            out |= self._mentions(xs - out, ys)
        if len(xs) <= MAX_NAMES:
            rest = xs - out
            back = self._mentions(ys, rest) if rest else set()
            if back:  # x is related when a page of ``back`` links to it or names it (one scan of back for all x)
                linked_back = self._linked(back)
                out |= {x for x in rest if x in linked_back} | self._named(back, rest - linked_back)
        if place and len(ys) <= MAX_NAMES:  # containment: x is linked with a place that lies in y
            out |= xs & self._linked(self._mentions(self.places() - ys, ys, defining=True))
        if place and len(xs - out) <= MAX_CONTAINERS:  # or x contains a place linked with some y
            near = (self.places() & linked_ys) - xs
            out |= {x for x in xs - out if self._mentions(near, [x], defining=True)}
        return out

    def _linked(self, pages: Iterable[int]) -> set[int]:
        """Every page linked with some page of ``pages`` (one read of the link rows)."""
        _, values = self.index.neighbors.gather(pages)
        return set(values.tolist())

    def places(self) -> set[int]:
        """Pages whose type is a place's (countries, cities, regions, seas, ...)."""
        if self._places is None:
            self._places = {p for p in range(len(self.index)) if self.index.page_type[p]
                            and self.index.page_type[p][-1].lower() in PLACE_HEADS}
        return self._places

    # --- the answer's candidates ------------------------------------------------------------
    def candidates(self, statements: Sequence[Statement], target: str = "X", max_rounds: int = 20,
                   answer: int | None = None) -> set[int]:
        """The answer's candidate pages under the reader's reading of ``statements``; given the ``answer``'s
        page, it stops as soon as no other page is left (the rest could only remove the answer too)."""
        labels = sorted({lab for s in statements for lab in s.labels})
        doms: dict[str, set[int]] = {}
        for s in statements:
            if s.kind not in ("relation", "number"):
                pages = self.unary(s)
                doms[s.subject] = pages if s.subject not in doms else doms[s.subject] & pages
        for s in statements:  # a page that does not give the measure does not rule the quantity out
            if s.kind == "number":
                pages = self.unary(s)
                if s.subject in doms:
                    pages = (doms[s.subject] & pages) | self.unstated(s, doms[s.subject])
                doms[s.subject] = pages
        everything = set(range(len(self.index)))
        for lab in labels:
            doms.setdefault(lab, everything)
        rels = [s for s in statements if s.kind == "relation"]
        heads = {s.subject: s.value.split()[-1].lower() for s in statements if s.kind == "type"}
        for _ in range(max_rounds):
            changed = False
            for s in rels:  # a place predicate, or any tie to a place ("a species associated with a continent")
                place = s.predicate in PLACE_PREDICATES or heads.get(s.object) in PLACE_HEADS \
                    or heads.get(s.subject) in PLACE_HEADS
                for a, b in ((s.subject, s.object), (s.object, s.subject)):
                    new = self.related(doms[a], doms[b], place)
                    if len(new) < len(doms[a]):
                        doms[a], changed = new, True
                        if answer is not None and doms[target] <= {answer}:
                            return set(doms[target])
            if not changed:
                break
        # one page is one entity where the question says so: a label pinned to a page leaves it to no other
        # when a relation ties the two (nothing "is connected with" itself), the question says the answer is
        # not it (:attr:`Statement.apart`) or the prose counts them apart
        # ("another philosopher", "the second city": types alike); "a nationalist" and later "a politician",
        # both named by one economist, may be one man (audit, seed 21313: Nehru beside Modi)
        kinds = {s.subject: s.value.lower() for s in statements if s.kind == "type"}
        tied = {s.object if s.subject == target else s.subject for s in rels if target in (s.subject, s.object)}
        tied |= {lab for s in statements if s.subject == target for lab in s.apart}  # "other than this nationalist"
        pinned = {next(iter(d)) for lab, d in doms.items() if lab != target and len(d) == 1
                  and (lab in tied or not (kinds.get(lab) and kinds.get(target))
                       or types_alike(kinds[lab], kinds[target]))}
        return doms.get(target, set()) - pinned
