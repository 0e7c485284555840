"""Question writers: one interface, a deterministic template writer and a language-model writer.

A writer turns a verified :class:`~sailorfog.clues.ClueSet` into the question text. The
template writer needs no model and is the default. :class:`LLMWriter` sends the clue set as
structured input to an OpenAI-compatible chat endpoint (``wiki_sim.common.chat.ChatClient``:
a hosted API, a local vLLM server, ...) and checks the prose it gets back: every clue's
key terms must still be there and no name of the answer may be; otherwise it retries
with the problems spelled out, and gives up with :class:`WriterError`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Callable, Literal, Protocol

from sailorfog.clues import TARGET_LABEL, Clue, ClueSet, question_leaks
from sailorfog.text import stem_leaks
from wiki_sim.common.chat import ChatClient

WriterKind = Literal["template", "llm"]
_PLACEHOLDER = re.compile(r"\{([A-Z])\}")


class WriterError(ValueError):
    """The writer could not produce a question that keeps every clue and hides the answer."""


class Writer(Protocol):
    name: str

    def write(self, cs: ClueSet) -> str:
        """The question for a clue set."""


def render(text: str) -> str:
    """A clue text with its placeholders as plain labels (``{A}`` -> ``A``)."""
    return _PLACEHOLDER.sub(lambda m: m.group(1), text)


def clue_terms(clue: Clue) -> list[str]:
    """What a rewritten question must still contain for ``clue``: its blurred values and
    prefixes verbatim, and the content words of its quoted evidence."""
    terms = [s["text"] for s in clue.spans]
    for check in clue.checks:
        if check["type"] in ("prefix", "not_prefix"):
            terms.append(check["prefix"])
        elif check["type"] == "initials":
            terms.append(check["initials"])
        elif check["type"] in ("words", "description"):
            terms.extend(check["words"])
        elif check["type"] == "fact":
            terms.append(check["value"])
    return list(dict.fromkeys(terms))


def missing_terms(question: str, clue: Clue, min_word_share: float = 0.6) -> list[str]:
    """Key terms of ``clue`` absent from ``question`` (values exactly; words by stem, a share suffices)."""
    lowered = question.lower()
    exact = [s["text"] for s in clue.spans] + [c.get("prefix") or c.get("initials") or c.get("value") or ""
                                                for c in clue.checks if c["type"] not in ("words", "description")]
    missing = [t for t in dict.fromkeys(exact)
               if t and not re.search(r"(?<!\w)" + re.escape(t.lower()) + r"(?!\w)", lowered)]
    words = [w for c in clue.checks if c["type"] in ("words", "description") for w in c["words"]]
    if words:
        found = stem_leaks(question, words)
        if len(found) < min_word_share * len(words):
            missing += [w for w in words if w not in found]
    return missing


@dataclass
class TemplateWriter:
    """Clues as plain sentences around labelled entities; deterministic."""

    name: str = "template"

    def write(self, cs: ClueSet) -> str:
        others = sorted({lab for c in cs.clues for lab in c.labels} - {TARGET_LABEL})
        digest = int(hashlib.sha1(json.dumps(cs.to_dict(), sort_keys=True).encode()).hexdigest(), 16)
        if others:
            names = ", ".join(others[:-1]) + (" and " if len(others) > 1 else "") + others[-1]
            opener = ("The entities {n} are connected to an unknown entity X.",
                      "Consider an unknown entity X and the entities {n} around it.",
                      "The entities {n} form a small web of relations with an unknown entity X.")[digest % 3]
            parts = [opener.format(n=names)]
        else:
            parts = ["Consider an unknown entity X."]
        parts += [render(c.text) for c in cs.clues]
        parts.append(("What is X?", "Which entity is X?", "Name X.")[digest // 3 % 3])
        return " ".join(parts)


SYSTEM = ("You write hard research questions in the style of BrowseComp and SailorFog-QA: one fluent paragraph "
          "that describes every entity indirectly (\"a port city on a rocky coast\", \"an astronomer born in the "
          "1850s\"), chains the facts through those descriptions, keeps periods and ranges vague exactly as given, "
          "and ends by asking for the unknown entity X. You never name X or any entity given only by a letter.")


def llm_prompt(cs: ClueSet, problems: list[str] | None = None) -> str:
    """The user message: the clue set as JSON and the rules the answer is checked against."""
    payload = {
        "entities": sorted(cs.titles),
        "unknown": TARGET_LABEL,
        "clues": [{"id": c.id, "kind": c.kind, "statement": render(c.text), "must_keep": clue_terms(c)}
                  for c in cs.clues],
    }
    rules = ("Rewrite these clues as one natural question about the unknown entity X. Keep every clue: each "
             "phrase in must_keep must appear word for word. Refer to the other entities by description, not by "
             "their letters. Do not add facts. Reply with the question only.")
    text = rules + "\n\n" + json.dumps(payload, ensure_ascii=False, indent=1)
    if problems:
        text += "\n\nYour previous question was rejected: " + "; ".join(problems) + ". Write it again."
    return text


@dataclass
class RetryingLLMWriter:
    """Settings and the ask-check-retry loop shared by the LLM writers."""

    client: ChatClient
    max_attempts: int = 3
    """Tries before the task is given up (each retry names what was wrong)."""
    temperature: float = 0.7
    max_tokens: int = 400
    name: str = "llm"

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")

    def rewrite(self, system: str, prompt: Callable[[list[str]], str], judge: Callable[[str], list[str]]) -> str:
        """Ask for a question with ``prompt(problems so far)`` until ``judge(question)`` finds no problem."""
        problems: list[str] = []
        for _ in range(self.max_attempts):
            messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt(problems)}]
            question = " ".join(self.client.complete(messages, temperature=self.temperature,
                                                     max_tokens=self.max_tokens).split())
            problems = judge(question)
            if not problems:
                return question
        raise WriterError(f"no acceptable question after {self.max_attempts} attempt(s): {'; '.join(problems)}")


@dataclass
class LLMWriter(RetryingLLMWriter):
    """A language model rewrites the clue set as prose; the result is checked (and retried)."""

    def problems(self, question: str, cs: ClueSet) -> list[str]:
        """Why a question is unacceptable (empty when it keeps every clue and hides the answer)."""
        out = []
        leaked = question_leaks(question, cs)
        if leaked:
            out.append("it names the answer or a hidden entity (" + ", ".join(repr(x) for x in leaked) + ")")
        for clue in cs.clues:
            missing = missing_terms(question, clue)
            if missing:
                out.append(f"clue {clue.id} lost " + ", ".join(repr(m) for m in missing))
        if "?" not in question:
            out.append("it is not a question")
        return out

    def write(self, cs: ClueSet) -> str:
        return self.rewrite(SYSTEM, lambda problems: llm_prompt(cs, problems), lambda q: self.problems(q, cs))
