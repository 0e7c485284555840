"""How well a model keeps the turn protocol: the share of strictly well-formed turns.

:func:`format_validity` plays a ``transformers`` causal LM greedily in an environment
(token in, token out: the prompt from :func:`envs.tokens.prompt_ids`, sampled ids kept,
generation stopped at the end-of-turn marker) and parses every turn it writes with
:func:`envs.protocol.parse_turn`. The model plays as a :class:`GreedyAgent` through the one
episode runner, :func:`envs.episode.run_episode`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from envs.episode import Step, run_episode, transcript
from envs.protocol import parse_turn
from envs.tokens import ends_with_any, prompt_ids, stop_sequences


@torch.no_grad()
def generate_turn(model: Any, tokenizer: Any, ids: list[int], *, max_new_tokens: int,
                  stops: list[list[int]]) -> list[int]:
    """Greedy continuation of ``ids`` until a stop sequence or ``max_new_tokens`` (KV-cached)."""
    device = next(model.parameters()).device
    out: list[int] = []
    past = None
    inputs = torch.tensor([ids], device=device)
    for _ in range(max_new_tokens):
        result = model(input_ids=inputs, past_key_values=past, use_cache=True)
        past = result.past_key_values
        token = int(result.logits[0, -1].argmax())
        out.append(token)
        if ends_with_any(out, stops):
            break
        inputs = torch.tensor([[token]], device=device)
    return out


def _strip_stop(ids: list[int], stops: list[list[int]]) -> list[int]:
    for stop in stops:
        if stop and ids[-len(stop):] == stop:
            return ids[:-len(stop)]
    return ids


@dataclass
class GreedyAgent:
    """A causal LM as an agent of ``env``: each turn is its greedy continuation of the transcript so far."""

    model: Any
    tokenizer: Any
    env: Any
    """The environment it plays (its transcript is the prompt)."""
    max_new_tokens: int = 512
    use_chat_template: bool | None = None
    name: str = "greedy"

    def __post_init__(self) -> None:
        self.stops = stop_sequences(self.tokenizer)

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: str, info: dict[str, Any]) -> str:
        ids = prompt_ids(transcript(self.env), self.tokenizer, use_chat_template=self.use_chat_template)
        new = _strip_stop(generate_turn(self.model, self.tokenizer, ids, max_new_tokens=self.max_new_tokens,
                                        stops=self.stops), self.stops)
        return self.tokenizer.decode(new, skip_special_tokens=True)


def format_validity(model: Any, tokenizer: Any, env: Any, task_indices: list[int], *,
                    max_new_tokens: int = 512, max_turns: int = 4,
                    use_chat_template: bool | None = None) -> dict[str, Any]:
    """Play each task (``options={"task_index": i}``) for at most ``max_turns`` turns
    (``use_chat_template`` as :func:`envs.tokens.prompt_ids`: ``None`` the tokenizer's own
    template if it has one, else ChatML).

    Returns ``{"turns", "strict_turns", "rate", "tool_calls", "answers", "examples"}``:
    ``rate`` is the share of turns that :func:`envs.protocol.parse_turn` finds strictly well formed.
    """
    was_training = model.training
    model.eval()
    agent = GreedyAgent(model, tokenizer, env, max_new_tokens=max_new_tokens, use_chat_template=use_chat_template)
    turns = strict = tool_calls = answers = 0
    examples: list[str] = []

    def count(text: str, step: Step) -> None:
        nonlocal turns, strict, tool_calls, answers
        turn = parse_turn(text)
        turns += 1
        strict += turn.strict
        tool_calls += turn.kind == "tool_call"
        answers += turn.kind == "answer"
        if len(examples) < 3:
            examples.append(text)

    try:
        for index in task_indices:
            run_episode(env, agent, options={"task_index": index}, max_turns=max_turns, on_step=count)
    finally:
        model.train(was_training)
    return {"turns": turns, "strict_turns": strict, "rate": strict / turns if turns else 0.0,
            "tool_calls": tool_calls, "answers": answers, "examples": examples}


def format_validity_on_transcripts(model: Any, tokenizer: Any, transcripts: list[list[dict[str, str]]], *,
                                   max_new_tokens: int = 512, max_turns: int | None = None,
                                   use_chat_template: bool | None = None) -> dict[str, Any]:
    """Teacher-forced variant without an environment: for every assistant turn of each held-out
    transcript, generate a turn from the messages before it and parse it strictly
    (``use_chat_template`` as in :func:`format_validity`)."""
    was_training = model.training
    model.eval()
    stops = stop_sequences(tokenizer)
    turns = strict = 0
    examples: list[str] = []
    try:
        for messages in transcripts:
            positions = [i for i, m in enumerate(messages) if m["role"] == "assistant"][:max_turns]
            for i in positions:
                ids = prompt_ids(messages[:i], tokenizer, use_chat_template=use_chat_template)
                new = _strip_stop(generate_turn(model, tokenizer, ids, max_new_tokens=max_new_tokens, stops=stops),
                                  stops)
                text = tokenizer.decode(new, skip_special_tokens=True)
                turns += 1
                strict += parse_turn(text).strict
                if len(examples) < 3:
                    examples.append(text)
    finally:
        model.train(was_training)
    return {"turns": turns, "strict_turns": strict, "rate": strict / turns if turns else 0.0, "examples": examples}
