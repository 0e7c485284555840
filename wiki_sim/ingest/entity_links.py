"""Derive links for corpora without wikilinks: a title found in a text links only where it names the entity.

:class:`EntityLinker` replaces plain title matching (:class:`~wiki_sim.ingest.link_finder.LinkFinder`,
kept as the benchmark's baseline) for the default corpus and JSONL corpora. Matching is the
same single linear scan (longest title first, each target once per page, never the page
itself, nothing glued to a hyphenated word); what is new is *whether a match names the
entity*:

- **Case tells a name from a word.** Each title learns from its own page how that page
  writes it mid-sentence (:meth:`EntityLinker.learn`): ``Peanuts`` (the comic strip)
  capitalized, so a lower-case ``peanuts`` is the snack and never links; ``water``
  lower case, so a capitalized ``Water`` mid-sentence is some other named thing. A
  lower-case mention links only to a title its page writes in lower case and that is not an
  everyday English word (``communism``, ``albedo`` link; ``thought``, ``party``, ``shape``,
  ``switch``, ``river`` do not: their English frequency, from ``wordfreq``, is at least
  :data:`EVERYDAY_ZIPF`). A title the page never writes mid-sentence is judged by that
  frequency alone: a rare word may be a name or a term and links when capitalized (in lower
  case only below :data:`UNKNOWN_LOWER_ZIPF`; a rare phrase, ``theory of relativity``,
  links); an everyday word (``Thought``) links only capitalized mid-sentence (proper-noun
  case), never at a sentence start, never in lower case.
- **A word inside a longer name is not the article.** A one-word title does not link inside
  a longer capitalized name (``Amazon River``, ``Apollo 13``, ``Ada Lovelace``, ``University
  of Chicago``), nor in lower case after a capitalized word (``English alphabet``).
- **Plurals** of a common noun link to it (``mammals``, ``Mammals are``).
- **Disambiguated titles need their qualifier.** ``Berlin (band)`` is found as ``Berlin``
  only when no page is titled ``Berlin`` (the plain title wins) and the sentence supports
  the qualifier (says ``band``); when several variants are supported, none links. Pages
  titled ``X (disambiguation)`` are never link targets.
- Redirects (``aliases``) match in their exact case, like a capitalized title.

Usage: ``linker = EntityLinker(titles); linker.learn((title, text) for every page)``, then
``linker.find(text, self_title) -> [FoundLink(target, anchor, start, end)]``; a corpus read
in one pass gives :func:`own_usage` per page to :meth:`EntityLinker.set_usage` instead.

Every decision is O(1) per candidate token (sentence word sets are built once per sentence),
so :meth:`EntityLinker.find` is linear in the text, hostile text included. Each link keeps
its offsets in the text, so the store records the sentence that really carries it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Literal, Mapping

from wiki_sim.ingest.link_finder import LOWERCASE_STOP, _hyphen_glued
from wiki_sim.sentences import sentence_spans

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[^\W\d_]{3,}")
_NOT_A_NAME = re.compile(r"^[\d\W_]+$")
_QUALIFIED = re.compile(r"^(.+?) \(([^()]+)\)$")
EVERYDAY_ZIPF = 4.5
"""A word at least this frequent in English (Zipf scale: 4.5 is about 3 per 100,000 words;
``thought`` 5.6, ``river`` 5.0, ``shape`` 4.7, ``switch`` 4.6 are everyday; ``physics`` 4.4,
``communism`` 3.8, ``albedo`` 2.6 are terms) is an everyday word."""
EVERYDAY_PHRASE_ZIPF = 5.0
"""The same for a multi-word title written in lower case (``all the way`` 5.9; ``political
philosophy`` 4.4): wordfreq's estimate for a phrase is already below its rarest word's."""
UNKNOWN_LOWER_ZIPF = 3.0
"""A one-word title whose page never writes it mid-sentence links in lower case only below
this frequency (a technical term: ``albedo``); ``peanuts`` (3.5) might be the snack."""
_QUALIFIER_STOP = frozenset("the and for with from of in on at to by an or".split())
# Capitalized only because they open a sentence: "The Queen", "In Berlin" are not longer names.
_OPENERS = frozenset("the a an in on at by for from with this that these those his her its their our after before "
                     "during when while as of to and but or if since although under over between many some most "
                     "both all each every other another such one two it he she they we there".split())
_SENTENCE_START_SKIP = "\"'([“‘«*#-–— \t"

Usage = Literal["name", "word", "unknown"]


@dataclass(frozen=True)
class FoundLink:
    """A derived link: ``text[start:end]`` is ``anchor`` and names page ``target``."""

    target: str
    anchor: str
    start: int
    end: int


@lru_cache(maxsize=1)
def _zipf():
    try:
        from wordfreq import zipf_frequency
    except ImportError as exc:  # a core dependency; a broken install should say so
        raise ImportError("deriving links needs wordfreq: pip install wordfreq (or reinstall websailor-gym)") from exc
    return zipf_frequency


def english_zipf(phrase: str) -> float:
    """Zipf frequency of ``phrase`` in English (0 for an unknown word)."""
    return _zipf()(phrase, "en")


def qualifier_words(qualifier: str) -> frozenset[str]:
    """Content words of a disambiguator: ``'1999 film'`` -> ``{'film'}``; plural ``s`` dropped."""
    words = {w.lower() for w in _WORD.findall(qualifier)} - _QUALIFIER_STOP
    return frozenset(_singular(w) for w in words)


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _lower_first(token: str) -> str:
    return token[:1].lower() + token[1:]


def sentence_start(text: str, start: int, limit: int = 12) -> bool:
    """Whether the word at ``start`` begins a sentence, line or text (quotes and brackets skipped)."""
    i = start - 1
    stop = max(-1, start - 1 - limit)
    while i > stop and text[i] in _SENTENCE_START_SKIP:
        i -= 1
    if i <= stop:
        return i < 0
    return text[i] in ".!?:;\n\r" or (text[i] == " " and i == 0)


def own_usage(title: str, text: str) -> tuple[int, int]:
    """``(capitalized, lower-case)``: how often ``text`` writes ``title`` (without its disambiguator)
    mid-sentence in each case. ``the Beatles`` counts as capitalized: only an all-lower-case
    mention is a common word's."""
    m = _QUALIFIED.match(title)
    name = m.group(1) if m else title
    cap = lower = 0
    if not name or not text:
        return 0, 0
    for hit in re.finditer(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, re.IGNORECASE):
        if sentence_start(text, hit.start()):
            continue
        found = hit.group(0)
        if found == name or found == _lower_first(name):
            if found.lower() == found:
                lower += 1
            else:
                cap += 1
    return cap, lower


