"""The import structure stays one-way: packages import only the packages below them, and no module
imports itself back through others (no circle), so every module has a floor and none imports one
standing above it.

Read from the source with ``ast`` (every ``import`` statement, inside functions too, since a
lazy import is still a dependency). ``if TYPE_CHECKING:`` imports are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wiki_sim", "envs", "sailorfog", "trainers", "websailor")
ALLOWED = {
    "wiki_sim": set(),
    "envs": {"wiki_sim"},
    "sailorfog": {"envs", "wiki_sim"},
    "trainers": {"envs"},
    "websailor": {"wiki_sim", "envs", "sailorfog", "trainers"},
}
"""Which packages each package may import (the design card's flow)."""
GROUND_FLOOR = "wiki_sim.common"
"""The ground floor (user errors, JSONL reading and atomic writing, the chat client, the cache folder
and wheel fetcher): every package may import it, and it imports nothing of the project outside itself."""
TRAINERS_INTO_WIKI_SIM = {"trainers.subword"}
"""Modules of trainers that still import wiki_sim above its ground floor (the subword tokenizer reads
its training text from a WikiSim's pages): the list may only shrink."""


def on_ground_floor(name: str) -> bool:
    return name == GROUND_FLOOR or name.startswith(GROUND_FLOOR + ".")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (``from a import b`` counts ``a.b`` when it is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_circles():
    assert circles(graph()) == []


def test_packages_import_only_the_packages_below_them():
    bad = []
    for name, targets in graph().items():
        pkg = name.split(".")[0]
        for target in targets:
            other = target.split(".")[0]
            if on_ground_floor(target) or (other == pkg or other in ALLOWED[pkg]) and not on_ground_floor(name):
                continue
            if pkg == "trainers" and other == "wiki_sim" and name in TRAINERS_INTO_WIKI_SIM:
                continue
            bad.append(f"{name} -> {target}")
    assert not bad, bad


def test_the_reader_sees_lazy_relative_and_from_imports(tmp_path):
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]
    known = {"envs", "envs.tools", "envs.tools.base", "wiki_sim", "wiki_sim.sim"}
    src = ("from . import base\nfrom envs.tools.base import Tool\n"
           "def f():\n    from wiki_sim.sim import WikiSim\n"
           "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import envs\n")
    path = tmp_path / "_probe.py"
    path.write_text(src, encoding="utf-8")
    assert imports_of("envs.tools._probe", path, known | {"envs.tools._probe"}) == {"envs.tools.base", "wiki_sim.sim"}


def test_the_ground_floor_imports_nothing_above_it():
    found = graph()
    floor = [name for name in found if on_ground_floor(name)]
    assert {"wiki_sim.common.errors", "wiki_sim.common.jsonl", "wiki_sim.common.chat"} <= set(floor)
    above = [f"{name} -> {target}" for name in floor for target in found[name] if not on_ground_floor(target)]
    assert not above, above
