"""Start a `websailor serve ...` command as a real process on 127.0.0.1 and stop it with SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """A server started with ``--port 0``; :attr:`url` is read from its "listening on" line."""

    def __init__(self, *args: str, timeout: float = 120.0):
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "websailor.cli", "serve", *args, "--port", "0"],
                                     cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self.url is None:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {''.join(self.lines)[-3000:]}")

    url: str | None = None

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                self.url = match.group(1)
                self._ready.set()
        self._ready.set()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit status (killed, and an error, after ``timeout``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the server did not stop within {timeout} s of SIGTERM") from None
        finally:
            time.sleep(0.1)  # let the reader thread take the last lines

    def output(self) -> str:
        return "".join(self.lines)