@dataclass
class _Title:
    title: str
    single: bool
    """One word (``Thought``) rather than a phrase."""
    everyday: bool
    """Everyday English (Zipf >= EVERYDAY_ZIPF, or a phrase >= EVERYDAY_PHRASE_ZIPF, or a stop word)."""
    zipf: float
    usage: Usage = "unknown"
    cap: int = 0
    lower: int = 0


class EntityLinker:
    """Find mentions of known titles that name their pages; see the module docstring for the rules.

    ``titles``: the corpus's page titles; ``aliases``: redirect -> title (matched in exact
    case). Call :meth:`learn` with every ``(title, text)`` of the corpus before :meth:`find`
    (without it every title is judged by its English frequency alone).
    """

    def __init__(self, titles: Iterable[str], aliases: Mapping[str, str] | None = None, *,
                 min_chars: int = 3, max_tokens: int = 12):
        titles = [t for t in dict.fromkeys(titles) if not t.endswith("(disambiguation)")]
        title_set = set(titles)
        self._min_chars, self._max_tokens = min_chars, max_tokens
        self.info: dict[str, _Title] = {}
        # key -> ("title", target) | ("lower", target) | ("alias", target) | ("variant", ((target, words), ...))
        self.table: dict[tuple[str, ...], tuple[str, object]] = {}
        variants: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for t in titles:
            m = _QUALIFIED.match(t)
            if m and m.group(1) not in title_set:
                variants.setdefault(m.group(1), []).append((t, qualifier_words(m.group(2))))
        for t in titles:
            self._add_title(t)
        for alias, target in (aliases or {}).items():
            if alias not in title_set and target in title_set:
                self._add(alias, ("alias", target))
        for base, options in variants.items():
            self._add(base, ("variant", tuple(o for o in options if o[1])))
        self._live: tuple[dict, dict] | None = None

    def _key(self, name: str) -> tuple[str, ...] | None:
        if len(name) < self._min_chars or _NOT_A_NAME.match(name):
            return None
        tokens = tuple(_TOKEN.findall(name))
        return tokens if tokens and len(tokens) <= self._max_tokens else None

    def _add(self, name: str, entry: tuple[str, object]) -> None:
        key = self._key(name)
        if key is None or key in self.table:
            return  # titles first: a real title displaces nothing and is displaced by nothing
        self.table[key] = entry

    def _add_title(self, title: str) -> None:
        key = self._key(title)
        if key is None:
            return
        words = [t for t in key if t[:1].isalpha()]
        single = len(words) == 1
        plain = " ".join(_lower_first(w) for w in key)
        zipf = english_zipf(plain) if words else 0.0
        everyday = (zipf >= (EVERYDAY_ZIPF if single else EVERYDAY_PHRASE_ZIPF)
                    or (single and key[0].lower() in LOWERCASE_STOP))
        self.info[title] = _Title(title, single, everyday, zipf)
        self.table[key] = ("title", title)
        lowered = (_lower_first(key[0]),) + key[1:]
        if lowered != key and lowered not in self.table:
            self.table[lowered] = ("lower", title)
        if key[-1].isalpha() and key[-1].islower() or (single and key[0].isalpha()):
            # Plurals of a common noun: "mammals", "algae" stays as it is.
            last = key[-1]
            plural = last[:-1] + "ies" if last.endswith("y") and last[-2:-1] not in "aeiou" else \
                last + "es" if last.endswith(("s", "x", "z", "ch", "sh")) else last + "s"
            for k in {key[:-1] + (plural,), (lowered[:-1] + (plural,)) if len(key) > 1 else (_lower_first(plural),)}:
                if k not in self.table:
                    self.table[k] = ("plural", title)

    # --- learning how each page writes its own name -------------------------------------
    def learn(self, pages: Iterable[tuple[str, str]]) -> None:
        """Read how each page writes its own title mid-sentence (capitalized or not)."""
        self.set_usage({title: own_usage(title, text) for title, text in pages if title in self.info})

    def set_usage(self, usage: Mapping[str, tuple[int, int]]) -> None:
        """``title -> (capitalized, lower-case)`` mid-sentence mentions of the title in its own page
        (:func:`own_usage`), for a corpus read in one streaming pass before the linker is made."""
        for title, (cap, lower) in usage.items():
            info = self.info.get(title)
            if info is not None:
                info.cap, info.lower = cap, lower
                info.usage = "name" if cap > lower else "word" if lower > cap else "unknown"
        self._live = None

    def _compiled(self) -> tuple[dict, dict]:
        """The table without lower-case keys that can never link (everyday words: "the", "water"),
        and the key lengths by first token; rebuilt after :meth:`set_usage`. Dropping them changes
        no result (a key judged not to link consumes nothing) and spares the scan most candidates."""
        if self._live is None:
            table = {}
            for key, entry in self.table.items():
                kind, value = entry
                if kind in ("lower", "plural") and not any(c.isupper() for t in key for c in t) \
                        and not _lower_ok(self.info[value]):  # type: ignore[index]
                    continue
                table[key] = entry
            starts: dict[str, set[int]] = {}
            for key in table:
                starts.setdefault(key[0], set()).add(len(key))
            self._live = table, {first: sorted(ls, reverse=True) for first, ls in starts.items()}
        return self._live

    # --- finding ------------------------------------------------------------------------
    def find(self, text: str, self_title: str = "") -> list[FoundLink]:
        """The first mention of each page named in ``text``, in reading order."""
        tokens = _TOKEN.findall(text)
        table, lengths = self._compiled()
        # Only tokens that begin some name need work; the scan skips the rest in C.
        candidates = [i for i, t in enumerate(tokens) if t in lengths]
        if not candidates:
            return []
        spans: list[tuple[int, int]] = []
        n = len(tokens)
        found: list[FoundLink] = []
        seen = {self_title}
        context = _Context(text)
        resume = 0
        for i in candidates:
            if i < resume:
                continue  # inside the previous match
            for length in lengths[tokens[i]]:
                if i + length > n:
                    continue
                entry = table.get(tuple(tokens[i:i + length]))
                if entry is None:
                    continue
                if not spans:
                    spans = [m.span() for m in _TOKEN.finditer(text)]
                start, end = spans[i][0], spans[i + length - 1][1]
                if _hyphen_glued(text, start, end):
                    continue
                target = self._judge(entry, tokens, i, length, text, start, end, context)
                if target is None:
                    continue
                resume = i + length
                if target not in seen:
                    seen.add(target)
                    found.append(FoundLink(target, text[start:end], start, end))
                break
        return found

    def _judge(self, entry: tuple[str, object], tokens: list[str], i: int, length: int, text: str, start: int,
               end: int, context: _Context) -> str | None:
        """The page this match names, or ``None`` when it does not name one."""
        kind, value = entry
        if kind == "variant":
            words = context.words_at(start)
            supported = [t for t, q in value if q <= words]  # type: ignore[union-attr]
            if len(supported) != 1:
                return None
            return supported[0] if not _inside_name(tokens, i, length) else None
        if kind == "alias":
            return value  # type: ignore[return-value]
        info = self.info[value]  # type: ignore[index]
        if kind == "plural":  # only a common noun has a plural: "mammals", "Mammals are ..."
            return info.title if _lower_ok(info) and not _inside_name(tokens, i, length) \
                and not _after_name(tokens, i) else None
        if text[start:end] == text[start:end].lower():
            if info.single and _after_name(tokens, i):
                return None  # "English alphabet", "Azerbaijani animation": a kind of its own
            return info.title if _lower_ok(info) else None
        if info.single and _inside_name(tokens, i, length):
            return None  # "Apollo 13", "Ada Lovelace", "Amazon River", "Asia Minor": another name
        if sentence_start(text, start):
            return info.title if info.usage == "name" or _lower_ok(info) or (
                info.usage == "unknown" and not info.everyday) else None
        if info.usage == "word" and info.single:
            return None  # "Apple" mid-sentence is not the fruit its page writes as "apple"
        return info.title


