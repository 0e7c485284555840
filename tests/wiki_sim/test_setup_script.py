"""setup_wiki.sh: options, errors, a dump build with its smoke query, and a second run that does no harm.

The full install path (venv creation, pip) runs in CI (.ci/run); here the script reuses the
virtual environment the tests run in (``--no-install``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "setup_wiki.sh"


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    venv = Path(sys.executable).parent.parent  # the environment running these tests
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "WEBSAILOR_VENV": str(venv), **env})


def test_help():
    result = run("--help")
    assert result.returncode == 0
    for option in ("--out", "--dump", "--workers", "--force", "--no-install"):
        assert option in result.stdout


@pytest.mark.parametrize("args, message", [
    (("--bogus",), "unknown argument: --bogus"), (("--out",), "--out needs a directory"),
    (("--workers", "0"), "--workers must be a positive integer"),
])
def test_bad_arguments(args, message):
    result = run(*args)
    assert result.returncode == 2 and message in result.stderr


def test_missing_venv_with_no_install(tmp_path):
    result = run("--no-install", WEBSAILOR_VENV=str(tmp_path / "novenv"))
    assert result.returncode == 2 and "no virtual environment" in result.stderr


def test_dump_build_smoke_query_and_second_run(gensim_sample_path, tmp_path):
    out = tmp_path / "wiki"
    first = run("--no-install", "--dump", str(gensim_sample_path), "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    assert "built " in first.stdout and "\n1. " in first.stdout
    assert (out / "build.json").is_file()
    before = (out / "build.json").read_text()
    second = run("--no-install", "--dump", str(gensim_sample_path), "--out", str(out))
    assert second.returncode == 0 and "up to date" in second.stdout
    assert (out / "build.json").read_text() == before


def test_default_simulator_already_built_is_kept(default_wiki, tmp_path):
    out = tmp_path / "wiki"
    shutil.copytree(default_wiki, out)
    before = (out / "build.json").read_text()
    result = run("--no-install", WEBSAILOR_WIKI_DIR=str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    # "physicist who developed the theory of relativity": the physicist, not the theory
    assert "up to date" in result.stdout and "1. Albert Einstein" in result.stdout
    assert (out / "build.json").read_text() == before


def test_missing_dump_file(tmp_path):
    result = run("--no-install", "--dump", str(tmp_path / "nope.xml.bz2"), "--out", str(tmp_path / "w"))
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert not (tmp_path / "w").exists()
