"""Structured statements read from page text: what an entity is, what relates it, when things happened.

Every routine is a bounded, linear pass over one sentence or the start of one page. The
statements are what research questions are written from (:mod:`sailorfog.research`): a
question describes entities with these (``a plant``, ``founded in the 1920s``, ``is a member
of``) instead of quoting the sentences they come from.
"""

from __future__ import annotations

import re
from typing import Iterable

from wiki_sim.focus import tokenize

# The defining sentence: "<Name> is a/an/the <phrase>".
_DEFINING = re.compile(r"\b(?:is|was)\s+(?:an\s+|a\s+|the\s+(?=(?:capital|largest|chief|main|\d+(?:st|nd|rd|th))\b))"
                       r"([^.;:]{2,160})")
_MEASURE_MODIFIER = re.compile(r"^\d[\d,.]*-\w+(?:-\w+)*,?\s+")
"""A leading measure compound ("102-story", "1,046-foot"): a modifier, even when a comma follows it."""
_COMMA_ADJECTIVE = re.compile(r"^((?:[a-z][a-z\-]*\s+)?([a-z][a-z\-]*)),\s+(?=[A-Za-z])")
"""A leading adjective and the comma after it ("a sovereign, doubly landlocked country", "a thin,
continuous tissue"): coordinated modifiers of the head that follows, not the head."""
_LAST_COORDINATE = re.compile(r"^or\s+([a-z][a-z\-]*)\s+(?=[a-z])")
"""The last of alternative adjectives after their commas ("green, red, or white biennial plant": a cabbage
is one of them, so none is its type; "social, economic, and political ideology" keeps "political")."""
_COORDINATE_ADJECTIVES = frozenset("sovereign thin thick dense hard soft strong rapid remote worldwide obsolete "
                                   "complex diurnal nocturnal muscular nontrinitarian millenarian woody leafy "
                                   "pagan vast green red white black blue yellow purple brown grey gray orange "
                                   "pink golden".split())
_ADJECTIVE_ENDINGS = ("ic", "ous", "ive", "ful", "less", "ular", "ed")
_ED_NOUNS = frozenset("bed red shed sled hundred sacred kindred naked wicked rugged".split())
"""Words ending in -ed that are no participle; of the -eed words only these are: agreed, decreed, freed."""
_EED_PARTICIPLES = frozenset("agreed decreed freed guaranteed refereed".split())
_ORDINAL_COMPOUND = re.compile(r"\b(?:(?:early|mid|late)[\s\-\u2013]+)?\d+(?:st|nd|rd|th)(?:-[A-Za-z]+)*"
                               r"(?:\s+century\b)?", re.I)
