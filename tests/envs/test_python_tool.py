"""The ``python`` tool: the Tool protocol, argument forms, the result block, and its modes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from envs.sandbox import SandboxConfig, SandboxUnavailableError
from envs.tools.base import Tool, tool_schema
from envs.tools.python import PythonTool, extract_code
from tests.envs.sandbox_support import FAST, require_sandbox


@pytest.fixture(scope="module")
def tool():
    require_sandbox(FAST)
    return PythonTool(FAST)


def test_is_a_tool_with_a_schema():
    tool = PythonTool()
    assert isinstance(tool, Tool)
    schema = tool_schema(tool)
    assert schema["name"] == "python"
    assert schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    json.dumps(schema)  # goes into the system prompt as JSON


def test_constructing_never_raises_and_calls_explain_a_missing_bubblewrap():
    tool = PythonTool(SandboxConfig(bwrap="/nonexistent/bwrap"))  # nothing is probed here
    result = tool({"code": "print(1)"})
    assert not result.ok
    assert result.metadata["status"] == "unavailable"
    assert "apt-get install bubblewrap" in result.text
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        tool.check_available()


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"code": "print(1)"}, "print(1)"),
        ("print(2)", "print(2)"),
        ({"code": "<code>\nprint(3)\n</code>"}, "print(3)\n"),
        ('{"name": "PythonInterpreter", "arguments": {}}\n<code>\nx = 4\nprint(x)\n</code>\n', "x = 4\nprint(x)\n"),
        ({"code": "<code>print(5)"}, "print(5)"),  # unclosed tag: to the end
        ({"code": "```python\nprint(6)\n```"}, "print(6)"),
        ({"code": "```\nprint(7)\n```\n"}, "print(7)"),
        ({"code": "a = '<b>'\nprint(a)"}, "a = '<b>'\nprint(a)"),
    ],
)
def test_extract_code_accepts_the_reference_forms(arguments, code):
    assert extract_code(arguments) == code


@pytest.mark.parametrize("arguments", [{}, {"code": 5}, {"code": "   "}, {"code": "<code></code>"},
                                       {"query": "print(1)"}, None, 42])
def test_bad_arguments_say_how_to_call(arguments):
    result = PythonTool(SandboxConfig(bwrap="/nonexistent/bwrap"))(arguments)
    assert not result.ok and result.metadata["status"] == "bad_arguments"
    assert result.text.startswith('[python] Expected arguments {"code": "<Python source>"}')


def test_stdout_and_exit_status_in_one_block(tool):
    result = tool({"code": "print(6 * 7)"})
    assert result.ok
    assert result.text == "stdout:\n42\n[exit status: 0]"
    assert result.metadata["status"] == "ok" and result.metadata["mode"] == "bwrap"
    assert result.metadata["exit_code"] == 0


def test_reference_form_runs(tool):
    raw = '{"name": "PythonInterpreter", "arguments": {}}\n<code>\nimport math\nprint(math.factorial(10))\n</code>'
    result = tool(raw)
    assert result.ok and result.text == "stdout:\n3628800\n[exit status: 0]"


def test_errors_show_the_traceback_and_status(tool):
    result = tool({"code": "print('start')\n1 / 0\n"})
    assert not result.ok and result.metadata["status"] == "error"
    assert result.text.startswith("stdout:\nstart\nstderr:\nTraceback (most recent call last):\n")
    assert 'File "/sandbox/main.py", line 2' in result.text
    assert "ZeroDivisionError: division by zero\n[exit status: 1]" in result.text


def test_exit_code_is_reported(tool):
    result = tool({"code": "import sys\nsys.exit(3)"})
    assert not result.ok and result.text == "[exit status: 3]"


def test_no_output_is_said_plainly(tool):
    result = tool({"code": "x = 1"})
    assert result.ok
    assert result.text == "Finished execution with no output (use print() to see values).\n[exit status: 0]"


def test_unicode_round_trips(tool):
    result = tool({"code": "print('héllo ✓ 東京')"})
    assert result.text == "stdout:\nhéllo ✓ 東京\n[exit status: 0]"


def test_stdin_is_empty(tool):
    result = tool({"code": "input()"})
    assert "EOFError" in result.text


def test_calls_share_nothing(tool):
    first = tool({"code": "open('/tmp/state.txt', 'w').write('kept?')\nx = 1\nprint('written')"})
    assert first.ok
    second = tool({"code": "import os\nprint(os.listdir('/tmp'), 'x' in globals())"})
    assert second.text == "stdout:\n[] False\n[exit status: 0]"


def test_standard_library_works(tool):
    code = """
import json, re, datetime, fractions, statistics, sqlite3, hashlib
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
db.executemany("insert into t values (?)", [(i,) for i in range(10)])
print(db.execute("select sum(x) from t").fetchone()[0], statistics.median([3, 1, 2]),
      fractions.Fraction(1, 3) + fractions.Fraction(1, 6), hashlib.sha256(b"a").hexdigest()[:8])
"""
    result = tool({"code": code})
    assert result.text == "stdout:\n45 2 1/2 ca978112\n[exit status: 0]"


def test_timeout_is_clear(tool):
    quick = PythonTool(replace(FAST, wall_seconds=1.5))
    result = quick({"code": "import time\ntime.sleep(30)"})
    assert not result.ok and result.metadata["status"] == "timeout"
    assert "[timeout] The program exceeded the wall-clock limit of 1.5 s and was killed" in result.text


def test_too_long_code_is_refused_without_running():
    result = PythonTool(SandboxConfig(bwrap="/nonexistent/bwrap"))({"code": "#" * (2 << 20)})
    assert not result.ok and result.metadata["status"] == "bad_arguments"
    assert "code: expected at most" in result.text


def test_unsafe_local_mode_is_explicit_and_isolates_nothing(tmp_path):
    assert PythonTool().config.mode == "bwrap"
    secret = tmp_path / "host-file.txt"
    secret.write_text("visible from unsafe-local")
    tool = PythonTool(replace(FAST, mode="unsafe-local", wall_seconds=1.5))
    result = tool({"code": f"print(open({str(secret)!r}).read())"})
    assert result.ok and result.metadata["mode"] == "unsafe-local"
    assert "visible from unsafe-local" in result.text  # which is why it is never the default
    timed = tool({"code": "import time\nprint('t', flush=True)\ntime.sleep(30)"})
    assert timed.metadata["status"] == "timeout" and "stdout:\nt\n" in timed.text
    memory = tool({"code": "x = bytearray(1 << 30)"})
    assert "MemoryError" in memory.text
