"""The README and docs/ stay true: links resolve, commands parse, runnable blocks run.

- every relative link (and its ``#anchor``) in README.md, docs/*.md and benchmarks/README.md
  points at a file and a heading that exist;
- every ``websailor ...`` line in a ``bash`` block parses with the real argument parser, and every
  ``python -m benchmarks.NAME --option`` names a benchmark that has that option;
- every block marked ``<!-- runnable -->`` (bash or python) runs and exits 0, in a temporary
  folder whose ``data/wiki`` is the default simulator;
- the README is a front door: short, no empty headings, no history prose.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
FENCE = re.compile(r"^(<!-- runnable -->\n)?```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HISTORY = re.compile(r"\b(used to (?:be|have|write|cost|take|say|show|give|run|make|read)|before these changes|"
                     r"no longer|previously|issue \d+|contract C\d)\b", re.I)


def blocks(path: Path) -> list[tuple[bool, str, str]]:
    """``(runnable, language, code)`` of each fenced block of a Markdown file."""
    return [(bool(m.group(1)), m.group(2), m.group(3)) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def command_lines(code: str) -> list[str]:
    """The logical lines of a bash block (continuations joined, comments kept for shlex)."""
    return [line.strip() for line in code.replace("\\\n", " ").splitlines() if line.strip()]


def websailor_argv(line: str) -> list[str] | None:
    """The arguments after ``websailor`` (or ``-m websailor.cli``) in a shell line, else None."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == "websailor" or word.endswith("/bin/websailor"):
            return words[i + 1:]
        if word == "websailor.cli" and i and words[i - 1] == "-m":
            return words[i + 1:]
    return None


def synopsis_to_example(argv: list[str]) -> list[str]:
    """A usage synopsis as one concrete command: ``[...]`` parts dropped, ``{a,b}`` -> ``a``."""
    text = " ".join(shlex.quote(a) if " " in a else a for a in argv)
    while re.search(r"\[[^\[\]]*\]", text):
        text = re.sub(r"\s*\[[^\[\]]*\]", "", text)
    text = re.sub(r"\{([^,{}]+)(,[^{}]*)?\}", r"\1", text)
    return shlex.split(text)


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is a front door; reference material goes to docs/"
    for path in DOCS:
        body = FENCE.sub("", path.read_text(encoding="utf-8"))
        empty = re.findall(r"^(#{1,6} .+)\n+(?=#{1,6} )", body, re.M)
        assert not empty, f"{path.name}: empty headings {empty}"
        if path.parent.name != "benchmarks":  # results may name the code they were measured against
            assert not HISTORY.findall(body), f"{path.relative_to(ROOT)}: history prose {HISTORY.findall(body)}"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(path: Path):
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    bad = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with that anchor")
    assert not bad, f"{path.relative_to(ROOT)}: {bad}"


def test_every_websailor_command_parses():
    from websailor.cli import build_parser

    parser = build_parser()
    checked = 0
    for path in DOCS:
        for _, lang, code in blocks(path):
            if lang not in ("bash", "sh"):
                continue
            for line in command_lines(code):
                argv = websailor_argv(line)
                if argv is None:
                    continue
                argv = synopsis_to_example(argv)
                try:
                    parser.parse_args(argv)
                except SystemExit as exc:
                    if exc.code not in (0, None):
                        pytest.fail(f"{path.relative_to(ROOT)}: `websailor {' '.join(argv)}` does not parse")
                except argparse.ArgumentError as exc:
                    pytest.fail(f"{path.relative_to(ROOT)}: `websailor {' '.join(argv)}` does not parse: {exc}")
                checked += 1
    assert checked >= 20


def test_every_benchmark_command_names_real_options():
    checked = 0
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"python -m benchmarks\.([a-z_]+)([^\n`|]*)", text):
            module = ROOT / "benchmarks" / f"{m.group(1)}.py"
            assert module.is_file(), f"{path.relative_to(ROOT)}: no benchmark {m.group(1)}"
            source = module.read_text(encoding="utf-8")
            for option in re.findall(r"(--[a-z][a-z0-9-]*)", m.group(2)):
                field = option[2:].replace("-", "_")  # options made from a config dataclass's fields
                known = f'"{option}"' in source or re.search(rf"^\s+{field}\s*:", source, re.M)
                assert known, f"{path.relative_to(ROOT)}: benchmarks.{m.group(1)} has no {option}"
            checked += 1
    assert checked >= 20


def runnable_blocks() -> list[tuple[str, str, str]]:
    return [(str(p.relative_to(ROOT)), lang, code) for p in DOCS for runnable, lang, code in blocks(p) if runnable]


def test_some_blocks_are_marked_runnable():
    assert len(runnable_blocks()) >= 5


@pytest.fixture(scope="module")
def workdir(default_wiki: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``data/wiki`` is the default simulator; runnable blocks run there in order."""
    folder = tmp_path_factory.mktemp("docs")
    (folder / "data").mkdir()
    (folder / "data" / "wiki").symlink_to(default_wiki)
    subprocess.run([sys.executable, "-m", "websailor.cli", "env", "derive-tasks", "--wiki-dir", "data/wiki",
                    "--out", "data/tasks.jsonl"], cwd=folder, check=True, capture_output=True, timeout=300)
    return folder


@pytest.mark.parametrize("where,lang,code", runnable_blocks(), ids=lambda v: v if "/" in v or v.endswith(".md") else "")
def test_runnable_block_runs(where: str, lang: str, code: str, workdir: Path):
    bindir = str(Path(sys.executable).parent) + "/"
    if lang == "python":
        cmd = [sys.executable, "-c", code]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", code.replace(".venv/bin/", bindir)]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{where}: block failed ({proc.returncode})\n{code}\n{proc.stderr[-2000:]}"
