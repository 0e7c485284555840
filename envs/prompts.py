"""The system prompt, the environment's fixed messages, and ChatML rendering.

The system prompt follows the open Tongyi DeepResearch agent (role, tools as JSON schemas
inside ``<tools>`` in the Qwen/Hermes function-calling style, the format rules, then
``Current date: YYYY-MM-DD``); the first user message is the question alone.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from envs.tools.base import Tool, tool_schema

ROLE = (
    "You are a deep research assistant. Your core function is to conduct thorough, multi-source "
    "investigations into any topic. You must handle both broad, open-domain inquiries and queries "
    "within specialized academic fields. For every request, synthesize information from credible, "
    "diverse sources to deliver a comprehensive, accurate, and objective response. When you have "
    "gathered sufficient information and are ready to provide the definitive response, you must "
    "enclose the entire final answer within <answer></answer> tags."
)

FORMAT_RULES = (
    "# Format\n\n"
    "Every turn starts with your reasoning inside <think></think>, followed by exactly one of:\n"
    "- one tool call: <tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>\n"
    "- the final answer: <answer>your answer</answer>\n\n"
    "The tool's result comes back in the next user message inside <tool_response></tool_response>. "
    "Make one tool call per turn. Keep the final answer short: the name, number, date or phrase asked for."
)

ANSWER_NOW_CONTEXT = (
    "You have now reached the maximum context length you can handle. You should stop making tool "
    "calls and, based on all the information above, think again and provide what you consider the "
    "most likely answer in the following format:<think>your final thinking</think>\n<answer>your answer</answer>"
)


def answer_now_tool_calls(limit: int) -> str:
    """The note appended to the last tool response when the tool-call budget is spent."""
    return (
        f"You have now used all {limit} tool calls available. You should stop making tool calls and, "
        "based on all the information above, think again and provide what you consider the most "
        "likely answer in the following format:<think>your final thinking</think>\n<answer>your answer</answer>"
    )


def format_error_message(problems: Sequence[str], tools: Sequence[Tool]) -> str:
    """The observation after a turn with neither a tool call nor an answer."""
    names = ", ".join(t.name for t in tools) or "(none)"
    example = usage_example(tools[0]) if tools else '<answer>your answer</answer>'
    return (
        f"Error: your last turn could not be used ({'; '.join(problems)}). "
        "Start with <think>your reasoning</think>, then either call one tool or give the final answer:\n"
        f"{example}\nor\n<answer>your answer</answer>\nAvailable tools: {names}."
    )


def _example_value(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array":
        return [_example_value(schema.get("items") or {"type": "string"})]
    if kind == "object":
        return {}
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    return "..."


def usage_example(tool: Tool) -> str:
    """A well-formed call of ``tool`` built from its schema's required parameters."""
    props = tool.parameters.get("properties", {}) if isinstance(tool.parameters, Mapping) else {}
    required = tool.parameters.get("required", list(props)) if isinstance(tool.parameters, Mapping) else []
    args = {name: _example_value(props.get(name, {})) for name in required}
    return "<tool_call>\n" + json.dumps({"name": tool.name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def tools_block(tools: Sequence[Tool]) -> str:
    """The tools as Qwen/Hermes function signatures, one JSON object per line."""
    lines = [json.dumps({"type": "function", "function": tool_schema(t)}, ensure_ascii=False) for t in tools]
    return "<tools>\n" + "\n".join(lines) + "\n</tools>"


def system_prompt(tools: Sequence[Tool], current_date: str, role: str = ROLE) -> str:
    """The whole system prompt: role, tools, format rules, current date."""
    if tools:
        tool_part = (
            "# Tools\n\nYou may call one of the following functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"{tools_block(tools)}\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n"
            "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
        )
    else:
        tool_part = "# Tools\n\nNo tools are available: answer from what you know."
    return f"{role}\n\n{tool_part}\n\n{FORMAT_RULES}\n\nCurrent date: {current_date}"


def tool_response(text: str) -> str:
    """A tool's output as the user message that carries it."""
    return f"<tool_response>\n{text}\n</tool_response>"


def render_chatml(messages: Sequence[Mapping[str, str]]) -> str:
    """Messages in ChatML (``<|im_start|>role\\ncontent<|im_end|>\\n`` each), as Qwen models read them."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def parse_chatml(text: str) -> list[dict[str, str]]:
    """The messages of a ChatML text (inverse of :func:`render_chatml`)."""
    messages = []
    for chunk in text.split("<|im_start|>")[1:]:
        role, _, rest = chunk.partition("\n")
        messages.append({"role": role, "content": rest.rsplit("<|im_end|>", 1)[0]})
    return messages
