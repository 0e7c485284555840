"""Every termination reason the code writes is one of :data:`envs.protocol.TERMINATIONS`.

The reasons decide what evaluation counts apart and what GRPO leaves out of the loss, so a
misspelt one would silently change training. This reads the source of every package and
collects each string the code assigns to a termination (``termination=...``,
``{"termination": ...}``, ``x.termination = ...``, ``termination = ...``, ``_truncate(...)``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from envs.protocol import CUT_OFF_TERMINATIONS, ERROR_TERMINATIONS, TERMINATIONS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("wiki_sim", "envs", "sailorfog", "trainers", "websailor")


def _strings(node: ast.AST) -> list[str]:
    """The string constants a value may be: ``"x"``, ``a or "x"``, ``"x" if c else "y"``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.BoolOp):
        return [s for v in node.values for s in _strings(v)]
    if isinstance(node, ast.IfExp):
        return _strings(node.body) + _strings(node.orelse)
    return []


def _named_termination(target: ast.AST) -> bool:
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("termination", "_final_turn", "TIME_LIMIT")


def written_reasons(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "termination":
            found += _strings(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "termination":
                    found += _strings(value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if _named_termination(target) and node.value is not None:
                    found += _strings(node.value)
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for t, v in zip(target.elts, node.value.elts):
                        if _named_termination(t):
                            found += _strings(v)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "_truncate" and node.args:
            found += _strings(node.args[0])
    return found


def test_every_written_reason_is_declared():
    seen: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for reason in written_reasons(ast.parse(path.read_text(encoding="utf-8"))):
                seen.setdefault(reason, str(path.relative_to(ROOT)))
    undeclared = {r: f for r, f in seen.items() if r and r not in TERMINATIONS}
    assert not undeclared, f"termination reasons not in envs.protocol.Termination: {undeclared}"
    assert {"answer", "format_error", "max_tool_calls", "token_limit", "env_error"} <= set(seen)


def test_the_reason_sets_partition_the_non_answers():
    assert CUT_OFF_TERMINATIONS.isdisjoint(ERROR_TERMINATIONS)
    rest = set(TERMINATIONS) - CUT_OFF_TERMINATIONS - ERROR_TERMINATIONS
    assert rest == {"answer", "format_error", "judge_error"}  # an answer the judge could not grade is scored


def test_the_reader_finds_misspelt_reasons():
    tree = ast.parse('info.update(termination="max_tool_call")\nep.termination = "env_eror"\n'
                     'x = {"termination": "answr"}\nself._truncate("tiem_limit", info)\n')
    assert sorted(written_reasons(tree)) == ["answr", "env_eror", "max_tool_call", "tiem_limit"]
