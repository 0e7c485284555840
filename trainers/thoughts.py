"""Thought reconstruction (WebSailor): rewrite each assistant thought into a short, action-oriented one.

Long, wandering thoughts of an expert model make poor SFT targets for a small one.
WebSailor keeps the actions and observations of a trajectory and asks a language model
to write, for each turn, the concise thought that leads to its action, given the history,
the action and the observation it got. Here the model is any OpenAI-compatible endpoint
(:class:`wiki_sim.common.chat.ChatClient`); only the ``<think>`` block changes, the rest of every
turn (tool call or answer) stays byte for byte.

``websailor sft thoughts --input IN --output OUT --base-url ... --model ...`` rewrites a trajectory file;
a record whose rewrite fails (endpoint down, empty reply) is left out and counted, and the
output is written to ``OUT.tmp`` and renamed at the end.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from wiki_sim.common.chat import ChatClient, ChatError
from wiki_sim.common.jsonl import atomic_open

_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
_TAGS = re.compile(r"</?think>")

PROMPT = """You rewrite the reasoning of a web research agent for training data.
Below are the conversation so far, the action the agent took next, and the result that action returned.
Write the thought the agent should have had right before the action: at most {max_words} words, first person,
action-oriented (what is known, what is still missing, why this action now). It must lead to exactly this
action. Do not quote the result as if it were already known. Reply with the thought only, without tags.

# Conversation so far
{history}

# Action taken
{action}

# Result of the action
{observation}"""


class ThoughtError(RuntimeError):
    """The language model gave no usable thought."""


def split_turn(text: str) -> tuple[str | None, str]:
    """``(thought, rest)``: the leading ``<think>`` block's content (``None`` if there is none) and
    everything after it, unchanged."""
    match = _THINK.match(text)
    if match is None:
        return None, text
    return match.group(1).strip(), text[match.end():]


def _clip(text: str, limit: int, keep: str = "head") -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + " [...]" if keep == "head" else "[...] " + text[-limit:]


@dataclass
class ThoughtOptions:
    """Bounds on what goes to the model and what comes back."""

    max_words: int = 60
    """Asked length of a thought, in words."""
    max_history_chars: int = 6000
    """The history shown is cut to its last this many characters."""
    max_message_chars: int = 1500
    """Each message in the history, the action and the observation are cut to this many characters."""
    max_thought_chars: int = 2000
    """A longer reply is cut to this many characters."""

    def __post_init__(self) -> None:
        for name in ("max_words", "max_history_chars", "max_message_chars", "max_thought_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def thought_prompt(messages: Sequence[Mapping[str, str]], index: int, options: ThoughtOptions) -> str:
    """The rewriting prompt for assistant turn ``messages[index]``."""
    lines = []
    for m in messages[:index]:
        content = m["content"]
        if m["role"] == "assistant":
            content = split_turn(content)[1]  # old thoughts would only steer the rewrite back to them
        lines.append(f"[{m['role']}] {_clip(content.strip(), options.max_message_chars)}")
    history = _clip("\n".join(lines), options.max_history_chars, keep="tail")
    action = _clip(split_turn(messages[index]["content"])[1].strip(), options.max_message_chars)
    nxt = messages[index + 1]["content"] if index + 1 < len(messages) else "(none: this turn ends the episode)"
    return PROMPT.format(max_words=options.max_words, history=history, action=action,
                         observation=_clip(nxt.strip(), options.max_message_chars))


def clean_thought(reply: str, options: ThoughtOptions) -> str:
    """The reply as a thought: tags removed, whitespace trimmed, length bounded; ``ThoughtError`` if empty."""
    thought = _TAGS.sub("", reply).strip()
    if not thought:
        raise ThoughtError("the model returned an empty thought")
    return thought[:options.max_thought_chars].strip()


def reconstruct_thoughts(messages: Sequence[Mapping[str, str]], client: Any,
                         options: ThoughtOptions | None = None) -> list[dict[str, str]]:
    """A copy of ``messages`` with every assistant thought rewritten by ``client`` (anything with
    ``complete(prompt) -> str``); the action part of each turn is kept unchanged."""
    options = options or ThoughtOptions()
    out = [{"role": m["role"], "content": m["content"]} for m in messages]
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        try:
            reply = client.complete(thought_prompt(messages, i, options), temperature=0.0)
        except ChatError as exc:
            raise ThoughtError(f"turn {i}: {exc}") from None
        _, rest = split_turn(m["content"])
        out[i]["content"] = f"<think>\n{clean_thought(reply, options)}\n</think>\n{rest.lstrip()}"
    return out


@dataclass
class ThoughtsConfig:
    """Rewrite every assistant thought of a trajectory JSONL file into a short, action-oriented one
    with an OpenAI-compatible model (WebSailor's thought reconstruction); actions stay unchanged."""

    input: str
    """Trajectory JSONL to read (this project's format or the released ChatML format)."""
    output: str
    """Trajectory JSONL to write (same records, thoughts rewritten)."""
    base_url: str
    """The endpoint's API root, e.g. http://127.0.0.1:8000/v1."""
    model: str
    """The rewriting model's name as the endpoint knows it."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable that holds the API key (sent as a bearer token when set)."""
    max_words: int = 60
    """Asked length of a thought, in words."""
    timeout: float = 60.0
    """Seconds per request."""
    max_retries: int = 2
    """Retries per request on connection errors, timeouts, 429 and 5xx."""
    limit: int | None = None
    """Rewrite only the first N records."""

    def __post_init__(self) -> None:
        if not Path(self.input).is_file():
            raise ValueError(f"trajectory file not found: {self.input}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        ThoughtOptions(max_words=self.max_words)


def run_thoughts(config: ThoughtsConfig) -> dict[str, Any]:
    """Rewrite the file; prints a summary and, last, one line of JSON."""
    from wiki_sim.common.jsonl import iter_jsonl
    from trainers.sft_data import parse_record

    client = ChatClient(config.base_url, config.model, api_key=os.environ.get(config.api_key_env) or None,
                        timeout=config.timeout, max_retries=config.max_retries)
    options = ThoughtOptions(max_words=config.max_words)
    out = Path(config.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"read": 0, "written": 0, "failed": 0, "turns_rewritten": 0, "errors": []}
    started = time.perf_counter()
    with atomic_open(out, "w") as fh:
        for lineno, value in iter_jsonl(config.input):
            if config.limit is not None and summary["read"] >= config.limit:
                break
            where = f"{config.input}:{lineno}"
            record = parse_record(value, where)
            summary["read"] += 1
            try:
                messages = reconstruct_thoughts(record.messages, client, options)
            except ThoughtError as exc:  # one bad record must not end a long run
                summary["failed"] += 1
                if len(summary["errors"]) < 10:
                    summary["errors"].append(f"{where}: {exc}")
                continue
            turns = sum(m["role"] == "assistant" for m in messages)
            fh.write(json.dumps({**value, "messages": messages,
                                 "thought_reconstruction": {"model": config.model, "turns": turns}},
                                ensure_ascii=False) + "\n")
            summary["written"] += 1
            summary["turns_rewritten"] += turns
    summary["seconds"] = round(time.perf_counter() - started, 3)
    print(f"thoughts: {summary['written']}/{summary['read']} records rewritten ({summary['failed']} failed) "
          f"-> {out}")
    print(json.dumps(summary))
    return summary
