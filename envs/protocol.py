"""The turn protocol: parse one assistant turn into a thought, a tool call or an answer.

A strictly well-formed turn (compatible with the open WebSailor / Tongyi DeepResearch
models) is ``<think>...</think>`` followed by exactly one of::

    <tool_call>
    {"name": "search", "arguments": {"query": ["q1", "q2"]}}
    </tool_call>

    <answer>...</answer>

with nothing but whitespace around them. Parsing is lenient, so that a turn a human
would read as a tool call is run as one: a missing ``</answer>`` or ``</tool_call>`` (a
stop sequence often eats it), JSON in a code fence, trailing commas, single quotes,
Python literals (``True``, ``None``), missing closing braces, ``arguments`` given as a
JSON string, OpenAI's ``{"function": {...}}`` nesting. Every leniency used is listed in
:attr:`ParsedTurn.problems` and makes :attr:`ParsedTurn.strict` false (the format reward
reads it). Text from a ``<tool_response>`` the model wrote itself onward is ignored, as
the reference agent's stop sequence does.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

_FENCE_LANGUAGE = re.compile(r"[a-zA-Z0-9_-]*")
MAX_REPAIR_CHARS = 1 << 15
"""Longest tool-call body that the repairs beyond strict JSON are tried on (Python-literal
parsing costs far more per character than JSON); longer calls must be strict JSON."""
TurnKind = Literal["answer", "tool_call", "invalid"]

Termination = Literal["answer", "format_error", "max_tool_calls", "context_limit", "time_limit", "token_limit",
                      "judge_error", "policy_error", "env_error", "response_length"]
"""How an episode ended (``info["termination"]`` and the trajectory record's ``termination``):

- ``answer``: the agent gave a final answer (the only way to ``terminated``);
- ``format_error``: the agent's own malformed turns ended it;
- cut off by a limit before an answer (:data:`CUT_OFF_TERMINATIONS`): ``max_tool_calls`` (the
  tool-call budget), ``context_limit`` (the context budget, or the rollout's token total),
  ``time_limit`` (the wall clock), ``token_limit`` (the last turn hit the generation limit,
  ``<answer>Par`` included), ``response_length`` (verl's response budget);
- ``judge_error``: the agent answered but the judge could not decide; scored as a wrong answer
  (reward 0, kept in metrics and losses), so that an answer which breaks the judge never beats
  a wrong one; evaluation reports how often it happened;
- without a verdict on the policy (:data:`ERROR_TERMINATIONS`): ``policy_error`` (the policy
  endpoint gave no completion), ``env_error`` (the environment raised)."""
TERMINATIONS: tuple[str, ...] = get_args(Termination)
CUT_OFF_TERMINATIONS: frozenset[str] = frozenset({"max_tool_calls", "context_limit", "time_limit", "token_limit",
                                                  "response_length"})
"""Episodes cut off by a limit before an answer: GRPO leaves them out of the loss."""
ERROR_TERMINATIONS: frozenset[str] = frozenset({"policy_error", "env_error"})
"""Episodes that ended without a verdict on the policy: evaluation counts them apart and leaves them
out of pass@k; GRPO leaves them out of the loss. ``judge_error`` is not one of them: the policy
answered, and an answer the judge cannot grade scores as wrong."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call the environment can run."""

    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedTurn:
    """What one assistant turn asks for."""

    kind: TurnKind
    """``answer`` (final), ``tool_call`` (at least one ``<tool_call>`` block) or ``invalid``."""
    think: str | None = None
    answer: str | None = None
    tool_call: ToolCall | None = None
    """The first tool call, when it could be parsed."""
    tool_call_error: str | None = None
    """Why the first ``<tool_call>`` block could not be parsed, when it could not."""
    num_tool_calls: int = 0
    """How many ``<tool_call>`` blocks the turn holds (only the first is run)."""
    problems: list[str] = field(default_factory=list)
    """Every deviation from the strict format, in words."""

    @property
    def strict(self) -> bool:
        """True when the turn is strictly well-formed."""
        return not self.problems


def _spans(text: str, tag: str, limit: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each closed ``<tag>...</tag>`` block, left to right, as the
    non-greedy regex ``<tag>(.*?)</tag>`` finds them, but in time linear in ``text`` (the
    regex rescans to the end from every unclosed ``<tag>``: quadratic)."""
    open_tag, close_tag = f"<{tag}>", f"</{tag}>"
    spans: list[tuple[int, int]] = []
    pos = 0
    while limit is None or len(spans) < limit:
        start = text.find(open_tag, pos)
        if start < 0:
            break
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:  # no later <tag> can be closed either
            break
        pos = end + len(close_tag)
        spans.append((start, pos))
    return spans


def _contents(text: str, tag: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a + len(tag) + 2:b - len(tag) - 3] for a, b in spans]


def _blocks(text: str, tag: str) -> tuple[list[str], bool]:
    """Contents of every closed ``<tag>`` block, plus an unclosed last one (flag True)."""
    found = _contents(text, tag, _spans(text, tag))
    last_open = text.rfind(f"<{tag}>")
    last_close = text.rfind(f"</{tag}>")
    if last_open > last_close:
        found.append(text[last_open + len(tag) + 2:])
        return found, True
    return found, False


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    parts, pos = [], 0
    for a, b in spans:
        parts.append(text[pos:a])
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def parse_turn(text: str) -> ParsedTurn:
    """Parse an assistant turn. Never raises."""
    problems: list[str] = []
    cut = text.find("<tool_response>")
    if cut >= 0:
        problems.append("the turn contains a <tool_response>; tool responses come from the environment")
        text = text[:cut]
    think_spans = _spans(text, "think", limit=1)
    think = _contents(text, "think", think_spans)[0].strip() if think_spans else None
    if not think_spans:
        problems.append("no <think>...</think> block")
    answers, answer_unclosed = _blocks(text, "answer")
    calls, call_unclosed = _blocks(text, "tool_call")
    if answers:
        turn = ParsedTurn("answer", think=think, answer=answers[0].strip(), problems=problems)
        if answer_unclosed:
            problems.append("<answer> is not closed with </answer>")
        if len(answers) > 1:
            problems.append("more than one <answer> block")
        if calls:
            problems.append("a turn holds either a tool call or an answer, not both")
    elif calls:
        turn = ParsedTurn("tool_call", think=think, num_tool_calls=len(calls), problems=problems)
        if call_unclosed:
            problems.append("<tool_call> is not closed with </tool_call>")
        if len(calls) > 1:
            problems.append(f"{len(calls)} tool calls in one turn; only the first was run")
        try:
            turn.tool_call = parse_tool_call(calls[0], problems)
        except ValueError as exc:
            turn.tool_call_error = str(exc)
            problems.append(str(exc))
    else:
        problems.append("neither a <tool_call> nor an <answer> block")
        return ParsedTurn("invalid", think=think, problems=problems)
    if not problems and _outside_text(text):
        problems.append("text outside the <think>, <tool_call> and <answer> blocks")
    return turn


def _outside_text(text: str) -> bool:
    rest = _without(text, _spans(text, "think", limit=1))
    rest = _without(rest, _spans(rest, "answer"))
    rest = _without(rest, _spans(rest, "tool_call"))
    return bool(rest.strip())


def parse_tool_call(body: str, problems: list[str] | None = None) -> ToolCall:
    """The tool call in a ``<tool_call>`` block's body; ``ValueError`` saying what is wrong.

    Leniencies used are appended to ``problems``.
    """
    problems = problems if problems is not None else []
    tongyi = _tongyi_code_call(body)
    if tongyi is not None:
        return tongyi
    value, how = loads_lenient(body)
    if how:
        problems.append(f"the tool call is not strict JSON ({how})")
    if not isinstance(value, dict):
        raise ValueError(f"the tool call must be a JSON object, got {type(value).__name__}")
    if "function" in value and isinstance(value["function"], dict) and "name" not in value:
        problems.append('the tool call is nested in "function"')
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError('the tool call has no "name" string')
    arguments: Any = value.get("arguments")
    for alias in ("parameters", "args", "params"):
        if arguments is None and alias in value:
            problems.append(f'the tool call uses "{alias}" instead of "arguments"')
            arguments = value[alias]
    if arguments is None:
        problems.append('the tool call has no "arguments"')
        arguments = {}
    if isinstance(arguments, str):
        problems.append('"arguments" is a string, not an object')
        try:
            arguments, _ = loads_lenient(arguments)
        except ValueError:
            raise ValueError('"arguments" is a string that is not a JSON object') from None
    if not isinstance(arguments, dict):
        raise ValueError(f'"arguments" must be a JSON object, got {type(arguments).__name__}')
    extra = set(value) - {"name", "arguments", "parameters", "args", "params"}
    if extra:
        problems.append(f"the tool call has extra keys {sorted(extra)}")
    return ToolCall(name.strip(), arguments)


def _tongyi_code_call(body: str) -> ToolCall | None:
    """Tongyi DeepResearch's python call: strict JSON naming the tool, then the code in a
    ``<code>`` block (an unclosed one runs to the end)::

        {"name": "PythonInterpreter", "arguments": {}}
        <code>
        print(1)
        </code>

    The code becomes ``arguments["code"]`` (unless the JSON gives one). ``None`` when the
    body is not of that form (only strict JSON before ``<code>`` counts, so that a
    ``<code>`` inside a JSON string is never taken for it).
    """
    start = body.find("<code>")
    if start < 0:
        return None
    try:
        value = json.loads(body[:start])
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"].strip():
        return None
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict) or set(value) - {"name", "arguments"}:
        return None
    end = body.find("</code>", start)
    code = textwrap.dedent(body[start + len("<code>"):end if end >= 0 else len(body)].strip("\r\n")).strip()
    if not isinstance(arguments.get("code"), str):
        arguments = {**arguments, "code": code}
    return ToolCall(value["name"].strip(), arguments)


def loads_lenient(text: str) -> tuple[Any, str]:
    """Parse JSON, repairing what models commonly get wrong.

    Returns ``(value, how)``: ``how`` is ``""`` for strict JSON, otherwise the repairs
    used. Raises ``ValueError`` when nothing parses.
    """
    stripped = text.strip()
    try:
        return json.loads(stripped), ""
    except (ValueError, RecursionError):
        pass
    repairs: list[str] = []
    fenced = _unfence(stripped)
    if fenced is not None:
        stripped = fenced
        repairs.append("code fence")
    start, end = stripped.find("{"), stripped.rfind("}")
    if start >= 0 and end > start and (start > 0 or end < len(stripped) - 1):
        stripped = stripped[start:end + 1]
        repairs.append("text around the object")
    if len(stripped) > MAX_REPAIR_CHARS:
        try:
            return json.loads(stripped), ", ".join(repairs)
        except (ValueError, RecursionError):
            raise ValueError(f"the tool call is not valid JSON (repairs are tried only on calls up to "
                             f"{MAX_REPAIR_CHARS} characters; this one has {len(stripped)})") from None
    candidates = _candidates(stripped)
    for candidate, how in candidates:
        try:
            return json.loads(candidate), ", ".join(repairs + how)
        except (ValueError, RecursionError):
            pass
    for candidate, how in candidates:
        try:
            value = ast.literal_eval(_python_literals(candidate))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (dict, list, str, int, float, bool)) or value is None:
            return _jsonable(value), ", ".join(repairs + how + ["Python literal syntax"])
    raise ValueError("the tool call is not valid JSON")


def _unfence(text: str) -> str | None:
    """The body of a Markdown code fence that is the whole (stripped) ``text``, stripped;
    ``None`` when it is not one. (Scanned by hand: a regex for it backtracks quadratically
    over long runs of whitespace.)"""
    if len(text) < 6 or not text.startswith("```") or not text.endswith("```"):
        return None
    inner = text[3:-3]
    return inner[_FENCE_LANGUAGE.match(inner).end():].strip()


def _candidates(text: str) -> list[tuple[str, list[str]]]:
    no_commas = _TRAILING_COMMA.sub(r"\1", text)
    out = [(text, [])]
    if no_commas != text:
        out.append((no_commas, ["trailing commas"]))
    closed, missing = _balance(no_commas)
    if missing:
        out.append((closed, (["trailing commas"] if no_commas != text else []) + ["missing closing brackets"]))
    return out


# A comma before a closing bracket; the lookahead-free form is enough because strings that
# contain ",}" are rare in tool calls, and a wrong repair only means the parse fails.
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _balance(text: str) -> tuple[str, str]:
    """``text`` with its unclosed brackets closed (outside strings), and what was added."""
    stack: list[str] = []
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack and stack[-1] == ch:
            stack.pop()
    added = (quote if quote else "") + "".join(reversed(stack))
    return text + added, added


_JSON_WORDS = re.compile(r"\b(true|false|null)\b")


def _python_literals(text: str) -> str:
    """JSON's ``true``/``false``/``null`` as Python literals, outside quoted strings."""
    parts = _split_quoted(text)
    for i in range(0, len(parts), 2):
        parts[i] = _JSON_WORDS.sub(lambda m: {"true": "True", "false": "False", "null": "None"}[m.group(1)], parts[i])
    return "".join(parts)


_QUOTE = {"": re.compile("[\"']"), "\"": re.compile("'"), "'": re.compile('"'),
          "\"'": re.compile("(?!)"), "'\"": re.compile("(?!)")}
_QUOTED_REST = {q: re.compile(rf"[^{q}\\]*(?:\\.[^{q}\\]*)*{q}", re.DOTALL) for q in "\"'"}


def _split_quoted(text: str) -> list[str]:
    """``text`` cut into [outside, quoted, outside, quoted, ..., outside]: quoted strings in
    ``"`` or ``'`` with backslash escapes; a quote that is never closed is plain text.

    Linear: once the scan from a quote finds no closing quote, no later quote of that kind
    can be closed either (the scans coincide from the later quote on), so it is not retried.
    """
    parts: list[str] = []
    unclosable = ""
    pos = start = 0
    while True:
        quote = _QUOTE[unclosable].search(text, pos)
        if quote is None:
            break
        pos = quote.start()
        body = _QUOTED_REST[text[pos]].match(text, pos + 1)
        if body is None:
            unclosable += text[pos]
            pos += 1
            continue
        parts += [text[start:pos], text[pos:body.end()]]
        pos = start = body.end()
    parts.append(text[start:])
    return parts


def _jsonable(value: Any) -> Any:
    """A Python literal as JSON data (tuples and sets become lists, keys strings)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, complex)):
        return str(value)
    return value


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """A strictly well-formed ``<tool_call>`` block."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def format_turn(think: str, *, tool_call: tuple[str, dict[str, Any]] | None = None,
                answer: str | None = None) -> str:
    """A strictly well-formed assistant turn (used by the scripted policies and tests)."""
    if (tool_call is None) == (answer is None):
        raise ValueError("expected exactly one of tool_call and answer")
    body = format_tool_call(*tool_call) if tool_call is not None else f"<answer>{answer}</answer>"
    return f"<think>\n{think}\n</think>\n{body}"