def _lower_ok(info: _Title) -> bool:
    """Whether a lower-case mention names this page."""
    if info.usage == "name" or info.everyday:
        return False
    # A rare lower-case phrase ("theory of relativity") is the term; a lone word might be a name.
    return info.usage == "word" or not info.single or info.zipf < UNKNOWN_LOWER_ZIPF


def _cap(tokens: list[str], i: int) -> bool:
    return 0 <= i < len(tokens) and tokens[i][:1].isupper()


def _inside_name(tokens: list[str], i: int, length: int) -> bool:
    """Whether the match is part of a longer capitalized name: ``Amazon River``, ``Republic of Ireland``."""
    j = i + length
    if _cap(tokens, j) or (j < len(tokens) and tokens[j].isdigit()):
        return True
    if i > 0 and _cap(tokens, i - 1) and not (sentence_start_token(tokens, i - 1)
                                              and tokens[i - 1].lower() in _OPENERS):
        return True
    if i >= 2 and tokens[i - 1] == "of" and _cap(tokens, i - 2):
        return True  # "Ministry of Information", "University of Chicago"
    if i >= 3 and tokens[i - 1] == "s" and tokens[i - 2] in ("'", "’") and _cap(tokens, i - 3):
        return True
    return j + 1 < len(tokens) and tokens[j] == "of" and _cap(tokens, j + 1)


