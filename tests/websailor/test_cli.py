"""``websailor``: what a newcomer hits first (version, help, broken pipes, paths of the wrong kind)."""

from __future__ import annotations

import errno
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from websailor import __version__, cli
from websailor.cli import build_parser, main
from wiki_sim.common.errors import UserError

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


# ------------------------------------------------------------------ user errors against bugs


@dataclass
class ProbeConfig:
    """A command that fails the way it is told to (for the tests below)."""

    fail: str = "none"
    """What to raise: user, value, enoent, enospc, reset, or none."""
    limit: int = 1
    """Must be positive (a config check, as every command's __post_init__ makes)."""

    def __post_init__(self):
        if self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")


def run_probe(config: ProbeConfig) -> int:
    if config.fail == "user":
        raise UserError("tasks.jsonl:3: not valid JSON; fix the line")
    if config.fail == "value":
        raise ValueError("an internal invariant broke")  # a bug: not the user's to fix
    if config.fail == "enoent":
        open(Path("/nonexistent-dir-of-the-probe") / "x")
    if config.fail == "enospc":
        raise OSError(errno.ENOSPC, "No space left on device")
    if config.fail == "reset":
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    return 0


@pytest.fixture
def probe(monkeypatch):
    """``websailor probe --fail ...`` (this module's ProbeConfig and run_probe)."""
    monkeypatch.setitem(cli.COMMANDS, "probe", cli.Command(__name__, "ProbeConfig", "run_probe", "test probe"))
    return lambda *args: cli.main(["probe", *args])


def test_a_user_error_is_one_line_with_exit_status_2(probe, capsys):
    assert probe("--fail", "user") == 2
    err = capsys.readouterr().err
    assert err == "websailor probe: error: tasks.jsonl:3: not valid JSON; fix the line\n"


def test_a_bad_config_value_is_a_user_error(probe, capsys):
    assert probe("--limit", "0") == 2
    assert capsys.readouterr().err == "websailor probe: error: limit must be >= 1, got 0\n"


def test_file_errors_a_user_causes_are_one_line(probe, capsys):
    assert probe("--fail", "enoent") == 2
    assert probe("--fail", "enospc") == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "No such file or directory" in lines[0] and "No space left" in lines[1]


def test_a_bug_keeps_its_traceback(probe, capsys):
    with pytest.raises(ValueError, match="an internal invariant broke"):
        probe("--fail", "value")
    with pytest.raises(ConnectionResetError):
        probe("--fail", "reset")
    assert capsys.readouterr().err == ""
    assert probe() == 0


def test_a_bug_prints_a_traceback_from_the_console_script():
    code = ("import sys, websailor.cli as c\n"
            f"c.COMMANDS['probe'] = c.Command({__name__!r}, 'ProbeConfig', 'run_probe', 'probe')\n"
            "sys.exit(c.main(['probe', '--fail', sys.argv[1]]))\n")
    bug = subprocess.run([sys.executable, "-c", code, "value"], capture_output=True, text=True, timeout=120, cwd=REPO)
    user = subprocess.run([sys.executable, "-c", code, "user"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bug.returncode == 1 and "Traceback (most recent call last)" in bug.stderr
    assert "run_probe" in bug.stderr and bug.stderr.strip().endswith("ValueError: an internal invariant broke")
    assert user.returncode == 2 and user.stderr.strip().count("\n") == 0 and "Traceback" not in user.stderr


def test_help_shows_no_rest_markup(capsys):
    """Every command's --help reads as plain text: no :mod:`x` or ``x`` from the docstrings it shows."""
    from websailor import cli as c

    names = [[g] if isinstance(e, c.Command) else [g, n] for g, e in c.COMMANDS.items()
             for n in ([None] if isinstance(e, c.Command) else e)]
    for words in names:
        with pytest.raises(SystemExit):
            c.main([*words, "--help"])
        out = capsys.readouterr().out
        assert "usage:" in out, words
        assert not re.search(r":(?:mod|func|class|meth|data|attr):`|``", out), (words, out)
