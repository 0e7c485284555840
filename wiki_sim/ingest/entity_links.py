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
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Literal, Mapping

import numpy as np

from wiki_sim.ingest.link_finder import LOWERCASE_STOP, _hyphen_glued
from wiki_sim.ingest.name_table import HashTable, SortedHashes, TitleList, expand_ranges, hashes
from wiki_sim.ingest.name_usage import QUALIFIED, lower_first, own_usage, sentence_start
from wiki_sim.sentences import sentence_spans

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[^\W\d_]{3,}")
_NOT_A_NAME = re.compile(r"^[\d\W_]+$")
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


# Title flags (one byte a title) and entry kinds (one byte an entry) of the compact tables.
_HAS_INFO, _SINGLE, _EVERYDAY, _RARE, _NAME, _WORD_USAGE = 1, 2, 4, 8, 16, 32
_TITLE, _LOWER, _PLURAL, _ALIAS, _VARIANT, _UPPER = 0, 1, 2, 3, 4, 8
_KIND_NAMES = {_TITLE: "title", _LOWER: "lower", _PLURAL: "plural", _ALIAS: "alias", _VARIANT: "variant"}
_CLASS = 1 << 40
"""Precedence of a key's entries: any title (the last one), then the first lower-case form or
plural, then the first alias, then the first variant: what inserting them one by one into a
dict (titles overwriting, the rest only where free) leaves."""