def _after_name(tokens: list[str], i: int) -> bool:
    """Whether the word at ``i`` follows a capitalized word that does not just open the sentence."""
    return i > 0 and _cap(tokens, i - 1) and not (sentence_start_token(tokens, i - 1)
                                                  and tokens[i - 1].lower() in _OPENERS)


def sentence_start_token(tokens: list[str], i: int) -> bool:
    """Whether token ``i`` is the first of a sentence (by the token before it)."""
    return i == 0 or tokens[i - 1] in (".", "!", "?", ":", ";")


class _Context:
    """Sentence word sets of one text, built lazily, once per sentence (keeps find linear)."""

    def __init__(self, text: str):
        self.text = text
        self._spans: list[tuple[int, int]] | None = None
        self._starts: list[int] = []
        self._words: dict[int, frozenset[str]] = {}

    def words_at(self, pos: int) -> frozenset[str]:
        if self._spans is None:
            self._spans = sentence_spans(self.text)
            self._starts = [s for s, _ in self._spans]
        k = max(0, bisect_right(self._starts, pos) - 1)
        words = self._words.get(k)
        if words is None:
            # The sentence and the one before it: "Berlin were a new wave group. Berlin released ..."
            lo = self._spans[k - 1][0] if k > 0 else (self._spans[k][0] if self._spans else 0)
            hi = self._spans[k][1] if self._spans else len(self.text)
            words = frozenset(_singular(w.lower()) for w in _WORD.findall(self.text, lo, hi))
            self._words[k] = words
        return words