"""An ordinal and the compound it opens ("20th-century", "mid-19th-century"): a modifier that says when,
never part of a type ("an early 20th-century movement" is a movement)."""
_PROPER_ADJECTIVE_ENDINGS = ("an", "ish", "ese", "ic", "ist", "i", "ch")
"""Endings of a capitalized modifier that is an adjective of its own (American, British, Buddhist)."""
# Where the head noun phrase of a definition ends.
_PHRASE_END = re.compile(
    r",|\(|\s(?:that|which|who|whom|whose|where|when|of|in|on|at|from|for|with|by|to|as|is|was|are|were|"
    r"known|located|used|made|based|found|consisting|comprising|including|such|between|into|within|than|"
    r"having|being|whereby|through|during|since|under|over|about|around|after|before|via|like|off|near|along|"
    r"across|beyond|inside|outside|among|against|towards?|throughout|upon|without|amid|opposite)(?:\s|$)",
    re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
# Words that make a poor head for "a ___" (a definition that is not a type).
_BAD_HEAD = frozenset("one term name word type kind form part set group way number lot member process "
                      "condition concept idea study branch field any large small largest most major first second "
                      "use act "
                      "smallest oldest best".split())
_MAX_TYPE_WORDS = 3
_GENERIC = re.compile(r"^(?:(?:In|On|At|During)\b[^,]{0,80},\s*)?(?:A|An|a|an)\s+(?![A-Z][a-z]+'s\b)[a-z]")
"""A definition of a class ("A saint is a person who ...", "A silent film is a film ..."): its page is
no individual of the type, so the type would state a falsehood ("a person whose name is a single word")."""
_PREPOSITIONS = frozenset("to of in on at from for with by into through between as".split())
_DETERMINERS = frozenset("a an the its his her their this that these those".split())
_POST_ADJECTIVES = frozenset("native active endemic responsible famous notable popular prominent common "
                             "primarily mainly chiefly best".split())
_VAGUE_HEADS = frozenset("area place activity collection increase decrease unit object thing entity item "
                         "piece work property relationship measure range matter practice deepest centre center hub "
                         "seat".split())
"""Heads too vague to be stated as a type ("There is an area."), unless in one of the compounds below."""
_VAGUE_COMPOUNDS = frozenset(["geographical area", "geographic area", "metropolitan area", "urban area",
                              "protected area", "mountain range", "reference work"])
_OF_HEADS = frozenset("state unit body class order series system range collection piece work property "
                      "measure kind type form branch family group set part integration account relation combination "
                      "descendant breed".split())
"""Heads that mean little without their ``of`` complement ("a state of matter" is no state)."""
_EST_NOUNS = frozenset("forest interest contest conquest protest request priest harvest manifest inquest "
                       "arrest midwest northwest southwest behest".split())
_ADJECTIVES = frozenset("narrow broad wide common rare early late modern ancient major minor main public private "
                        "human natural social political economic cultural civil military federal royal imperial "
                        "often also usually generally typically mostly widely long short similar tall high low new "
                        "old great big little various different single important famous popular well widespread vast "
                        "huge immense enormous tiny".split())
_LEADING = frozenset("a an the one largest smallest biggest most least first second third fourth fifth only main "
                     "chief oldest best".split())
_PARTICIPLES = frozenset("spoken written known born made found held seen given taken worn grown shown built "
                         "sung drawn fought taught brought sought caught led won begun run set kept left lost "
                         "meant sent spent dealt".split())
PERSON_HEADS = frozenset(
    "person man woman king queen emperor empress politician statesman writer author poet painter composer singer "
    "actor actress philosopher scientist physicist chemist mathematician leader president explorer ruler pharaoh "
    "musician architect general saint prophet director founder inventor engineer astronomer economist historian "
    "sultan caliph pope monarch playwright dictator sculptor friar priest novelist strategist physician "
    "theologian monk bishop activist businessman entrepreneur polymath footballer player athlete soldier "
    "commander revolutionary lawyer judge journalist critic artist photographer dancer comedian rapper "
    "songwriter botanist biologist psychologist sociologist linguist scholar dramatist essayist educator "
    "missionary nun cardinal apostle prince princess duke duchess tsar shah khan conqueror admiral diplomat "
    "reformer poetess geographer naturalist zoologist geologist anthropologist archaeologist philanthropist "
    "filmmaker screenwriter producer guitarist pianist violinist conductor singer-songwriter lyricist "
    "cartoonist illustrator designer jurist chancellor minister governor senator consul pharaoh martyr "
    "disciple rabbi imam scientist-inventor astronaut cosmonaut aviator pilot chef figure nationalist stateswoman "
    "officer monarch".split())
"""Type heads that make an entity a person (asked with "who", describable as "a person")."""
PLACE_HEADS = frozenset("country state city town village region province island continent sea ocean river lake "
                        "mountain range capital kingdom empire territory county district peninsula archipelago "
                        "republic nation area basin valley desert plateau coast bay gulf strait municipality "
                        "metropolis prefecture".split())
"""Type heads of places (through which a reader reads containment)."""
# Other names in a defining sentence.
_ALSO = re.compile(r"\b(?:also (?:known|called|referred to) as|also spelled|"
                   r"(?:commonly|better|widely|popularly|usually) known (?:mononymously |simply )?as|"
                   r"known mononymously as|"
                   r"often (?:simply )?(?:called|referred to as)|or simply)\s+(?:(?:the|a|an)\s+)?"
                   r"([A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*){0,4})(?=\s*(?:[,;:.)\"”]|or\b|and\b|$))")


def first_sentence(text: str, max_chars: int = 400) -> str:
    """The page's first sentence (at most ``max_chars`` characters)."""
    head = " ".join(text[: max_chars * 2].split())
    m = re.search(r"(?<=[a-z0-9)\]])\.\s+(?=[A-Z])", head)
    return head[: m.start() + 1] if m else head[:max_chars]


def defining_type(text: str) -> list[str]:
    """The type an entity's defining first sentence gives it, as words (at most three, the head
    noun last): ``["Russian", "poet"]`` for "Lermontov was a Russian poet of ...".

    The head is that of the first predicate nominal: in "a physician and a leader in ..." the
    physician, in "a strait separating the island state of ..." the strait (a participle or a
    determiner ends the phrase, so a noun of a modifier is never the head). Empty when the
    sentence defines nothing a reader would accept as a type: an adjective, a superlative, a
    vague head (``area``, ``place``, ``activity``), a head that means nothing without its ``of``
    complement (``a unit of time``, ``a state of matter``, ``a collection of ideas``), or the
    definition of a class ("A river is a natural stream ...": the page on rivers is no stream)."""
    sentence = re.sub(r"\s*\([^()]*\)", "", first_sentence(text))  # "a central nervous system (CNS) stimulant"
    m = _DEFINING.search(sentence)
    if not m or m.start() > 160 or _GENERIC.match(sentence):
        return []
    rest = _MEASURE_MODIFIER.sub("", m.group(1), count=1)  # "a 102-story, supertall skyscraper"
    rest = _skip_comma_adjectives(rest)
    end = _PHRASE_END.search(rest)
    phrase = rest[: end.start()] if end else rest
    ends_at_of = bool(end) and end.group(0).strip().lower() == "of"
    words = _WORD.findall(_ORDINAL_COMPOUND.sub(" ", phrase))
    if len(words) > 1 and _participle_ing(words[-1]) and end and end.group(0).strip().isalpha():
        words = words[:-1]  # "a language belonging to ...": the participle and its object go
    words, cut = _first_nominal(words)
    ends_at_of = ends_at_of and not cut
    if not words or len(words) > 6:
        return []
    kept = words[-_MAX_TYPE_WORDS:]
    if len(kept) < len(words) and kept[0][:1].isupper() and words[-len(kept) - 1][:1].isupper():
        while kept and kept[0][:1].isupper() and not kept[0].endswith(_PROPER_ADJECTIVE_ENDINGS):
            kept = kept[1:]  # "Ivy League research university": no half of a name ("American" stays)
    words = kept
    if words and words[-1].lower() in PERSON_HEADS:  # "the 16th President of ...": a person's title
        words[-1] = words[-1].lower()
    while words and re.fullmatch(r"\d+(?:st|nd|rd|th)", words[0]):
        words = words[1:]
    if not words:
        return []
    head = words[-1]
    if head.lower() in _BAD_HEAD or len(head) < 3 or not head.isalpha() or not head.islower() \
            or _participle_ing(head) \
            or _ed_participle(head) \
            or head.endswith(("ly", "ical", "ieval", "ous", "ful", "less", "able", "ible", "ese", "ish")) \
            or head.lower() in _ADJECTIVES or head.lower() in _POST_ADJECTIVES or _superlative(head) \
            or head.endswith("s") and not head.endswith(("ss", "us", "is", "species", "series")):
        return []
    if head in _VAGUE_HEADS and " ".join(words[-2:]).lower() not in _VAGUE_COMPOUNDS:
        return []
    if ends_at_of and head in _OF_HEADS:
        return []
    while words and words[0].lower() in _LEADING:
        words = words[1:]
    return words


def _skip_comma_adjectives(phrase: str, most: int = 3) -> str:
    """``phrase`` without its leading adjectives that a comma follows ("thin, continuous, avascular
    tissue" -> "avascular tissue"); a noun before a comma stays ("a poet, essayist and playwright")."""
    skipped = False
    for _ in range(most):
        m = _COMMA_ADJECTIVE.match(phrase)
        if not m or not _adjective(m.group(2)):
            break
        phrase, skipped = phrase[m.end():], True
    m = _LAST_COORDINATE.match(phrase) if skipped else None
    if m and _adjective(m.group(1)):  # "green, red, or white biennial plant": the last alternative goes too
        phrase = phrase[m.end():]
    return phrase


def _adjective(word: str) -> bool:
    return word in _COORDINATE_ADJECTIVES or word in _ADJECTIVES or word.endswith(_ADJECTIVE_ENDINGS)


def _first_nominal(words: list[str]) -> tuple[list[str], bool]:
    """The words of the first noun phrase of a predicate, and whether anything was cut: a second
    phrase ("... and a leader"), a participle or post-nominal adjective with what follows
    ("strait separating the ...", "language native to ..."), a determiner opening another phrase."""
    for i, w in enumerate(words):
        low = w.lower()
        if i == 0:
            continue
        nxt = words[i + 1].lower() if i + 1 < len(words) else ""
        if low in ("and", "or") and nxt in _DETERMINERS:  # coordinated phrases: the first is the type
            return _conjunct(words[:i]), True
        if low in _DETERMINERS:
            return words[:i], True
        if _ed_participle(low) and _prenominal(words[:i], nxt):
            continue  # "a vast elevated plateau", "a densely populated city": the -ed word modifies the noun after it
        if _ed_participle(low) or low in _PARTICIPLES or low in _POST_ADJECTIVES:
            return _conjunct(words[:i]), True
        if low.endswith("ing") and nxt and (nxt in _DETERMINERS or nxt in _PREPOSITIONS
                                            or words[i + 1][:1].isupper()):
            return _conjunct(words[:i]), True
    return _conjunct(words), False


def _prenominal(before: list[str], nxt: str) -> bool:
    """Whether an -ed word between ``before`` and ``nxt`` modifies a noun that follows ("vast elevated plateau"):
    only modifiers stand before it (adjectives of :data:`_ADJECTIVES`, adverbs, -ous, -ful and -ive words) and a
    lower-case word that is no adverb comes after ("a dish served cold" keeps its noun)."""
    return bool(nxt) and nxt.isalpha() and nxt.islower() and not nxt.endswith("ly") and all(
        w.lower() in _ADJECTIVES or w.lower().endswith(("ly", "ous", "ful", "ive")) for w in before)


def _conjunct(words: list[str]) -> list[str]:
    """Of "a Soviet and Russian politician" the last conjunct (the modifiers are coordinated); of
    "a law or formal" (a phrase cut short) the first, when the last is an adjective."""
    for i in range(len(words) - 1, -1, -1):
        if words[i].lower() in ("and", "or"):
            last = words[i + 1:]
            if last and (last[-1].lower() in _ADJECTIVES or not last[-1].isalpha()
                         or last[-1].lower().endswith(("al", "ous", "ive", "ic", "ful", "ary"))) and i > 0:
                return words[:i]
            return last
    return words


def _ed_participle(word: str) -> bool:
    """An -ed form that is no noun ("used", "gated"; not "reed", "breed" or "shed")."""
    low = word.lower()
    return low.endswith("ed") and low not in _ED_NOUNS and (not low.endswith("eed") or low in _EED_PARTICIPLES)


def _participle_ing(word: str) -> bool:
    """An -ing form that is no noun of a type ("belonging", "separating"; not "king" or "sibling")."""
    low = word.lower()
    return low.endswith("ing") and low not in PERSON_HEADS and low not in _ING_NOUNS


_ING_NOUNS = frozenset("king viking sibling offspring spring string ring wing thing building painting "
                       "clothing ceiling".split())


def _superlative(word: str) -> bool:
    low = word.lower()
    return len(low) > 5 and low.endswith("est") and low not in _EST_NOUNS


def type_key(words: Iterable[str]) -> list[str]:
    """The index keys of type words (lower-cased tokens, as :func:`wiki_sim.focus.tokenize` makes them)."""
    return [t for w in words for t in tokenize(w)]


_SUBJECT = re.compile(r"^(?:The\s+)?([^,;:()]{2,80}?)\s+(?:is|was|are|were)\s")
_PARTICLE = r"of|the|and|de|du|da|del|von|van|upon|on"
_NAME_PART = re.compile(rf"(?:[A-Z][\w'’\-]*|{_PARTICLE})(?:\s+(?:[A-Z][\w'’\-]*|{_PARTICLE}))*")


def subject_names(text: str) -> list[str]:
    """The names the first sentence gives its subject ("The Amur River or Heilong River is ..." -> "Amur River",
    "Heilong River"): what a reader may answer with."""
    m = _SUBJECT.match(first_sentence(text, 300))
    if not m:
        return []
    parts = [p.strip() for p in re.split(r"\s+or\s+", m.group(1))]
    return [p for p in parts if p[:1].isupper() and len(p.split()) <= 5 and _NAME_PART.fullmatch(p)
            and p not in ("It", "He", "She", "They", "This", "These", "There")]


def other_names(text: str) -> list[str]:
    """Alternative names the defining sentence gives ("also known as ...", "or simply ..."), whole: not the capitalized
    opening of a longer phrase ("also known as a French harp" gives no "French")."""
    return list(dict.fromkeys(m.group(1).strip() for m in _ALSO.finditer(first_sentence(text, 600))))


# Predicates read from the words just before a linked name: (pattern, predicate as written).
# Order matters: the first match wins. A noun relation ("part of", "capital of") counts only after
# a copula ("is a large part of"), so "native to a large part of Asia" states no part-of relation.
_COPULA = r"(?:is|are|was|were|became|becomes|remains|remained|forms?|formed|as)\s+(?:(?:an?|the|one)\s+)?" \
          r"(?:[\w\-]+\s+){0,2}"
_PREDICATES: tuple[tuple[str, str], ...] = (
    (r"born in", "was born in"), (r"died in", "died in"), (r"(?:located|situated|based) in", "is located in"),
    (r"(?:found|native|endemic) (?:in|to)|(?:occurs?|distributed) (?:in|across|throughout)|inhabits?|inhabited",
     "is found in"), (r"(?:lived|lives|resided|settled) in", "lived in"), (r"named (?:after|for)", "is named after"),
    (r"founded by", "was founded by"), (r"invented by", "was invented by"), (r"discovered by", "was discovered by"),
    (r"(?:written|composed|directed|designed|developed|produced|created|built) by", "was made by"),
    (r"(?:made|composed) (?:from|of)", "is made from"), (r"derived from", "is derived from"),
    (r"descended from", "descends from"), (_COPULA + r"part of", "is part of"),
    (_COPULA + r"members? of", "is a member of"), (_COPULA + r"capital of", "is the capital of"),
    (_COPULA + r"(?:type|form|kind|variety) of", "is a kind of"), (_COPULA + r"branch of", "is a branch of"),
    (_COPULA + r"species of", "is a species of"), (r"consists of", "consists of"),
    (r"(?:includes|contains|comprises)", "includes"),
    (r"borders?|bordered by", "borders"), (r"flows? (?:into|through)", "flows through"),
    (r"originated (?:in|from)|originates (?:in|from)", "originated in"),
    (r"used (?:in|for|by)", "is used in"), (r"home to", "is home to"), (r"succeeded by", "was succeeded by"),
    (r"preceded by", "was preceded by"), (r"married(?: to)?", "was married to"),
    (r"(?:son|daughter|child) of", "was a child of"), (r"studied (?:at|under)", "studied at"),
    (r"spoken in", "is spoken in"), (r"grown in", "is grown in"), (r"produced in", "is produced in"),
    (r"caused by", "is caused by"),
    (r"led by", "was led by"), (r"ruled by", "was ruled by"), (r"won", "won"), (r"defeated", "defeated"),
)
_PREDICATE = [(re.compile(r"\b(?:" + p + r")\s+(?:(?:the|a|an|its|their|his|her)\s+)?$", re.I), w)
              for p, w in _PREDICATES]
_LEAD_IN = re.compile(r"^(?:(?:In|On|At|During|By|After|Before|Since|From|As|Today|Later|Originally|Historically|"
                      r"Together|Along)\b[^,]{0,80},\s*)+")
_PRONOUN_SUBJECT = re.compile(r"^(?:It|He|She|They|This|These)\b")
_CLAUSE_BREAK = re.compile(r";|[\"“(]|\b(?:for (?:his|her|its|their)|which|who|whom|whose|where|while|whereas|although|when)\b|,\s*(?:and|but)\s+"
                           r"(?:the|a|an|its|his|her|their|it|he|she|they)\b", re.I)


def types_alike(a: str, b: str) -> bool:
    """Whether a reader could take an entity of type ``a`` for one of type ``b`` (type phrases): the same head, or
    one's head a word of the other's type ("this capital" beside "a capital city"). Questions count such entities
    apart ("another city", "the second city")."""
    wa, wb = a.split(), b.split()
    return bool(wa and wb) and (wa[-1] in wb or wb[-1] in wa)


def find_name(text: str, name: str) -> int:
    """Where ``name`` first occurs in ``text`` as whole words (case-sensitive first), or -1:
    "India" is not found inside "Indian Ocean"."""
    for flags in (0, re.I):
        m = re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", text, flags)
        if m:
            return m.start()
    return -1


_POSSESSED = re.compile(r"^(?:[Ii]ts|[Hh]is|[Hh]er|[Tt]heir|(?:The\s+)?(?:[A-Z][\w\-]*\s+){0,4}(?:[a-z][\w\-]*\s+)?"
                        r"[\w\-]+(?:['’]s|s['’]))\s+([\w\-]+(?:\s+[\w\-]+){0,2})")
"""A subject that is something the entity has ("Its capital and largest city is Kigali", "The Dada movement's
principles were first collected in 1916"): the words after the possessive."""


def possessed_subject(sentence: str) -> str:
    """The words naming what the sentence's subject is of the entity's (after an adverbial lead-in), empty
    when its subject is not a possessive ("Its capital", "The Dada movement's principles")."""
    m = _POSSESSED.match(_LEAD_IN.sub("", sentence.strip()))
    return m.group(1) if m else ""


def sentence_subject_is(sentence: str, title: str, kind: str = "") -> bool:
    """Whether the sentence's subject is the entity of page ``title``: its opening words (after an
    adverbial lead-in such as "In 1825,") name it, or a pronoun or "the <its type>" stands for it; not
    a possessive, whose subject is something the entity has (:func:`possessed_subject`)."""
    body = _LEAD_IN.sub("", sentence.strip())
    if possessed_subject(body):
        return False
    if _PRONOUN_SUBJECT.match(body):
        return True
    opening = [w.lower() for w in re.findall(r"[\w'\-]+", body)[:6]]
    if kind and len(opening) >= 2 and opening[0] == "the" and opening[1] == kind.split()[-1].lower():
        return True
    words = [w for w in tokenize(re.sub(r"\s*\([^)]*\)$", "", title)) if len(w) >= 3]
    return any(o.startswith(w[:6]) for w in words for o in opening)


_COMPOUND_HEAD = re.compile(r"[ \t]+([a-z][a-z\-]*)\b")
"""A lower-case word right after a linked name: a noun it modifies ("a DNA virus"), unless it is a word
that may follow a whole name (:data:`_AFTER_NAME`)."""
_AFTER_NAME = frozenset(
    "a an the and or but nor as at by for from in into of off on onto out over per than that to under until "
    "up upon via with within without near after before during since between among against along across "
    "around beyond despite toward towards through throughout about above below behind beside besides "
    "which who whom whose where when while whereas although though because if so then there thus yet "
    "is was are were be been being has have had do does did will would can could may might must shall "
    "should not also only even still both either each all its his her their it he she they this these "
    "those some many most one two three four five six seven eight nine ten such other another".split())
"""Words that may follow a whole name: function words, auxiliaries, numbers."""


def predicate(sentence: str, anchor: str, subject: str = "", kind: str = "") -> str | None:
    """The relation a sentence states with the linked name ``anchor`` (``"is a member of"``), read
    from the words just before it; ``None`` when no known predicate stands there. With ``subject``
    (the title of the page whose sentence it is; ``kind`` its type), the predicate counts only when
    the sentence is about that entity and no clause about something else comes between."""
    at = find_name(sentence, anchor)
    if at <= 0 or re.match(r"['’]s?\b", sentence[at + len(anchor):]):
        return None  # "home to Central Africa's largest port": the port, not Central Africa
    head = _COMPOUND_HEAD.match(sentence[at + len(anchor):])
    if head and head.group(1).lower() not in _AFTER_NAME and not head.group(1).endswith(("ly", "ed")):
        return None  # "caused by a DNA virus": the virus, not DNA
    before = sentence[max(0, at - 60): at]
    for pattern, written in _PREDICATE:
        m = pattern.search(before)
        if m:
            if subject:
                head = sentence[: max(0, at - 60) + m.start()]
                if not sentence_subject_is(sentence, subject, kind) or _CLAUSE_BREAK.search(head) \
                        or _attached_elsewhere(head, written, subject, kind):
                    return None
            return written
    return None


def _attached_elsewhere(head: str, written: str, subject: str, kind: str) -> bool:
    """Whether a passive participle ("led by", "used by") follows a noun other than the subject: in "a
    conflict between France and the North German Confederation led by Prussia" Prussia led the
    Confederation; in "Middle Africa is an analogous term used by the United Nations" the term is used."""
    if not (written.startswith(("was ", "is ")) and written.endswith(" by") or written == "is used in"):
        return False
    words = re.findall(r"[\w'\-]+", head)
    if not words:
        return False
    last = words[-1].lower()
    own = {w.lower() for w in tokenize(subject)} | {w.lower() for w in kind.split()[-1:]}
    if last in _AUXILIARIES or last.endswith("ly"):
        return False
    return not own & {w.lower() for w in words[-3:]}  # "a novel in verse written by": still the novel


_AUXILIARIES = frozenset("is was are were be been being has have had also first originally later jointly "
                         "and".split())


_EVENT = re.compile(r"\b(born|died|founded|established|built|formed|introduced|discovered|invented|released|"
                    r"published|opened|created|completed|launched|elected|signed|adopted|independence|"
                    r"began|started|ended|first\s+\w+ed|\w+ed)\b(?:\s+[\w,'\-]+){0,5}?\s+(?:in|on|by|around|c\.)\s+"
                    r"(?:\w+\s+){0,2}(\d{3,4})\b", re.I)
_EVENT_VERBS = frozenset("born died founded established built formed introduced discovered invented released "
                         "published opened created completed launched elected signed adopted independence began "
                         "started ended".split())
_PASSIVE = re.compile(r"\b(?:was|were|been|is|are|being)\s+(?:\w+ly\s+)?$", re.I)
_RELATIVE = re.compile(r"\b(?:which|who|that|whose)\b[^,;]*$", re.I)
_SUBORDINATE = re.compile(r"\b(?:before|after|when|while|until|since|because|whereas|although|once)\s+[^,;]{0,80}$",
                          re.I)
"""A subordinate clause open before an event verb: the verb has a subject of its own ("the Khanate was
governed from each city before Abdullah Khan II established Bukhara as its capital by 1562")."""
_NOT_EVENT = frozenset("used based called named related considered described located situated estimated "
                       "recorded reported need needed".split())


def _year_event(sentence: str, year: int) -> tuple[str | None, bool]:
    """The verb of the event a sentence dates to ``year`` and whether that event is another entity's
    (in a relative or subordinate clause): ``("founded", False)``, ``(None, True)``, ``(None, False)``."""
    for m in _EVENT.finditer(sentence[:600]):
        verb = m.group(1).lower().split()[-1]
        if int(m.group(2)) == year and verb not in _NOT_EVENT:
            if verb not in _EVENT_VERBS and not _PASSIVE.search(sentence[:m.start(1)]):
                continue  # "the currently accepted version ... 1837": an adjective, not an event
            if _RELATIVE.search(sentence[max(0, m.start(1) - 30):m.start(1)]) \
                    or _SUBORDINATE.search(sentence[:m.start(1)]):
                return None, True
            return ("born" if verb == "born" else verb), False
    return None, False


def date_event(sentence: str, year: int) -> str | None:
    """The verb of the event a sentence dates to ``year`` (``"founded"``), or ``None``: none, or another
    entity's (:func:`event_of_another`)."""
    return _year_event(sentence, year)[0]


def event_of_another(sentence: str, year: int) -> bool:
    """Whether the event a sentence dates to ``year`` belongs to another entity: its verb sits in a relative
    clause ("Brasilia, a planned city that became Brazil's capital in 1960" on Niemeyer's page) or in a
    subordinate clause ("before Nairobi was elevated to capital status in 1907" on Mombasa's)."""
    return _year_event(sentence, year)[1]


_AREA_UNITS = frozenset(["km²", "km2", "mi2", "sq mi", "square kilometres", "square kilometers", "square miles", "ha",
                         "hectares", "acres"])
_LENGTH_UNITS = frozenset("km kilometres kilometers metres meters miles m cm mm ft feet inches".split())
_PEOPLE_UNITS = frozenset("people inhabitants residents".split())
_COUNT_UNITS = frozenset("species members students employees languages islands seats".split())
_AFTER_CONVERSION = re.compile(r"^\s*\([^()]{0,40}\)")
_ELSEWHERE = re.compile(r"^\s*(?:(?:north|south|east|west)\w*|from|away|off|inland|upstream|downstream|outside|"
                        r"beyond|apart|of|to|behind|ahead|per|below|further)\b")
_DISTANCE_BEFORE = re.compile(r"\b(?:from|distance|away|apart)\b")
_MEASURES_AFTER = (("length", re.compile(r"^\s*(?:long|in length)\b")),
                   ("height", re.compile(r"^\s*(?:high|tall|in height)\b")),
                   ("elevation", re.compile(r"^\s*above (?:mean )?sea level\b")),
                   ("width", re.compile(r"^\s*(?:across|wide|in width|in diameter)\b")),
                   ("depth", re.compile(r"^\s*(?:deep|in depth)\b")))
_MEASURES_BEFORE = (("length", re.compile(r"\b(?:length|long|stretches|runs|flows|extends)\b[^,;()]{0,25}$")),
                    ("height", re.compile(r"\b(?:height|tall|rises to|stands)\b[^,;()]{0,25}$")),
                    ("elevation", re.compile(r"\b(?:elevation|altitude)\b[^,;()]{0,25}$")),
                    ("width", re.compile(r"\b(?:width|wide|diameter)\b[^,;()]{0,25}$")),
                    ("depth", re.compile(r"\b(?:depth|deep)\b[^,;()]{0,25}$")))
_AREA_BEFORE = re.compile(r"\b(?:area|covers?|covered|covering|spans?|spanning|surface|size|over)\b[^;()]{0,40}$")
_PEOPLE_BEFORE = re.compile(r"\b(?:population|populated|home to|inhabited by)\b[^;()]{0,40}$")
_LIVE_AFTER = re.compile(r"^\s*(?:live|living|lived|reside|residing)\b")
_OTHER_UNIT = re.compile(r"\b(?:metropolitan|metro area|urban area|agglomeration|conurbation|wider|surrounding)\b")
"""Words that make a head count another unit's ("the eponymous metropolitan province, which counts 988,494
inhabitants, while ... 696,767 people live in the urban area of Florence", whose own population is 361,625)."""
_RATE = re.compile(r"^\s*(?:per\s+(?:square|sq\b|km|mi\b|mile|hectare|acre|capita|household|year|day)"
                   r"|/\s*(?:km|sq\b|mi\b|ha\b))")
"""A rate after a head count ("25.5 inhabitants per square kilometre" is a density, not a population)."""
_NOT_RESIDENTS = re.compile(r"^\s*(?:were |had been |have been )?(?:killed|died|dead|deaths|injured|displaced|"
                            r"evacuated|attended|visited|arrested|executed|fled)\b")


_POPULATION_WORDS = re.compile(r"\b(?:population|populous|inhabitants|residents)\b", re.I)


def loose_measure(sentence: str, raw: str, unit: str) -> str | None:
    """What a quantity may measure for a reader, who reads more loosely than :func:`quantity_predicate`:
    its measure, else ``"area"`` for any area unit ("At 450,295 square kilometres ..., Sweden is"), else
    ``"population"`` for a head count or a bare number in a sentence on population ("with a population of
    10.6 million")."""
    measure = quantity_predicate(sentence, raw, unit) if unit else None
    if measure is None and unit in _AREA_UNITS:
        return "area"
    at = sentence.find(raw)
    rate = at >= 0 and _RATE.match(sentence[at + len(raw):at + len(raw) + 60].lower())  # a density: "25 per km2"
    if measure is None and unit in _PEOPLE_UNITS | {""} and _POPULATION_WORDS.search(sentence) and not rate:
        return "population"
    return measure


_MEASURE_NOUNS = frozenset("area population length elevation altitude height depth width size surface territory land "
                           "total inhabitants residents summit peak diameter volume".split())
"""Words of a possessive subject that keep a quantity the entity's own ("Its total area is ...")."""


def of_a_part(sentence: str) -> bool:
    """Whether the sentence's subject is a part of the entity other than a measure of it: "Its capital and largest
    city is Kigali, ... at 1,567 metres above sea level" gives Kigali's elevation, not Rwanda's."""
    said = possessed_subject(sentence)
    return bool(said) and not _MEASURE_NOUNS & set(said.lower().split())


def quantity_predicate(sentence: str, raw: str, unit: str) -> str | None:
    """What a quantity in a sentence measures of the page's entity, read from the words around it:
    ``"area"``, ``"length"``, ``"height"``, ``"elevation"``, ``"width"``, ``"depth"``, ``"population"`` or ``"count"``
    (islands, species, members, ...); ``None`` when the words do not say, or say it is something else:
    a distance to another place ("196 kilometres east of Ottawa"), a part's (:func:`of_a_part`), the people a
    war killed, a unit that measures nothing of the entity by itself. Only these are stated, so that the
    question says what the number is ("covering between 12,000 and 25,000 square kilometres")."""
    at = sentence.find(raw)
    if at < 0 or of_a_part(sentence):
        return None
    before = sentence[max(0, at - 60):at].lower()
    after = sentence[at + len(raw):at + len(raw) + 60].lower()
    after = after[_AFTER_CONVERSION.match(after).end():] if _AFTER_CONVERSION.match(after) else after
    if unit in _AREA_UNITS:  # not a wider unit's ("The Metropolitan Area of Florence, Prato and Pistoia ... 4,800 km2")
        return "area" if _AREA_BEFORE.search(before) and not _ELSEWHERE.match(after) \
            and not _OTHER_UNIT.search(sentence[:at].lower()) else None
    if unit in _LENGTH_UNITS:
        if _ELSEWHERE.match(after) or _DISTANCE_BEFORE.search(before):
            return None
        for name, pattern in _MEASURES_AFTER:
            if pattern.match(after):
                return name
        return next((name for name, pattern in _MEASURES_BEFORE if pattern.search(before)), None)
    if unit in _PEOPLE_UNITS:
        if _NOT_RESIDENTS.match(after) or _RATE.match(after) or "density" in before[-45:] \
                or _OTHER_UNIT.search(before[-45:]) or _OTHER_UNIT.search(after[:40]):
            return None
        return "population" if unit != "people" or _PEOPLE_BEFORE.search(before) or _LIVE_AFTER.match(after) else None
    return "count" if unit in _COUNT_UNITS and (not _ELSEWHERE.match(after) or after.lstrip().startswith("of ")) \
        else None  # "a genus of 700 species of flowering plants"

