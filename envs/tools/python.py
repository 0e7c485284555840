"""The ``python`` tool: model-written code run in the bubblewrap sandbox.

Arguments: ``{"code": "..."}``. The reference agents (Tongyi DeepResearch) put the code
in ``<code>...</code>`` after the JSON of the tool call instead; that form is accepted too,
as the whole arguments string or inside ``code``, and so are Markdown code fences.

The result is one block: ``stdout:``, ``stderr:``, ``[exit status: N]`` and notes for any
limit that was reached. ``ok`` is False when the code failed, was killed or timed out, or
when the sandbox cannot run here (the message then says what to install).
"""

from __future__ import annotations

import re
from typing import Any

from envs.sandbox import Sandbox, SandboxConfig, SandboxUnavailableError
from envs.tools.base import ToolResult

_CODE_TAG = re.compile(r"<code>\s*\n?(.*?)(?:</code>|\Z)", re.DOTALL)
_FENCE = re.compile(r"\A\s*```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL | re.IGNORECASE)


def extract_code(arguments: Any) -> str | None:
    """The code in a tool call's arguments, or None when there is none.

    Accepts ``{"code": str}``, a bare string, ``<code>...</code>`` inside either (the
    first block; an unclosed tag runs to the end), and a fenced ````python`` block.
    """
    if isinstance(arguments, dict):
        text = arguments.get("code")
    else:
        text = arguments
    if not isinstance(text, str):
        return None
    if "<code>" in text:
        match = _CODE_TAG.search(text)
        text = match.group(1) if match else ""
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    return text if text.strip() else None


class PythonTool:
    """Runs Python code in a fresh sandbox per call (no state is kept between calls)."""

    name = "python"
    aliases = ("PythonInterpreter",)
    description = (
        "Execute Python 3 code in an isolated sandbox and return its stdout, stderr and exit status. "
        "Each call starts fresh (no variables or files are kept), there is no network access, and "
        "CPU time, memory and output are limited. Use print() for every value you want to see."
    )
    parameters = {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "The Python code to run, as a complete program. Print what you want to see.",
            }
        },
        "required": ["code"],
    }

    def __init__(self, config: SandboxConfig | None = None) -> None:
        # Cheap on purpose: nothing is probed until the first call or check_available().
        self.config = config or SandboxConfig()
        self.sandbox = Sandbox(self.config)

    def check_available(self) -> None:
        """Raise :class:`SandboxUnavailableError`, saying what to install or enable, unless the
        sandbox works on this machine (for callers who want to fail fast)."""
        self.sandbox.check()

    def __call__(self, arguments: dict[str, Any]) -> ToolResult:
        code = extract_code(arguments)
        if code is None:
            return ToolResult(
                text='[python] Expected arguments {"code": "<Python source>"} with non-empty code, '
                f"got {_describe(arguments)}.",
                ok=False,
                metadata={"status": "bad_arguments"},
            )
        try:
            result = self.sandbox.run(code)
        except SandboxUnavailableError as exc:
            return ToolResult(
                text=f"[python] The sandbox is unavailable: {exc}",
                ok=False,
                metadata={"status": "unavailable", "mode": self.config.mode},
            )
        except ValueError as exc:
            return ToolResult(text=f"[python] {exc}", ok=False, metadata={"status": "bad_arguments"})
        metadata = result.metadata()
        return ToolResult(
            text=result.format(),
            ok=result.ok,
            metadata={**metadata, "mode": self.config.mode},
            data={k: metadata[k] for k in ("status", "exit_code", "timed_out")},
        )


def _describe(arguments: Any) -> str:
    text = repr(arguments)
    return text if len(text) <= 200 else text[:200] + "..."
