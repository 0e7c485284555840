"""Goal-focused evidence: which sentences of a page answer a goal, with their context.

The goal is read as a whole, not as a bag of keywords:

- its content words are stemmed and widened with the words a page uses for the same
  relation (a goal about a *teacher* is answered by "studied under", "pupil of", "taught");
- a sentence scores by how much of the goal it covers (BM25-weighted terms times the share
  of the goal's concepts it holds), so one repeated keyword ("The First Teacher") loses to
  a sentence that holds the relation;
- the goal's question word asks for a kind of answer (*when*: a date, *how many*: a number,
  *who* / *where*: a name), and sentences that hold one score higher;
- on a page about X, sentences about X (its name, or a pronoun that starts the sentence)
  score higher than sentences about someone else, and X's own words in the goal ("when did
  Apple Inc. expand ...") are not concepts to cover: every sentence there is about X.

The best sentences come first, each with its neighbours for context; the summary is the
answer-bearing sentence(s), never a copy of the evidence. Everything is linear in the text,
which is cut to ``MAX_TEXT_CHARS`` before any work.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from whoosh.lang.porter import stem

from wiki_sim.analysis import STOPWORDS as INDEX_STOPWORDS
from wiki_sim.analysis import stem_word

MAX_TEXT_CHARS = 600_000
"""Text beyond this is not read (a hostile or broken page must not cost more)."""
MAX_SENTENCE_CHARS = 600
"""Longer runs without a sentence end (lists, tables) are cut into pieces this long."""
MAX_GOAL_TERMS = 32

_TOKEN = re.compile(r"\w+", re.UNICODE)
# A sentence: characters up to a terminator that is followed by a space or the end of the line
# ("3.14", "U.S." inside a word stay in it). One pass, no backtracking across sentences.
_SENTENCE = re.compile(r"(?:[^.!?]|[.!?](?!\s|$))*(?:[.!?]+|$)")
_YEAR = re.compile(r"1[0-9]{3}|20[0-9]{2}")
_PRONOUN_START = re.compile(r"^(?:He|She|It|They|His|Her|Its|Their)\b")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were "
    "which with what who whom whose when where why how did does do i me my you your he she they "
    "them his her their our we us about into than then there these those also been being can "
    "could would should will shall may might must not no nor so such only other any all each "
    "some most more very just find information page user goal many much".split()
)
# Words a page uses for the relation a goal asks about (stems). Small on purpose: the
# relations research questions ask most; anything else falls back to the goal's own words.
_RELATED_WORDS = [
    "teacher taught teach tutor mentor student pupil studied study disciple apprentice school",
    "born birth birthplace native",
    "died death dead killed buried grave",
    "founded founder established creator created formed",
    "married wife husband spouse",
    "wrote author written writer novel book",
    "directed director film",
    "invented inventor invention discovered discovery",
    "capital seat headquarters",
    "population inhabitants people residents",
    "located location situated lies",
    "won award prize awarded",
    "parent father mother son daughter child children",
    "named name called known",
]
_RELATED: dict[str, frozenset[str]] = {}
for _group in _RELATED_WORDS:
    _stems = frozenset(stem(w) for w in _group.split())
    for _s in _stems:
        _RELATED[_s] = _RELATED.get(_s, frozenset()) | _stems
_INTENTS = {"when": "date", "year": "date", "date": "date", "how": "number", "many": "number",
            "much": "number", "number": "number", "population": "number", "who": "name", "whom": "name",
            "where": "name", "which": "name"}


@dataclass(frozen=True)
class Sentence:
    """One sentence of a page: its text, the section it sits in, and its paragraph."""

    text: str
    section: str
    paragraph: int


def split_sentences(text: str) -> list[Sentence]:
    """Sentences of ``text`` in page order (``## Heading`` lines name the section); linear."""
    text = text[:MAX_TEXT_CHARS]
    out: list[Sentence] = []
    section, paragraph = "", 0
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            paragraph += 1
            continue
        if line.startswith("#"):
            section = line.lstrip("#").strip()
            paragraph += 1
            continue
        for match in _SENTENCE.finditer(line):
            piece = match.group(0).strip()
            for start in range(0, len(piece), MAX_SENTENCE_CHARS):
                chunk = piece[start:start + MAX_SENTENCE_CHARS].strip()
                if chunk:
                    out.append(Sentence(chunk, section, paragraph))
    return out


# Stems of the index analyzer's stopwords, which its cached stemmer does not stem.
_STOPWORD_STEMS = {w: stem(w) for w in INDEX_STOPWORDS}


def _stem(word: str) -> str:
    """The Porter stem of a lower-case word, through the index analyzer's bounded cache: one
    stem cache per process (shared with search), not two."""
    stemmed = stem_word(word)
    if stemmed is None:
        stemmed = _STOPWORD_STEMS.get(word) or stem(word)
    return stemmed


def _stems(text: str) -> list[str]:
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


@dataclass(frozen=True)
class Goal:
    """A goal read for matching: its concepts (each a set of stems), its word pairs, and the
    kind of answer it asks for."""

    concepts: tuple[frozenset[str], ...]
    own: frozenset[str]
    intent: str
    pairs: tuple[str, ...]

    @classmethod
    def parse(cls, goal: str) -> "Goal":
        words = _TOKEN.findall(goal.lower()[:2000])
        intent = next((_INTENTS[w] for w in words if w in _INTENTS), "")
        own = list(dict.fromkeys(_stem(w) for w in words if w not in STOPWORDS))[:MAX_GOAL_TERMS]
        concepts = tuple(_RELATED.get(s, frozenset()) | {s} for s in own)
        pairs = tuple(dict.fromkeys(f"{a} {b}" for a, b in zip(words, words[1:])
                                    if not (a in STOPWORDS and b in STOPWORDS)))[:MAX_GOAL_TERMS]
        return cls(concepts, frozenset(own), intent, pairs)


@dataclass
class _Tokens:
    words: list[str]
    stems: list[str]
    capitalized: list[bool]


def _tokens(text: str) -> _Tokens:
    words = _TOKEN.findall(text)
    return _Tokens([w.lower() for w in words], [_stem(w.lower()) for w in words], [w[:1].isupper() for w in words])


def score_sentences(sentences: list[Sentence], goal: Goal, subject: str = "", k1: float = 1.2,
                    b: float = 0.75) -> list[float]:
    """How well each sentence answers the goal (0 when it holds none of the goal's concepts).

    BM25 over the goal's concepts (a concept's best-matching stem counts; related words at
    0.7), times ``0.5 + coverage``; then x1.5 when a pair of the goal's words appears as it is
    ("his teacher"), x1.4 when the answer kind the goal asks for sits within four words of a
    goal concept written in lower case (x1.15 anywhere else), x1.2 when the sentence is about
    the page's subject. The subject's own words in the goal count only when no sentence
    holds anything else of the goal.
    """
    if not sentences or not goal.concepts:
        return [0.0] * len(sentences)
    toks = [_tokens(s.text) for s in sentences]
    subject_stems = {_stem(w) for w in _TOKEN.findall(subject.lower()) if w not in STOPWORDS}
    focused = _without_subject(goal, subject_stems)
    scores = _score(sentences, toks, focused, subject_stems, k1, b)
    if focused is not goal and not any(scores):
        scores = _score(sentences, toks, goal, subject_stems, k1, b)
    return scores


def _score(sentences: list[Sentence], toks: list[_Tokens], goal: Goal, subject_stems: set[str], k1: float,
           b: float) -> list[float]:
    bags = [Counter(t for t in tok.stems) for tok in toks]
    n = len(bags)
    avg = sum(len(t.stems) for t in toks) / n or 1.0
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    all_terms = frozenset().union(*goal.concepts)
    scores = []
    for sentence, tok, bag in zip(sentences, toks, bags):
        norm = k1 * (1 - b + b * len(tok.stems) / avg)
        total, covered = 0.0, 0
        for concept in goal.concepts:
            best = 0.0
            for term in concept:
                tf = bag.get(term, 0)
                if tf:
                    idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                    best = max(best, (1.0 if term in goal.own else 0.7) * idf * tf * (k1 + 1) / (tf + norm))
            if best:
                covered += 1
                total += best
        if not covered:
            scores.append(0.0)
            continue
        score = total * (0.5 + covered / len(goal.concepts))
        joined = " ".join(tok.words)
        if any(pair in joined for pair in goal.pairs):
            score *= 1.5
        score *= _intent_factor(tok, all_terms, goal.intent)
        if subject_stems and (subject_stems & bag.keys() or _PRONOUN_START.match(sentence.text)):
            score *= 1.2
        scores.append(score)
    return scores


def _without_subject(goal: Goal, subject_stems: set[str]) -> Goal:
    """The goal less the page subject's own words ("Find the year Apple Inc. expanded" on the
    page "Apple Inc."): on its own page every sentence is about the subject, so naming it is
    not something to find, and counting it would rank any sentence that names the subject
    (the lead) above the one that answers. A goal that is nothing but the subject keeps it."""
    if not subject_stems:
        return goal
    concepts = tuple(c for c in goal.concepts if not (c & goal.own) <= subject_stems)
    if not concepts or len(concepts) == len(goal.concepts):
        return goal
    pairs = tuple(p for p in goal.pairs
                  if not all(w in STOPWORDS or _stem(w) in subject_stems for w in p.split(" ")))
    return Goal(concepts, goal.own - subject_stems, goal.intent, pairs)


def _intent_factor(tok: _Tokens, terms: frozenset[str], intent: str) -> float:
    if not intent:
        return 1.0
    slots = [i for i, w in enumerate(tok.words) if _is_answer(w, tok.capitalized[i], i, intent)]
    if not slots:
        return 1.0
    anchors = [i for i, s in enumerate(tok.stems) if s in terms and not tok.capitalized[i]]
    if any(abs(a - s) <= 4 for a in anchors for s in slots[:50]):
        return 1.4
    return 1.15


def _is_answer(word: str, capitalized: bool, position: int, intent: str) -> bool:
    if intent == "date":
        return bool(_YEAR.fullmatch(word))
    if intent == "number":
        return word[:1].isdigit()
    return capitalized and position > 0 and word not in STOPWORDS


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def _windows(order: list[int], sentences: list[Sentence], budget: int) -> list[list[int]]:
    """Best sentences first, each with its neighbours in the same paragraph, within ``budget`` chars."""
    taken: set[int] = set()
    windows: list[list[int]] = []
    used = 0
    for i in order:
        if i in taken:
            continue
        window = [j for j in (i - 1, i, i + 1) if 0 <= j < len(sentences) and j not in taken
                  and sentences[j].paragraph == sentences[i].paragraph]
        cost = sum(len(sentences[j].text) + 1 for j in window) + len(sentences[i].section) + 4
        if used + cost > budget:
            if windows:
                continue
            window = [i]
        windows.append(window)
        taken.update(window)
        used += cost
        if used >= budget:
            break
    return windows


def focus(text: str, goal: str, *, title: str = "", lead: str = "", budget: int = 3000,
          summary_chars: int = 600) -> tuple[str, str]:
    """``(evidence, summary)`` for ``goal`` on a page: best passages first, and the answer-bearing
    sentences as the summary (or a plain statement that nothing on the page matches)."""
    sentences = split_sentences(text)
    if not sentences:
        return "(the page has no text)", "The page has no text."
    parsed = Goal.parse(goal)
    scores = score_sentences(sentences, parsed, subject=title)
    order = sorted((i for i in range(len(sentences)) if scores[i] > 0), key=lambda i: (-scores[i], i))
    if not order:
        opening = _trim(lead.strip() or " ".join(s.text for s in sentences[:3]), budget)
        terms = ", ".join(sorted(parsed.own)) or "the goal"
        return opening, f"No passage of this page mentions {terms}; its opening is given as the evidence."
    if sum(len(x.text) + 1 for x in sentences) <= budget:
        # The whole page fits: it is the evidence, in its own order (nothing to rank away);
        # the summary below still answers from the best sentences.
        return _in_order(sentences), _summary(sentences, order, scores, summary_chars, title, _in_order(sentences))
    parts = []
    windows = _windows(order, sentences, budget)
    for window in windows:
        body = _trim(" ".join(sentences[j].text for j in window), budget)
        section = sentences[window[0]].section
        parts.append(f"[{section}] {body}" if section else body)
    # Budget left over (short pages): the rest of the page in order, after the best passages,
    # so a reader still sees every name and number a short page holds.
    taken = {j for window in windows for j in window}
    room = budget - sum(len(p) + 2 for p in parts)
    rest = []
    for j, sentence in enumerate(sentences):
        if j in taken:
            continue
        if len(sentence.text) + 1 > room:
            break
        rest.append(sentence.text)
        room -= len(sentence.text) + 1
    if rest:
        parts.append(" ".join(rest))
    evidence = "\n\n".join(parts)
    return evidence, _summary(sentences, order, scores, summary_chars, title, evidence)


def _in_order(sentences: list[Sentence]) -> str:
    paragraphs: list[str] = []
    last = None
    for x in sentences:
        key = (x.paragraph, x.section)
        if key != last:
            paragraphs.append(f"[{x.section}] {x.text}" if x.section and (last is None or last[1] != x.section)
                              else x.text)
            last = key
        else:
            paragraphs[-1] += " " + x.text
    return "\n\n".join(paragraphs)


def _summary(sentences: list[Sentence], order: list[int], scores: list[float], summary_chars: int, title: str,
             evidence: str) -> str:
    summary = sentences[order[0]].text
    if len(order) > 1 and scores[order[1]] >= 0.8 * scores[order[0]] and len(summary) < summary_chars // 2:
        summary = f"{summary} {sentences[order[1]].text}"
    summary = _trim(summary, summary_chars)
    if summary.strip() == evidence.strip():  # a one-sentence answer: say where it is, do not repeat it
        summary = f"The page answers the goal in one statement (the evidence above){_about(title)}."
    return summary


def _about(title: str) -> str:
    return f", about {title}" if title else ""
