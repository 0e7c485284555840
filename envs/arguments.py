"""Argument checking shared by the search and visit tools of both environments.

Each function returns the cleaned value or raises :class:`ArgumentError`, whose message
is written for the model: what was wrong and what a correct call looks like. Tools turn
it into a ``ToolResult(ok=False)``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping


class ArgumentError(ValueError):
    """A tool call's arguments are unusable; the message tells the model how to fix them."""


def _example(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": tool, "arguments": arguments}, ensure_ascii=False)


def string_list(arguments: Mapping[str, Any], key: str, *, tool: str, aliases: tuple[str, ...] = (),
                max_items: int = 10, max_chars: int = 500, example: dict[str, Any] | None = None) -> list[str]:
    """``arguments[key]`` (or an alias) as a non-empty list of non-empty strings.

    A single string is accepted as a list of one. At most ``max_items`` items of at most
    ``max_chars`` characters each.
    """
    example_call = _example(tool, example or {key: ["..."]})
    value = arguments.get(key)
    for alias in aliases:
        if value is None:
            value = arguments.get(alias)
    if value is None:
        raise ArgumentError(f"Error: {tool} needs {key!r}, a list of strings. Call it like this: {example_call}")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ArgumentError(f"Error: {key!r} must be a list of strings, got {_describe(value)}. "
                            f"Call it like this: {example_call}")
    items = [v.strip() for v in value if v.strip()]
    if not items:
        raise ArgumentError(f"Error: {key!r} is empty; give at least one non-empty string. "
                            f"Call it like this: {example_call}")
    if len(items) > max_items:
        raise ArgumentError(f"Error: at most {max_items} items in {key!r} per call, got {len(items)}. "
                            "Split them over several calls.")
    long = [i for i, v in enumerate(items) if len(v) > max_chars]
    if long:
        raise ArgumentError(f"Error: each item of {key!r} must be at most {max_chars} characters; "
                            f"item {long[0]} has {len(items[long[0]])}. Use shorter, keyword-style items.")
    return items


def string_arg(arguments: Mapping[str, Any], key: str, *, tool: str, max_chars: int = 2000,
               example: dict[str, Any] | None = None) -> str:
    """``arguments[key]`` as a non-empty string of at most ``max_chars`` characters."""
    example_call = _example(tool, example or {key: "..."})
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        got = "nothing" if value is None else _describe(value)
        raise ArgumentError(f"Error: {tool} needs {key!r}, a non-empty string, got {got}. "
                            f"Call it like this: {example_call}")
    if len(value) > max_chars:
        raise ArgumentError(f"Error: {key!r} must be at most {max_chars} characters, got {len(value)}.")
    return value.strip()


def _describe(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    except (ValueError, RecursionError):
        text = "..."
    kind = type(value).__name__
    return f"{kind} {text[:80]}{'...' if len(text) > 80 else ''}"
