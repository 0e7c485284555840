"""Answer judges: normalized exact match and token F1 (default), or an LLM grader.

A judge maps ``(question, prediction, gold answers)`` to a :class:`Judgement`: a score in
[0, 1] (the answer part of the reward) and a correctness flag. Gold answers are the task's
answer followed by its aliases; a prediction is judged against the best-matching one.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

from wiki_sim.chat import ChatClient, ChatError


@dataclass
class Judgement:
    """A judge's verdict on one answer."""

    score: float
    """In [0, 1]: the answer component of the reward."""
    is_correct: bool
    details: dict[str, Any] = field(default_factory=dict)
    """Judge-specific numbers (``em``, ``f1``, the grader's reasoning, ...)."""


@runtime_checkable
class Judge(Protocol):
    """Anything that grades an answer."""

    name: str

    def __call__(self, question: str, prediction: str, answers: Sequence[str]) -> Judgement: ...


class JudgeError(RuntimeError):
    """The judge could not reach a verdict (endpoint down, unreadable grader reply)."""


# ---------------------------------------------------------------- SQuAD-style metrics

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, no punctuation, no articles, single spaces.

    Extended for model text: Unicode NFKC first, and every Unicode punctuation or symbol
    character (``**bold**``, curly quotes, dashes) is removed like ASCII punctuation.
    """
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = "".join(
        " " if ch in string.punctuation or unicodedata.category(ch)[0] in "PS" else ch for ch in text
    )
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> bool:
    """Normalized exact match."""
    return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 between the normalized texts."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


@dataclass
class ExactMatchF1Judge:
    """Normalized exact match and token F1 over the gold answer and its aliases.

    ``is_correct`` is exact match against any gold; the score is that match (0 or 1) for
    ``reward="em"`` (pure correctness, the default) or the best token F1 for ``reward="f1"``.
    """

    reward: Literal["em", "f1"] = "em"
    """Which metric is the score."""
    name: str = "em_f1"

    def __post_init__(self) -> None:
        if self.reward not in ("em", "f1"):
            raise ValueError(f"reward must be 'em' or 'f1', got {self.reward!r}")

    def __call__(self, question: str, prediction: str, answers: Sequence[str]) -> Judgement:
        if not answers:
            raise ValueError("expected at least one gold answer, got none")
        em = any(exact_match(prediction, a) for a in answers)
        f1 = max(token_f1(prediction, a) for a in answers)
        score = float(em) if self.reward == "em" else f1
        return Judgement(score=score, is_correct=em, details={"em": float(em), "f1": f1})


# ---------------------------------------------------------------- LLM grader

# The grading prompt of BrowseComp (openai/simple-evals, browsecomp_eval.py).
GRADER_TEMPLATE = """
Judge whether the following [response] to [question] is correct or not based on the precise and unambiguous [correct_answer] below.

[question]: {question}

[response]: {response}

Your judgement must be in the format and criteria specified below:

extracted_final_answer: The final exact answer extracted from the [response]. Put the extracted answer as 'None' if there is no exact, final answer to extract from the response.

[correct_answer]: {correct_answer}

reasoning: Explain why the extracted_final_answer is correct or incorrect based on [correct_answer], focusing only on if there are meaningful differences between [correct_answer] and the extracted_final_answer. Do not comment on any background to the problem, do not attempt to solve the problem, do not argue for any answer different than [correct_answer], focus only on whether the answers match.

correct: Answer 'yes' if extracted_final_answer matches the [correct_answer] given above, or is within a small margin of error for numerical problems. Answer 'no' otherwise, i.e. if there if there is any inconsistency, ambiguity, non-equivalency, or if the extracted answer is incorrect.


confidence: The extracted confidence score between 0% and 100% from [response]. Put 100 if there is no confidence score available.
""".strip()

_CORRECT = re.compile(r"correct\s*:[*_`\s]*(yes|no)\b", re.IGNORECASE)  # one run of marks: linear
_EXTRACTED = re.compile(r"extracted_final_answer\s*:\s*(.*)", re.IGNORECASE)


def parse_grader_reply(reply: str) -> tuple[bool, str]:
    """``(correct, extracted answer)`` from a grader's reply; ``JudgeError`` if it has no verdict."""
    matches = _CORRECT.findall(reply)
    if not matches:
        raise JudgeError(f"the grader's reply has no 'correct: yes|no' line: {reply[:200]!r}")
    extracted = _EXTRACTED.search(reply)
    return matches[-1].lower() == "yes", (extracted.group(1).strip() if extracted else "")


@dataclass
class LLMJudge:
    """A BrowseComp-style grader behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    base_url: str
    """The API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended)."""
    model: str
    """The grader model's name as the endpoint knows it."""
    api_key: str | None = None
    """Sent as a bearer token when given."""
    timeout: float = 60.0
    """Seconds per request."""
    max_retries: int = 3
    """Retries on connection errors, timeouts, HTTP 429 and 5xx (exponential backoff)."""
    backoff: float = 1.0
    """Seconds before the first retry; doubled each time."""
    max_tokens: int = 1024
    name: str = "llm"

    def __post_init__(self) -> None:
        # ChatClient validates the URL, timeout and retry settings.
        self._client = ChatClient(self.base_url, self.model, api_key=self.api_key, timeout=self.timeout,
                                  max_retries=self.max_retries, backoff=self.backoff)

    def __call__(self, question: str, prediction: str, answers: Sequence[str]) -> Judgement:
        if not answers:
            raise ValueError("expected at least one gold answer, got none")
        gold = answers[0] if len(answers) == 1 else f"{answers[0]} (also accepted: {'; '.join(answers[1:])})"
        prompt = GRADER_TEMPLATE.format(question=question, response=prediction, correct_answer=gold)
        reply = self._complete(prompt)
        correct, extracted = parse_grader_reply(reply)
        return Judgement(score=float(correct), is_correct=correct,
                         details={"extracted_final_answer": extracted, "grader_reply": reply})

    def _complete(self, prompt: str) -> str:
        try:
            return self._client.complete(prompt, temperature=0.0, max_tokens=self.max_tokens)
        except ChatError as exc:
            raise JudgeError(f"the LLM judge failed: {exc}") from None


JudgeName = Literal["em_f1", "em", "f1"]


def make_judge(judge: str | Judge) -> Judge:
    """A judge from its name (``em_f1`` or ``em``: exact-match reward; ``f1``: F1 reward) or as given."""
    if isinstance(judge, str):
        if judge in ("em_f1", "em"):
            return ExactMatchF1Judge()
        if judge == "f1":
            return ExactMatchF1Judge(reward="f1", name="f1")
        raise ValueError(f"judge must be one of 'em_f1', 'em', 'f1' or a Judge object, got {judge!r}")
    if not callable(judge):
        raise ValueError(f"judge must be a name or a callable Judge, got {type(judge).__name__}")
    return judge
