"""SFT data: trajectory JSONL in, filtered and tokenized examples out.

Two record formats are read unchanged:

- this project's trajectory JSONL (:mod:`envs.trajectory`): ``{"id", "task", "messages",
  "reward", "is_correct", "termination", "num_tool_calls", "policy"}``;
- the released WebDancer/WebSailor ChatML format (``../shared/reference/webdancer_sample_traj.jsonl``):
  ``{"type": "chatml", "messages", "answer": [[...]], "functions", ...}``, without a
  correctness label.

**Rejection sampling** (WebSailor), each filter configurable (:class:`FilterConfig`):
the final answer judged correct (the record's ``is_correct`` when it has one; otherwise
the last ``<answer>`` judged against the record's reference answers, or kept, or dropped),
the tokenized transcript no longer than ``max_tokens``, and at least ``min_tool_calls``
assistant turns holding a ``<tool_call>`` (counted from the messages with
:func:`envs.protocol.parse_turn`, the same way for both formats).

Tokenization is :func:`envs.tokens.tokenize_messages`: the tokenizer's chat template when
it has one, the documented ChatML fallback otherwise; loss on assistant tokens only.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Sequence

import torch

from envs.judges import ExactMatchF1Judge, normalize_answer
from envs.protocol import parse_turn
from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import iter_jsonl

ROLES = ("system", "user", "assistant", "tool")
RecordFormat = Literal["websailor", "released"]
MAX_MESSAGES = 10_000


@dataclass(frozen=True)
class SFTRecord:
    """One trajectory, normalized from either input format."""

    messages: tuple[dict[str, str], ...]
    """ChatML messages ``{"role", "content"}`` exactly as in the file."""
    source: str
    """``path:line`` where the record was read."""
    fmt: RecordFormat
    is_correct: bool | None
    """The record's own correctness label; ``None`` when it has none (released files)."""
    answers: tuple[str, ...]
    """Reference answers (task answer and aliases, or the released ``answer`` field)."""
    num_tool_calls: int
    """Assistant turns that hold a ``<tool_call>``."""

    @property
    def final_answer(self) -> str | None:
        """The ``<answer>`` of the last assistant turn, if it has one."""
        for m in reversed(self.messages):
            if m["role"] == "assistant":
                turn = parse_turn(m["content"])
                return turn.answer if turn.kind == "answer" else None
        return None


def _flatten(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _flatten(v)]
    return []


def _check_messages(messages: Any, where: str) -> tuple[dict[str, str], ...]:
    if not isinstance(messages, list) or not messages:
        raise UserError(f"{where}: expected a non-empty 'messages' list, got {type(messages).__name__}")
    if len(messages) > MAX_MESSAGES:
        raise UserError(f"{where}: expected at most {MAX_MESSAGES} messages, got {len(messages)}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            raise UserError(f"{where}: messages[{i}] must be {{'role': one of {list(ROLES)}, 'content': str}}, "
                             f"got {str(m)[:120]!r}")
        out.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "assistant" for m in out):
        raise UserError(f"{where}: expected at least one assistant message, got none")
    if out[0]["role"] == "assistant":
        raise UserError(f"{where}: the transcript must start with a system or user message, not assistant")
    return tuple(out)


