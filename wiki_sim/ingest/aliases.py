"""Other names a page gives itself: the title without its disambiguator, the defining sentence's
alternative names, and (in dumps) the lead's bold names.

The defining first sentence of an encyclopedia article names its subject and often its other
names: "Albania (Albanian: Shqipëri), officially the Republic of Albania, is ...", "The
aardvark (Orycteropus afer), also known as the antbear, is ...", "Autism, or autism spectrum
disorder, is ...". :func:`lead_aliases` reads those patterns from the first sentence only
(cut to :data:`MAX_SENTENCE_CHARS`: every routine here is linear and bounded).
"""

from __future__ import annotations

import re

from wiki_sim.ingest.name_usage import QUALIFIED
from wiki_sim.sentences import sentence_spans

MAX_SENTENCE_CHARS = 400
LEAD_HEAD_CHARS = 2 * MAX_SENTENCE_CHARS
""":func:`lead_aliases` reads no further into the lead than this (a worker is sent no more)."""
MAX_NAME_CHARS = 80
# Right after the subject: ", also known as A, B or C," / ", or Y," / ", officially (the) Y," / ", born Y,".
_ALSO = re.compile(r"^\s*,?\s*(?:also (?:known as|called|spelled|written|referred to as)|or|officially(?: known as)?"
                   r"|formerly(?: known as)?|commonly (?:known as|called)|better known as|born|previously known as)"
                   r"\s+(?:the\s+)?([^;()]{2,200}?)(?=,? (?:is|was|are|were|refers?|has|had|may|can)\b|;|\)|$)")
_LIST_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+or\s+|\s+and\s+(?:also\s+)?(?:referred to as\s+|known as\s+)?")
_KNOWN_AS = re.compile(r"^(?:also\s+)?(?:known as|referred to as|called)\s+", re.IGNORECASE)
_NOT_A_NAME_START = re.compile(r"^(?:by|after|before|from|in|since|until|a|an|as|encompasses|is|was|named)\b")
_ADVERB = re.compile(r"^(?:colloquially|simply|informally|sometimes|often|also|occasionally|the|plural|singular)"
                    r"\s+", re.IGNORECASE)
_PAREN = re.compile(r"\(([^()]{2,120})\)")
_LANG_LABEL = re.compile(r"^(?:[A-Z][a-z]+(?: [A-Z][a-z]+)?|Latin|Greek|native name):\s*")
_PRONUNCIATION = re.compile(r"/|\bpronounced\b|ˈ|ə|IPA|\d{3,4}")
_TEMPLATE = re.compile(r"\{\{(?:[^{}|]*\|)*([^{}|]*)\}\}")
_BOLD = re.compile(r"'''(?!')(.{1,80}?)(?<!')'''")


def title_names(title: str) -> list[tuple[str, str]]:
    """``'Berlin (band)'`` -> ``[('Berlin', 'title')]``; a plain title gives nothing."""
    m = QUALIFIED.match(title)
    return [(m.group(1), "title")] if m else []


def _first_sentence(lead: str) -> str:
    head = lead[:LEAD_HEAD_CHARS]
    spans = sentence_spans(head)
    if not spans:
        return ""
    s, e = spans[0]
    return head[s:e][:MAX_SENTENCE_CHARS]


def _clean(name: str) -> str:
    name = re.sub(r"\s+", " ", name).strip(" \"'“”‘’.")
    return name if 1 < len(name) <= MAX_NAME_CHARS and any(c.isalpha() for c in name) else ""


def lead_aliases(title: str, lead: str) -> list[tuple[str, str]]:
    """Other names in the defining first sentence of ``lead`` (source ``lead``), in order."""
    sentence = _first_sentence(lead)
    base = QUALIFIED.match(title)
    name = base.group(1) if base else title
    if not sentence:
        return []
    out: list[tuple[str, str]] = []
    # A parenthesis right after the subject's name: a native name, a scientific name
    # ("Albania (Shqipëri)", "The aardvark (Orycteropus afer)"), not a date or pronunciation.
    idx = sentence.lower().find(name.lower())
    if 0 <= idx <= 8:
        after = sentence[idx + len(name):]
        m = _PAREN.match(after.lstrip())
        if m and not re.search(r"\d{3,4}", m.group(1)):  # dates of birth and death, not names
            for part in re.split(r";|,", m.group(1)):
                part = _ADVERB.sub("", _LANG_LABEL.sub("", part.strip()))
                if part and not _PRONUNCIATION.search(part) and not part.lower().startswith(("born", "died", "c.")):
                    out.append((part, "lead"))
    if 0 <= idx <= 8:
        rest = sentence[idx + len(name):]
        paren = _PAREN.match(rest.lstrip())
        if paren:
            rest = rest.lstrip()[paren.end():]
        m = _ALSO.match(rest)
        if m:
            for part in _LIST_SPLIT.split(m.group(1)):
                part = _ADVERB.sub("", _KNOWN_AS.sub("", part.strip()))
                if part and len(part.split()) <= 6 and not _NOT_A_NAME_START.match(part):
                    out.append((part, "lead"))
    cleaned = []
    for n, src in out:
        n = _clean(n)
        if n and n.lower() not in (name.lower(), title.lower()) and not _NOT_A_NAME_START.match(n):
            cleaned.append((n, src))
    return list(dict.fromkeys(cleaned))


BOLD3 = "'" * 3


def _first_bold_paragraph(wikitext: str, limit: int = 200_000) -> str:
    """The first line of the lead that holds bold text and is not template or table markup."""
    pos = 0
    end = min(len(wikitext), limit)
    while pos < end:
        nl = wikitext.find("\n", pos, end)
        line_end = nl if nl >= 0 else end
        if wikitext.startswith("==", pos):
            return ""
        if wikitext.find(BOLD3, pos, line_end) >= 0 and wikitext[pos:pos + 1] not in ("|", "{", "!", "}", "*", ":"):
            return wikitext[pos:min(line_end, pos + 2000)]
        pos = line_end + 1
    return ""


def bold_names(title: str, wikitext: str) -> list[tuple[str, str]]:
    """Bold names of a dump's first paragraph (source ``bold``), not the title."""
    out = []
    for m in _BOLD.finditer(_first_bold_paragraph(wikitext)):
        n = _clean(re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", m.group(1)).replace("''", ""))
        n = _clean(_TEMPLATE.sub(r"\1", n))
        if n and n.lower() != title.lower() and "{" not in n and "}" not in n:
            out.append((n, "bold"))
    return list(dict.fromkeys(out))[:8]


def page_aliases(title: str, lead: str) -> list[tuple[str, str]]:
    """The title's short form, then the defining sentence's names."""
    return list(dict.fromkeys(title_names(title) + lead_aliases(title, lead)))
