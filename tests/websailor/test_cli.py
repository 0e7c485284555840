"""``websailor``: what a newcomer hits first (version, help, broken pipes, paths of the wrong kind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from websailor import __version__
from websailor.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def test_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"websailor-gym {__version__}"


def test_help_shows_no_empty_default_for_required_lists():
    groups = build_parser()._subparsers._group_actions[0].choices
    text = groups["wiki"]._subparsers._group_actions[0].choices["search"].format_help()
    assert "QUERIES" in text and "(default: [])" not in text


def test_closed_pipe_is_not_an_error(default_wiki):
    # `websailor wiki stats --json | head -1`: the reader leaves early; no traceback, no "Broken pipe" message.
    proc = subprocess.Popen([sys.executable, "-m", "websailor.cli", "wiki", "stats", str(default_wiki), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.read(1)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Broken pipe" not in stderr and "Traceback" not in stderr


def test_derive_tasks_into_a_directory_is_a_clear_error_and_leaves_nothing(default_wiki, tmp_path, capsys):
    out = tmp_path / "tasks"
    out.mkdir()
    code = main(["env", "derive-tasks", "--wiki-dir", str(default_wiki), "--out", str(out), "--n", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory" in err and "Errno" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks"]


def test_a_directory_as_task_file_says_so(default_wiki, tmp_path, capsys):
    code = main(["env", "baseline", "--wiki-dir", str(default_wiki), "--tasks", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "is a directory" in err and "not found" not in err


def test_a_plain_folder_is_not_called_an_interrupted_build(tmp_path, capsys):
    code = main(["wiki", "stats", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "not a simulator directory" in err and "interrupted" not in err


def test_a_simulator_command_imports_no_training_library(default_wiki):
    """Only the chosen subcommand's module is imported: `websailor wiki ...` holds no torch in memory."""
    import subprocess
    import sys

    code = ("import sys, websailor.cli as c\n"
            f"rc = c.main(['wiki', 'stats', {str(default_wiki)!r}])\n"
            "print(rc, sorted(m for m in ('torch', 'gymnasium', 'trainers', 'transformers', 'sailorfog') "
            "if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"