def parse_record(record: Any, where: str) -> SFTRecord:
    """A decoded JSONL value as an :class:`SFTRecord`; ``ValueError`` naming ``where`` if malformed."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(record).__name__}")
    messages = _check_messages(record.get("messages"), where)
    calls = sum(parse_turn(m["content"]).kind == "tool_call" for m in messages if m["role"] == "assistant")
    if "is_correct" in record or isinstance(record.get("task"), dict):
        label = record.get("is_correct")
        if label is not None and not isinstance(label, bool):
            raise UserError(f"{where}: 'is_correct' must be true, false or null, got {label!r}")
        task = record.get("task") if isinstance(record.get("task"), dict) else {}
        answers = _flatten(task.get("answer")) + _flatten(task.get("aliases"))
        return SFTRecord(messages, where, "websailor", label, tuple(answers), calls)
    if record.get("type") == "chatml" or "answer" in record:
        return SFTRecord(messages, where, "released", None, tuple(_flatten(record.get("answer"))), calls)
    raise UserError(f"{where}: neither a websailor trajectory (with 'task' or 'is_correct') nor a released "
                     "ChatML record (with 'type': 'chatml' or 'answer')")


def read_records(paths: Sequence[str | os.PathLike]) -> list[SFTRecord]:
    """Every record of the JSONL files, in order; ``ValueError`` with ``file:line`` on the first bad one."""
    records = []
    for path in paths:
        if not os.path.isfile(path):
            raise UserError(f"trajectory file not found: {path}")
        for lineno, value in iter_jsonl(path):
            records.append(parse_record(value, f"{path}:{lineno}"))
    return records


@dataclass
class FilterConfig:
    """Rejection-sampling filters (WebSailor)."""

    require_correct: bool = True
    """Keep only trajectories whose final answer is correct."""
    unlabelled: Literal["judge", "keep", "drop"] = "judge"
    """Records without an ``is_correct`` label (released files): judge the final answer against the
    record's reference answers, keep them, or drop them."""
    judge: Literal["em", "f1", "recall"] = "em"
    """How ``unlabelled="judge"`` judges: normalized exact match, token F1 >= ``threshold``, or
    token recall of the reference in the answer >= ``threshold`` (released answers are sentences
    around the reference: "... is the **Epsom Derby**, won by ...")."""
    threshold: float = 0.5
    """The F1 or recall that counts as correct."""
    max_tokens: int = 32768
    """Drop transcripts longer than this many tokens (with the training tokenizer)."""
    min_tool_calls: int = 1
    """Drop trajectories with fewer tool calls than this."""
    max_turn_tokens: int = 0
    """Drop trajectories with an assistant turn longer than this many tokens (its content and the end of
    turn, with the training tokenizer): the policy's per-turn generation limit, so that SFT teaches no turn
    the policy is cut off in. 0: no limit."""

    def __post_init__(self) -> None:
        if self.unlabelled not in ("judge", "keep", "drop"):
            raise ValueError(f"unlabelled must be 'judge', 'keep' or 'drop', got {self.unlabelled!r}")
        if self.judge not in ("em", "f1", "recall"):
            raise ValueError(f"judge must be 'em', 'f1' or 'recall', got {self.judge!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if self.max_tokens < 2:
            raise ValueError(f"max_tokens must be >= 2, got {self.max_tokens}")
        if self.min_tool_calls < 0:
            raise ValueError(f"min_tool_calls must be >= 0, got {self.min_tool_calls}")
        if self.max_turn_tokens < 0:
            raise ValueError(f"max_turn_tokens must be >= 0 (0: no limit), got {self.max_turn_tokens}")


def judged_correct(record: SFTRecord, config: FilterConfig) -> bool | None:
    """Whether the record counts as correct (``None``: unlabelled and ``unlabelled="keep"``)."""
    if record.is_correct is not None:
        return record.is_correct
    if config.unlabelled == "keep":
        return None
    if config.unlabelled == "drop":
        return False
    answer = record.final_answer
    if answer is None or not record.answers:
        return False
    if config.judge == "recall":
        return max(token_recall(answer, gold) for gold in record.answers) >= config.threshold
    verdict = ExactMatchF1Judge()("", answer, record.answers)
    return verdict.is_correct if config.judge == "em" else verdict.details["f1"] >= config.threshold


def token_recall(prediction: str, gold: str) -> float:
    """Fraction of the gold answer's normalized tokens (with multiplicity) found in the prediction."""
    pred, ref = Counter(normalize_answer(prediction).split()), Counter(normalize_answer(gold).split())
    if not ref:
        return 0.0
    return sum((pred & ref).values()) / sum(ref.values())


@dataclass
class Example:
    """A training example: token ids and the loss mask of one transcript."""

    input_ids: torch.Tensor
    """``(T,)`` int64."""
    loss_mask: torch.Tensor
    """``(T,)`` int64, 1 on assistant tokens."""
    source: str


@dataclass
class FilterReport:
    """What the filters kept and dropped, by reason."""

    read: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"read": self.read, "kept": self.kept, "dropped": dict(self.dropped)}


def build_examples(records: Iterable[SFTRecord], tokenizer: Any, config: FilterConfig, *,
                   use_chat_template: bool | None = None) -> tuple[list[Example], FilterReport]:
    """Filter and tokenize (``use_chat_template`` as :func:`envs.tokens.tokenize_messages`); the report
    counts each drop under its first failing filter."""
    from envs.tokens import tokenize_messages

    report = FilterReport()
    examples = []
    for record in records:
        report.read += 1
        if config.require_correct and judged_correct(record, config) is False:
            report.dropped["incorrect"] += 1
            continue
        if record.num_tool_calls < config.min_tool_calls:
            report.dropped["few_tool_calls"] += 1
            continue
        # Cheap bound first: no tokenizer makes fewer tokens than characters / 64.
        if sum(len(m["content"]) for m in record.messages) > 64 * config.max_tokens:
            report.dropped["too_long"] += 1
            continue
        if config.max_turn_tokens and any(
                len(m["content"]) > 64 * config.max_turn_tokens
                or len(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) + 1 > config.max_turn_tokens
                for m in record.messages if m.get("role") == "assistant"):
            report.dropped["turn_too_long"] += 1
            continue
        try:
            tokens = tokenize_messages(list(record.messages), tokenizer, use_chat_template=use_chat_template)
        except ValueError as exc:
            raise UserError(f"{record.source}: cannot tokenize the transcript ({exc})") from None
        if tokens.input_ids.numel() > config.max_tokens:
            report.dropped["too_long"] += 1
            continue
        if int(tokens.loss_mask.sum()) == 0:
            report.dropped["no_assistant_tokens"] += 1
            continue
        examples.append(Example(tokens.input_ids.long(), tokens.loss_mask.long(), record.source))
        report.kept += 1
    return examples, report


def fingerprint(examples: Sequence[Example]) -> str:
    """A hash of the examples' tokens and masks: a resumed run must see the same data."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(ex.input_ids.numpy().tobytes())
        h.update(ex.loss_mask.numpy().tobytes())
    return h.hexdigest()[:16]


def collate(examples: Sequence[Example], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ``input_ids (B, T)``, ``attention_mask (B, T)``, ``loss_mask (B, T)``."""
    length = max(ex.input_ids.numel() for ex in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), length), dtype=torch.long)
    mask = torch.zeros((len(examples), length), dtype=torch.long)
    for i, ex in enumerate(examples):
        n = ex.input_ids.numel()
        ids[i, :n], attn[i, :n], mask[i, :n] = ex.input_ids, 1, ex.loss_mask
    return ids, attn, mask