class EntityLinker:
    """Find mentions of known titles that name their pages; see the module docstring for the rules.

    ``titles``: the corpus's page titles (any iterable, or a :class:`~wiki_sim.ingest.name_table.TitleList`);
    ``aliases``: redirect -> title (matched in exact case). Call :meth:`learn` with every
    ``(title, text)`` of the corpus before :meth:`find` (without it every title is judged by
    its English frequency alone).

    Held compactly (:mod:`wiki_sim.ingest.name_table`): the titles as one blob, one flag byte
    a title, and each name key as a 64-bit hash with its kind and target in sorted arrays:
    about 100 bytes a title, not the 2 KB of Python strings, tuples and dicts.
    """

    def __init__(self, titles: Iterable[str], aliases: Mapping[str, str] | None = None, *,
                 min_chars: int = 3, max_tokens: int = 12):
        self._min_chars, self._max_tokens = min_chars, max_tokens
        self.titles = titles if isinstance(titles, TitleList) else TitleList(titles)
        n = len(self.titles)
        self._flags = np.zeros(n, dtype=np.uint8)
        included = np.zeros(n, dtype=bool)
        title_hashes = hashes(self.titles, n)
        included[np.unique(title_hashes, return_index=True)[1]] = True  # first of each title
        for i, t in enumerate(self.titles):
            if included[i] and t.endswith("(disambiguation)"):
                included[i] = False
        kept = np.flatnonzero(included)
        self._title_index = HashTable(title_hashes[kept], kept)
        del title_hashes
        entries = _Entries()
        for i in kept.tolist():
            self._add_title(i, self.titles[i], entries)
        for order, (alias, target) in enumerate((aliases or {}).items()):
            t = self._index_of(target)
            if self._index_of(alias) < 0 and t >= 0:
                self._add(alias, _ALIAS, t, 2 * _CLASS + order, entries)
        self._add_variants(kept, entries)
        self._resolve(entries)
        self._live: tuple[np.ndarray, HashTable] | None = None

    def _index_of(self, title: str) -> int:
        return self._title_index.get(hash(title))

    def _key(self, name: str) -> tuple[str, ...] | None:
        if len(name) < self._min_chars or _NOT_A_NAME.match(name):
            return None
        tokens = tuple(_TOKEN.findall(name))
        return tokens if tokens and len(tokens) <= self._max_tokens else None

    def _add(self, name: str, kind: int, value: int, prio: int, entries: "_Entries") -> None:
        key = self._key(name)
        if key is not None:
            entries.add(key, kind, value, prio)

    def _add_title(self, i: int, title: str, entries: "_Entries") -> None:
        key = self._key(title)
        if key is None:
            return
        words = [t for t in key if t[:1].isalpha()]
        single = len(words) == 1
        plain = " ".join(lower_first(w) for w in key)
        zipf = english_zipf(plain) if words else 0.0
        everyday = (zipf >= (EVERYDAY_ZIPF if single else EVERYDAY_PHRASE_ZIPF)
                    or (single and key[0].lower() in LOWERCASE_STOP))
        self._flags[i] = _HAS_INFO | (_SINGLE if single else 0) | (_EVERYDAY if everyday else 0) \
            | (_RARE if zipf < UNKNOWN_LOWER_ZIPF else 0)
        entries.add(key, _TITLE, i, _CLASS - 1 - i)
        lowered = (lower_first(key[0]),) + key[1:]
        if lowered != key:
            entries.add(lowered, _LOWER | _upper(lowered), i, _CLASS + 4 * i)
        if key[-1].isalpha() and key[-1].islower() or (single and key[0].isalpha()):
            # Plurals of a common noun: "mammals", "algae" stays as it is.
            last = key[-1]
            plural = last[:-1] + "ies" if last.endswith("y") and last[-2:-1] not in "aeiou" else \
                last + "es" if last.endswith(("s", "x", "z", "ch", "sh")) else last + "s"
            for k in {key[:-1] + (plural,), (lowered[:-1] + (plural,)) if len(key) > 1 else (lower_first(plural),)}:
                entries.add(k, _PLURAL | _upper(k), i, _CLASS + 4 * i + 1)

    def _add_variants(self, kept: np.ndarray, entries: "_Entries") -> None:
        """``X (qualifier)`` found as ``X`` where no page is titled ``X``: one entry per ``X``
        listing its titles that have qualifier words (in title order), each with the hashes of
        its qualifier words (flat arrays: a variant with many titles is judged in one pass)."""
        base_hash, members, counts, flat = array("q"), array("q"), array("q"), array("q")
        for i in kept.tolist():
            m = QUALIFIED.match(self.titles[i])
            if m and self._index_of(m.group(1)) < 0:
                words = qualifier_words(m.group(2))
                base_hash.append(hash(m.group(1)))
                members.append(i)
                counts.append(len(words))
                flat.extend(map(hash, words))
        self._var_offsets, self._var_titles = np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
        self._var_word_offsets, self._var_words = np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64)
        self._vw_pos, self._vw_starts = np.empty(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
        self._vw_index = SortedHashes(np.empty(0, dtype=np.int64))
        if not members:
            return
        bh, mem, nw = (np.frombuffer(a, np.int64) for a in (base_hash, members, counts))
        sw = np.r_[0, np.cumsum(nw)[:-1]]
        order = np.argsort(bh, kind="stable")  # groups of one base, each in title order
        bh, mem, nw, sw = bh[order], mem[order], nw[order], sw[order]
        starts = np.flatnonzero(np.r_[True, bh[1:] != bh[:-1]])
        group_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(bh)]))
        keep = nw > 0
        self._var_offsets = np.r_[0, np.cumsum(np.bincount(group_of[keep], minlength=len(starts)))].astype(np.int64)
        self._var_titles = mem[keep].astype(_index_dtype(len(self.titles)))
        opt_nw, opt_sw = nw[keep], sw[keep]
        self._var_word_offsets = np.r_[0, np.cumsum(opt_nw)].astype(np.int64)
        gather = np.repeat(opt_sw - self._var_word_offsets[:-1], opt_nw) + np.arange(int(opt_nw.sum()))
        self._var_words = np.frombuffer(flat, np.int64)[gather]
        # Every qualifier word keyed by (group, word): a sentence's words find the options they
        # support by lookup, however many options a group has (see _looked_up_supported).
        option_group = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(self._var_offsets))
        keys = _group_word_keys(np.repeat(option_group, opt_nw), self._var_words)
        self._vw_pos = np.argsort(keys, kind="stable").astype(_index_dtype(len(keys)))  # grouped by key
        keys = keys[self._vw_pos]
        distinct = np.ones(len(keys), dtype=bool)
        distinct[1:] = keys[1:] != keys[:-1]
        self._vw_starts = np.r_[np.flatnonzero(distinct), len(keys)].astype(_index_dtype(len(keys) + 1))
        self._vw_index = SortedHashes(keys[distinct])
        for g, first in enumerate(mem[starts].tolist()):  # a group's first title places it among the variants
            base = QUALIFIED.match(self.titles[first]).group(1)  # type: ignore[union-attr]
            self._add(base, _VARIANT, g, 3 * _CLASS + first, entries)

    def _resolve(self, entries: "_Entries") -> None:
        """Keep each key's winning entry (see :data:`_CLASS`), in arrays sorted by key hash."""
        h, prio = np.frombuffer(entries.hash, np.int64), np.frombuffer(entries.prio, np.int64)
        order = np.lexsort((prio, h))
        hs = h[order]
        win = order[np.r_[True, hs[1:] != hs[:-1]]] if len(hs) else order
        self._keys = h[win]
        self._kind = np.frombuffer(entries.kind, np.uint8)[win]
        self._value = np.frombuffer(entries.value, np.int64)[win].astype(_index_dtype(max(len(self.titles), len(h))))
        self._first = np.frombuffer(entries.first, np.int64)[win]
        self._length = np.frombuffer(entries.length, np.uint8)[win]
        self._key_index = SortedHashes(self._keys)

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables (titles, flags, keys, variants, and the compiled lookup)."""
        arrays = (self._flags, self._keys, self._kind, self._value, self._first, self._length, self._var_offsets,
                  self._var_titles, self._var_word_offsets, self._var_words, self._vw_pos, self._vw_starts,
                  self._vw_index.keys)
        live = (self._live[0].nbytes + self._live[1].nbytes) if self._live else 0
        live += self._title_index.nbytes + self._key_index.nbytes + self._vw_index.nbytes
        return self.titles.nbytes + sum(a.nbytes for a in arrays) + live

    @property
    def info(self) -> dict[str, dict[str, object]]:
        """Per title (for inspection, not for large corpora): ``single``, ``everyday``, ``usage``."""
        out = {}
        for i in np.flatnonzero(self._flags & _HAS_INFO).tolist():
            f = int(self._flags[i])
            out[self.titles[i]] = {"single": bool(f & _SINGLE), "everyday": bool(f & _EVERYDAY),
                                   "usage": _usage_name(f)}
        return out

    # --- learning how each page writes its own name -------------------------------------
    def learn(self, pages: Iterable[tuple[str, str]]) -> None:
        """Read how each page writes its own title mid-sentence (capitalized or not)."""
        for title, text in pages:
            i = self._index_of(title)
            if i >= 0 and self._flags[i] & _HAS_INFO:
                self._set_usage(i, *own_usage(title, text))
        self._live = None

    def set_usage(self, usage: Mapping[str, tuple[int, int]]) -> None:
        """``title -> (capitalized, lower-case)`` mid-sentence mentions of the title in its own page
        (:func:`own_usage`), for a corpus read in one streaming pass before the linker is made."""
        for title, (cap, lower) in usage.items():
            i = self._index_of(title)
            if i >= 0 and self._flags[i] & _HAS_INFO:
                self._set_usage(i, cap, lower)
        self._live = None

    def set_usage_codes(self, codes: bytes | bytearray) -> None:
        """Usage of the ``i``-th title given to the constructor as :func:`usage_code` ``codes[i]``
        (a streamed corpus's own usage, one byte a page, without a title -> usage dict)."""
        if len(codes) != len(self._flags):
            raise ValueError(f"expected one usage code per title ({len(self._flags)}), got {len(codes)}")
        usage = np.frombuffer(bytes(codes), np.uint8) & (_NAME | _WORD_USAGE)
        info = (self._flags & _HAS_INFO).astype(bool)
        self._flags[info] = (self._flags[info] & ~np.uint8(_NAME | _WORD_USAGE)) | usage[info]
        self._live = None

    def _set_usage(self, i: int, cap: int, lower: int) -> None:
        self._flags[i] = (int(self._flags[i]) & ~(_NAME | _WORD_USAGE)) | usage_code(cap, lower)

    def _compiled(self) -> tuple[np.ndarray, HashTable]:
        """Which keys can link (not lower-case keys of everyday words: "the", "water"), and the key
        lengths by first token; rebuilt after :meth:`set_usage`. Dropping them changes no result (a
        key judged not to link consumes nothing) and spares the scan most candidates."""
        if self._live is None:
            kind = self._kind & 7
            lower_form = ((kind == _LOWER) | (kind == _PLURAL)) & ((self._kind & _UPPER) == 0)
            lower_ok = _lower_ok_flags(self._flags)
            live = ~(lower_form & ~lower_ok[np.where(lower_form, self._value, 0)]) if len(self._flags) \
                else np.ones(len(self._keys), dtype=bool)
            first, length = self._first[live], self._length[live].astype(np.int64)
            order = np.argsort(first, kind="stable")
            first, masks = first[order], np.left_shift(1, length[order])
            starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]]) if len(first) else order
            masks = np.bitwise_or.reduceat(masks, starts) if len(first) else masks
            self._live = live, HashTable(first[starts], masks)
        return self._live

    # --- finding ------------------------------------------------------------------------
    def find(self, text: str, self_title: str = "") -> list[FoundLink]:
        """The first mention of each page named in ``text``, in reading order."""
        tokens = _TOKEN.findall(text)
        live, first = self._compiled()
        if not tokens or not len(first):
            return []
        # Only tokens that begin some name need work; every key they could start is looked up at once.
        pos = first.positions(hashes(tokens, len(tokens)))
        candidates = np.flatnonzero(pos >= 0)
        if not len(candidates):
            return []
        n = len(tokens)
        toks = tuple(tokens)  # a slice of a tuple is the key tuple itself: one allocation, not two
        starts: list[int] = []
        tries: list[tuple[int, ...]] = []
        keys: list[int] = []
        for i, mask in zip(candidates.tolist(), first.values[pos[candidates]].tolist()):
            lengths = _lengths(mask)
            if i + lengths[0] > n:  # longest first: only near the end are some too long
                lengths = tuple(k for k in lengths if i + k <= n)
            starts.append(i)
            tries.append(lengths)
            keys.extend([hash(toks[i:i + k]) for k in lengths])
        at_all = self._table_positions(np.array(keys, dtype=np.int64), live)
        hit = at_all >= 0
        if not hit.any():
            return []
        # Only candidates with some key in the tables can match (most have none): visit those alone.
        owner_rows = np.repeat(np.arange(len(tries)), [len(t) for t in tries])
        with_hits = np.unique(owner_rows[hit]).tolist()
        owner = owner_rows.tolist()
        offsets = np.r_[0, np.cumsum([len(t) for t in tries])].tolist()
        at = at_all.tolist()
        spans = [m.span() for m in _TOKEN.finditer(text)]
        found: list[FoundLink] = []
        seen = {self_title}
        context = _Context(text)
        # Every key that names a disambiguated variant is judged at once: its sentence's words
        # against all the options of its group (a base may have hundreds of qualified titles).
        rows = np.flatnonzero(hit)
        variant_rows = rows[(self._kind[at_all[rows]] & 7) == _VARIANT].tolist()
        variant_target = dict(zip(variant_rows, self._single_supported(
            [(int(self._value[at[r]]), context.word_hashes_at(spans[starts[owner[r]]][0])) for r in variant_rows])))
        resume = 0
        for t in with_hits:
            i, lengths = starts[t], tries[t]
            if i < resume:
                continue  # inside the previous match
            for r, (length, e) in enumerate(zip(lengths, at[offsets[t]:offsets[t + 1]]), offsets[t]):
                if e < 0:
                    continue
                start, end = spans[i][0], spans[i + length - 1][1]
                if _hyphen_glued(text, start, end):
                    continue
                kind = int(self._kind[e]) & 7
                if kind == _VARIANT:
                    target = variant_target[r]
                    target = None if target < 0 or _inside_name(tokens, i, length) else target
                else:
                    target = self._judge(kind, int(self._value[e]), tokens, i, length, text, start, end)
                if target is None:
                    continue
                resume = i + length
                title = self.titles[target]
                if title not in seen:
                    seen.add(title)
                    found.append(FoundLink(title, text[start:end], start, end))
                break
        return found

    def _table_positions(self, keys: np.ndarray, live: np.ndarray) -> np.ndarray:
        """Row of each key hash in the tables, -1 where absent or unable to link."""
        pos = self._key_index.positions(keys)
        return np.where(pos >= 0, np.where(live[pos], pos, -1), -1)

    def _single_supported(self, queries: list[tuple[int, frozenset[int]]]) -> list[int]:
        """For each ``(variant group, sentence word hashes)``: the one title of the group all of
        whose qualifier words are in the sentence, or -1 where none or several are.

        A group with few options is scanned; one with many more qualifier words than the sentence has
        words (a base with hundreds of qualified titles) is looked up word by word instead, so the
        cost follows the smaller of the two, not the group's size."""
        out = [-1] * len(queries)
        large: list[int] = []
        bounds = self._var_word_offsets
        for q, (group, words) in enumerate(queries):
            lo, hi = int(self._var_offsets[group]), int(self._var_offsets[group + 1])
            if lo == hi:
                continue
            if int(bounds[hi]) - int(bounds[lo]) > SCAN_WORDS_PER_SENTENCE_WORD * len(words):
                large.append(q)  # many options: look the sentence's words up instead of scanning them all
            else:
                out[q] = self._scan_supported(lo, hi, words)
        if large:
            for q, title in zip(large, self._looked_up_supported([queries[q] for q in large])):
                out[q] = title
        return out

    def _scan_supported(self, lo: int, hi: int, sentence: frozenset[int]) -> int:
        """The one option in ``lo:hi`` all of whose words are in ``sentence``, else -1 (a scan of the options' words)."""
        bounds = self._var_word_offsets[lo:hi + 1].tolist()
        wlo = bounds[0]
        # Most qualifier words are not in the sentence: only the options holding one of its words are checked.
        hits = [j for j, w in enumerate(self._var_words[wlo:bounds[-1]].tolist(), wlo) if w in sentence]
        if not hits:
            return -1
        words_of = self._var_words
        found = -1
        for k in sorted({bisect_right(bounds, j) - 1 for j in hits}):
            if all(int(w) in sentence for w in words_of[bounds[k]:bounds[k + 1]].tolist()):
                if found >= 0:
                    return -1
                found = int(self._var_titles[lo + k])
        return found

    def _looked_up_supported(self, queries: list[tuple[int, frozenset[int]]]) -> list[int]:
        """:meth:`_single_supported` for queries of large groups: each sentence word is looked up
        by its ``(group, word)`` key (:class:`~wiki_sim.ingest.name_table.SortedHashes`), all the
        queries in one pass."""
        out = np.full(len(queries), -1, dtype=np.int64)
        sizes = [len(words) for _, words in queries]
        words = np.fromiter((w for _, ws in queries for w in ws), dtype=np.int64, count=sum(sizes))
        query = np.repeat(np.arange(len(queries)), sizes)
        groups = np.array([g for g, _ in queries], dtype=np.int64)[query]
        found = self._vw_index.positions(_group_word_keys(groups, words))
        hit = found >= 0
        query, words, found = query[hit], words[hit], found[hit]
        # Every option word under each found key; equal keys and equal words mean the same group.
        lo = self._vw_starts[found]
        n = self._vw_starts[found + 1] - lo
        pos = self._vw_pos[expand_ranges(lo, n)]
        same = self._var_words[pos] == np.repeat(words, n)
        if not same.any():
            return out.tolist()
        query, pos = np.repeat(query, n)[same], pos[same]
        option = np.searchsorted(self._var_word_offsets, pos, side="right") - 1
        # An option is supported when all its (distinct) words matched: count matches per (query, option).
        pairs, matched = np.unique(query * len(self._var_titles) + option, return_counts=True)
        query, option = np.divmod(pairs, len(self._var_titles))
        full = matched == (self._var_word_offsets[option + 1] - self._var_word_offsets[option])
        query, option = query[full], option[full]
        single = np.bincount(query, minlength=len(queries)) == 1
        out[query] = self._var_titles[option]
        out[~single] = -1
        return out.tolist()

    def _judge(self, kind: int, value: int, tokens: list[str], i: int, length: int, text: str, start: int,
               end: int) -> int | None:
        """The index of the title a match of any kind but a variant names, or ``None`` when it
        does not name one (variants: :meth:`_single_supported`)."""
        if kind == _ALIAS:
            return value
        flags = int(self._flags[value])
        single, usage = flags & _SINGLE, _usage_name(flags)
        if kind == _PLURAL:  # only a common noun has a plural: "mammals", "Mammals are ..."
            return value if _lower_ok(flags) and not _inside_name(tokens, i, length) \
                and not _after_name(tokens, i) else None
        if text[start:end] == text[start:end].lower():
            if single and _after_name(tokens, i):
                return None  # "English alphabet", "Azerbaijani animation": a kind of its own
            return value if _lower_ok(flags) else None
        if single and _inside_name(tokens, i, length):
            return None  # "Apollo 13", "Ada Lovelace", "Amazon River", "Asia Minor": another name
        if sentence_start(text, start):
            return value if usage == "name" or _lower_ok(flags) or (
                usage == "unknown" and not flags & _EVERYDAY) else None
        if usage == "word" and single:
            return None  # "Apple" mid-sentence is not the fruit its page writes as "apple"
        return value


