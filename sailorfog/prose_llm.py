"""The language-model writer of research questions, and the check that its prose keeps the statements.

The model (any OpenAI-compatible endpoint: a local vLLM serving Qwen, a hosted API) gets the
statements as JSON, one plain sentence each with the words it must keep, and the template
writer's question as a draft. Its answer is accepted only when every statement is still
stated (its key terms are there), no figure or year is added, and the run's own check (names
of the task's entities, quotes of their pages) finds nothing; otherwise it is asked again with
the problems spelled out, and after ``max_attempts`` the task is dropped (:class:`WriterError`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from sailorfog.prose import TARGET, DescribedWriter, in_periods, measure_phrase
from sailorfog.statements import Statement
from sailorfog.text import article
from sailorfog.writers import RetryingLLMWriter
from wiki_sim.common.chat import ChatClient

Check = Callable[[str], list[str]]
_FIGURE = re.compile(r"\d[\d,]*")


def _ref(label: str, types: Mapping[str, str]) -> str:
    kind = types[label]
    return f"the {kind} asked for" if label == TARGET else f"the {kind}"


def statement_sentence(s: Statement, types: Mapping[str, str]) -> str:
    """One plain sentence for a statement (the model's input; entities by their kind, never by name)."""
    ref = _ref(s.subject, types)
    if s.kind == "type":
        kind = f"{article(s.value)} {s.value}"
        said = f"One entity is {kind}." if s.subject != TARGET else f"The answer is {kind}."
        return said[:-1] + "".join(f", not {_ref(other, types)}" for other in s.apart if other in types) + "."
    if s.kind == "date":
        verb = f"was {s.predicate}" if s.predicate and s.predicate != "died" else (s.predicate or "is tied to a date")
        return f"{ref[:1].upper()}{ref[1:]} {verb} {in_periods([s.value])}."
    if s.kind == "name":
        return f"The name of {ref} begins with “{s.value}”."
    if s.kind == "name_words":
        return f"The name of {ref} is {'a single word' if s.value == 'one' else s.value + ' words long'}."
    if s.kind == "number":
        return f"{ref[:1].upper()}{ref[1:]} {measure_phrase(s, finite=True)}."
    obj = _ref(s.object, types)
    if s.predicate == "mentions":
        return f"{ref[:1].upper()}{ref[1:]} is connected with {obj}."
    return f"{ref[:1].upper()}{ref[1:]} {s.predicate} {obj}."


def statement_terms(s: Statement) -> list[str]:
    """What a rewritten question must still contain for a statement."""
    if s.kind == "type":
        return [s.value.split()[-1]]
    if s.kind in ("date", "number"):
        return [s.value]
    if s.kind == "name":
        return [f"“{s.value}”"]
    if s.kind == "name_words":
        return [s.value if s.value != "one" else "single"]
    return [] if s.predicate == "mentions" else [s.predicate.split()[-2] if len(s.predicate.split()) > 1
                                                else s.predicate]


def _relation_kept(s: Statement, question: str, types: Mapping[str, str]) -> bool:
    """Whether one sentence of ``question`` names both kinds the relation joins and its predicate."""
    words = _ASSOCIATION_WORDS if s.predicate == "mentions" else ((statement_terms(s) or [""])[0].lower(),)
    heads = {types[s.subject].split()[-1].lower(), types[s.object].split()[-1].lower()}
    return any(any(w in sent for w in words) and all(h in sent for h in heads)
               for sent in re.split(r"(?<=[.?!;])\s+", question.lower()))


_ASSOCIATION_WORDS = ("connect", "associat", "ties", "tied", "link", "mention", "relat")
"""What keeps a plain association in a rewritten question."""


def problems(question: str, statements: Sequence[Statement], check: Check | None = None,
             types: Mapping[str, str] | None = None) -> list[str]:
    """Why a rewritten question is unacceptable (empty when it is)."""
    out = list(check(question)) if check else []
    lowered = question.lower().replace("single-word", "single word").replace("one-word", "single word")
    need: dict[str, list[str]] = {}
    for s in statements:
        if s.kind == "relation" and types and not _relation_kept(s, question, types):
            out.append(f"statement {s.id} lost the relation ({s.predicate})")
            continue
        for t in statement_terms(s):
            need.setdefault(t.lower(), []).append(s.id)
    for term, ids in need.items():  # each statement keeps its own mention of a shared term
        have = lowered.count(term)
        if term in ("two", "three", "four", "five", "six"):
            have = len(re.findall(rf"\b{term}\b", lowered))
        if have < len(ids):
            out.append(f"statement {ids[-1]} lost {term!r}")
    allowed = {f for s in statements for f in _FIGURE.findall(s.value)}
    added = sorted(set(_FIGURE.findall(question)) - allowed)
    if added:
        out.append("it adds figures no statement gives (" + ", ".join(added[:3]) + ")")
    if "?" not in question and not question.rstrip().endswith("."):
        out.append("it is not a question")
    return out


SYSTEM = ("You write hard research questions in the style of BrowseComp and SailorFog-QA: one fluent paragraph that "
          "describes every entity indirectly, by what it is and what relates it, chains the statements through those "
          "descriptions, keeps periods, ranges and letters exactly as given, and ends by asking for the answer. You "
          "never name any entity and never add a fact.")


def llm_prompt(statements: Sequence[Statement], types: Mapping[str, str], draft: str,
               issues: Sequence[str] = ()) -> str:
    payload = {"unknown": TARGET, "entities": dict(sorted(types.items())), "draft": draft,
               "clues": [{"id": s.id, "kind": s.kind, "statement": statement_sentence(s, types),
                          "must_keep": statement_terms(s)} for s in statements]}
    rules = ("Rewrite these statements as one natural question. Keep every statement: each phrase in must_keep "
             "must appear word for word. Add nothing, name nothing. Reply with the question only.")
    text = rules + "\n\n" + json.dumps(payload, ensure_ascii=False, indent=1)
    if issues:
        text += "\n\nYour previous question was rejected: " + "; ".join(issues) + ". Write it again."
    return text


@dataclass
class DescribedLLMWriter(RetryingLLMWriter):
    """A language model rewrites the statements as prose; the result is checked, and retried."""

    def write(self, statements: Sequence[Statement], types: Mapping[str, str], check: Check | None = None) -> str:
        draft = DescribedWriter().write(statements, types)
        return self.rewrite(SYSTEM, lambda issues: llm_prompt(statements, types, draft, issues),
                            lambda q: problems(q, statements, check, types))
