"""Turn a config dataclass into an argparse (sub)parser, and parsed arguments back into it.

Each field's help text is the attribute docstring written under it in the class body
(the string literal that follows the field), so a config documents itself once:

    @dataclass
    class SearchConfig:
        wiki_dir: str = field(metadata={"positional": True})
        \"\"\"The simulator directory.\"\"\"
        k: int = 10
        \"\"\"Results per query.\"\"\"

Field metadata: ``positional`` (bool) makes it a positional argument, ``flag`` overrides the
option name, ``nargs`` and ``metavar`` are passed through. ``Literal[...]`` fields become ``choices``;
``bool`` fields become ``--name/--no-name`` switches.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import textwrap
import typing
from typing import Any, Literal, get_args, get_origin

from wiki_sim.common.errors import UserError


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``")


def plain_text(doc: str) -> str:
    """A docstring as a terminal shows it: reST roles (``:mod:`x```, ``:func:`~a.b```) and literals
    (````x````) as their plain text; a role's ``~`` keeps only the last dotted part, as Sphinx does."""
    def role(m: re.Match) -> str:
        target = m.group(1)
        return target.rsplit(".", 1)[-1] if m.group(0).startswith(":") and "`~" in m.group(0) else target

    return _LITERAL.sub(r"\1", _ROLE.sub(role, doc))


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of a dataclass, by field name (empty where none is written)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = plain_text(" ".join(nxt.value.value.split()))
    return docs


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one argument per field of ``cls`` to ``parser``."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init or f.metadata.get("cli") is False:
            continue
        tp, _optional = _unwrap_optional(hints[f.name])
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = (
            f.default if f.default is not dataclasses.MISSING
            else f.default_factory() if f.default_factory is not dataclasses.MISSING
            else None
        )
        help_text = docs.get(f.name, "")
        # An empty list default on a "one or more" argument is no default a user could rely on.
        if has_default and default is not None and default != [] and tp is not bool:
            help_text = f"{help_text} (default: {default})".strip()
        kwargs: dict[str, Any] = {"help": help_text}
        if get_origin(tp) is Literal:
            kwargs["choices"] = list(get_args(tp))
            kwargs["type"] = type(get_args(tp)[0])
        elif get_origin(tp) in (list, tuple):
            inner = get_args(tp)[0] if get_args(tp) else str
            kwargs["type"] = inner if inner in (int, float, str) else str
            kwargs["nargs"] = f.metadata.get("nargs", "+")
        elif tp in (int, float, str):
            kwargs["type"] = tp
        if "nargs" in f.metadata:
            kwargs["nargs"] = f.metadata["nargs"]
        if "metavar" in f.metadata:
            kwargs["metavar"] = f.metadata["metavar"]
        if f.metadata.get("positional"):
            if has_default:
                kwargs.setdefault("nargs", "?")
                kwargs["default"] = default
            kwargs.setdefault("metavar", f.name.upper())
            parser.add_argument(f.name, **kwargs)
            continue
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        if tp is bool:
            # An optional bool keeps None (for "auto") when neither --x nor --no-x is given.
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                                default=default if _optional else bool(default), help=help_text)
            continue
        parser.add_argument(flag, dest=f.name, default=default, required=not has_default, **kwargs)


def config_from_args(cls: type, args: argparse.Namespace) -> Any:
    """Build ``cls`` from the parsed namespace. Its ``__post_init__`` validates: a ``ValueError`` it
    raises is about what the user typed, so it becomes a :class:`UserError`."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.init and hasattr(args, f.name):
            value = getattr(args, f.name)
            if isinstance(value, list) and typing.get_origin(typing.get_type_hints(cls)[f.name]) is tuple:
                value = tuple(value)
            values[f.name] = value
    try:
        return cls(**values)
    except UserError:
        raise
    except ValueError as exc:
        raise UserError(str(exc)) from exc