class _Entries:
    """Name keys as they are added: hash, kind, target, precedence, first token's hash, length."""

    def __init__(self) -> None:
        self.hash, self.prio, self.value, self.first = array("q"), array("q"), array("q"), array("q")
        self.kind, self.length = array("B"), array("B")

    def add(self, key: tuple[str, ...], kind: int, value: int, prio: int) -> None:
        self.hash.append(hash(key))
        self.first.append(hash(key[0]))
        self.length.append(len(key))
        self.kind.append(kind)
        self.value.append(value)
        self.prio.append(prio)


SCAN_WORDS_PER_SENTENCE_WORD = 3
"""A variant group whose options have more than this many qualifier words per word of the sentence
is looked up by the sentence's words instead of scanned (a bucketed lookup of a word costs about
what scanning 3 words in Python does; the two agree at 100k pages, the lookup is faster at 1M).
Without it, a base with 100,000 qualified titles mentioned on every page would make the build
quadratic."""
def _index_dtype(n: int) -> type:
    """The narrowest of int32 / int64 that holds indices below ``n`` (half the bytes below 2^31)."""
    return np.int32 if n < 2 ** 31 else np.int64


_GROUP_MIX = np.uint64(0x9E3779B97F4A7C15)


def _group_word_keys(groups: np.ndarray, words: np.ndarray) -> np.ndarray:
    """``(group, word hash)`` as one 64-bit key: ``word ^ group * odd``. Two pairs with the same
    key and the same word have the same group (multiplying by an odd number is invertible)."""
    return (words.view(np.uint64) ^ (groups.astype(np.uint64) * _GROUP_MIX)).view(np.int64)


def _upper(key: tuple[str, ...]) -> int:
    return _UPPER if any(c.isupper() for t in key for c in t) else 0


def usage_code(cap: int, lower: int) -> int:
    """How a page writes its own title (:func:`own_usage` counts) as one byte: a name, a word, or unknown."""
    return _NAME if cap > lower else _WORD_USAGE if lower > cap else 0


def _usage_name(flags: int) -> Usage:
    return "name" if flags & _NAME else "word" if flags & _WORD_USAGE else "unknown"


@lru_cache(maxsize=4096)
def _lengths(mask: int) -> tuple[int, ...]:
    """Key lengths set in ``mask`` (bit ``k``: a key of ``k`` tokens), longest first."""
    return tuple(k for k in range(mask.bit_length() - 1, 0, -1) if mask >> k & 1)


def _lower_ok(flags: int) -> bool:
    """Whether a lower-case mention names this page."""
    if flags & (_NAME | _EVERYDAY):
        return False
    # A rare lower-case phrase ("theory of relativity") is the term; a lone word might be a name.
    return bool(flags & _WORD_USAGE or not flags & _SINGLE or flags & _RARE)


def _lower_ok_flags(flags: np.ndarray) -> np.ndarray:
    """:func:`_lower_ok` of every title at once."""
    f = flags.astype(np.int64)
    return ((f & (_NAME | _EVERYDAY)) == 0) & (((f & _WORD_USAGE) != 0) | ((f & _SINGLE) == 0) | ((f & _RARE) != 0))


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
    """Sentence word sets of one text (as hashes), built lazily, once per sentence (keeps find linear)."""

    def __init__(self, text: str):
        self.text = text
        self._spans: list[tuple[int, int]] | None = None
        self._starts: list[int] = []
        self._sentence: dict[int, frozenset[int]] = {}
        self._pair: dict[int, frozenset[int]] = {}

    def word_hashes_at(self, pos: int) -> frozenset[int]:
        """``hash`` of each word (lower case, singular) of the sentence at ``pos`` and the one before."""
        if self._spans is None:
            self._spans = sentence_spans(self.text)
            self._starts = [s for s, _ in self._spans]
        k = max(0, bisect_right(self._starts, pos) - 1)
        words = self._pair.get(k)
        if words is None:
            if not self._spans:
                words = self._words(0, len(self.text))
            else:
                # The sentence and the one before it: "Berlin were a new wave group. Berlin released ..."
                words = self._sentence_words(k)
                if k > 0:
                    words = words | self._sentence_words(k - 1)
            self._pair[k] = words
        return words

    def _sentence_words(self, k: int) -> frozenset[int]:
        words = self._sentence.get(k)
        if words is None:
            assert self._spans is not None
            words = self._sentence[k] = self._words(*self._spans[k])
        return words

    def _words(self, lo: int, hi: int) -> frozenset[int]:
        lowered = set(map(str.lower, _WORD.findall(self.text, lo, hi)))
        return frozenset([hash(_singular(w)) for w in lowered])
