"""Both servers under a slow-client flood: ``python -m benchmarks.server_flood``.

Each server (``websailor serve mcp --transport http``, ``websailor serve openenv``) runs as its
own process on 127.0.0.1, over the default simulator (built into a temporary folder unless
``--wiki-dir`` names one). ``--clients`` clients (default 800) each open a connection, send the
headers of a POST with a ``--body-kb`` body (default 1000: just under the 1 MB cap) and half of
that body, then hold the connection without sending more. Two configurations, side by side:

- ``guarded``: the servers' defaults (at most 64 connections; 30 s to deliver a request's headers
  and body, or ``--read-timeout-s``);
- ``open``: the same server with the cap and the deadline lifted (``--max-connections 100000
  --read-timeout-s 3600``): what an undefended uvicorn does.

Reported per server and configuration: the server's RSS before the flood, its peak during the
flood (sampled every 0.2 s), and its RSS 3 s after the clients left; the most flood connections it
held open at once; how long after the flood it held none (``open``: held until the clients left,
after ``--hold-s``); whether ``GET /health`` on a new connection answered during the flood (200,
or 503 while the cap is full). Targets (guarded): connections held <= the cap; peak growth <=
64 x the body cap + 64 MB; every held connection cut within the deadline + 5 s. A table, then
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_CONNECTIONS = 64
READ_TIMEOUT_S = 30.0
OPEN_LIMITS = ["--max-connections", "100000", "--read-timeout-s", "3600"]


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Server:
    """A `websailor serve ...` process on a free port."""

    def __init__(self, args: list[str]):
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "websailor.cli", "serve", *args, "--port", "0"], cwd=ROOT,
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.monotonic() + 180
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            match = re.search(r"listening on http://[^:]+:(\d+)", line)
            if match:
                self.port = int(match.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {''.join(lines)[-2000:]}")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _health(port: int) -> int:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            reply = sock.recv(64)
        return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0
    except (OSError, ValueError, IndexError):
        return 0


def _open(sock: socket.socket) -> bool:
    """Whether the server still holds this connection (it has not closed it)."""
    try:
        data = sock.recv(65536, socket.MSG_DONTWAIT | socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False  # closed (b"") or answered (408/503), which the server closes after


def _slow_client(port: int, path: str, body_bytes: int) -> socket.socket | None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {body_bytes}\r\n\r\n").encode()
        sock.sendall(head + b" " * (body_bytes // 2))
        sock.setblocking(False)  # from here on only peeked at (:func:`_open`)
        return sock
    except OSError:
        return None


def flood(server_args: list[str], path: str, clients: int, body_bytes: int, hold_s: float, guarded: bool,
          read_timeout_s: float = READ_TIMEOUT_S) -> dict:
    server = Server(server_args + (["--read-timeout-s", f"{read_timeout_s:g}"] if guarded else OPEN_LIMITS))
    pid, port = server.proc.pid, server.port
    try:
        time.sleep(1.0)
        before = _rss_mb(pid)
        peak = [before]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _rss_mb(pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        start = time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            socks = [s for s in pool.map(lambda _: _slow_client(port, path, body_bytes), range(clients)) if s]
        flood_s = time.monotonic() - start
        health = _health(port)
        held_max, cut_s = 0, None
        limit = (read_timeout_s + 10) if guarded else hold_s
        while time.monotonic() - start < limit:
            held = sum(_open(s) for s in socks)
            held_max = max(held_max, held)
            if held == 0:
                cut_s = time.monotonic() - start - flood_s
                break
            time.sleep(0.5)
        for s in socks:
            s.close()
        time.sleep(3.0)
        stop.set()
        sampler.join()
        after = _rss_mb(pid)
        return {"connected": len(socks), "held_max": held_max, "cut_after_s": cut_s, "health_in_flood": health,
                "rss_before_mb": round(before, 1), "rss_peak_mb": round(peak[0], 1), "rss_after_mb": round(after, 1),
                "flood_s": round(flood_s, 2), "health_after": _health(port)}
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wiki-dir", default=None, help="a built simulator (default: build the default one)")
    parser.add_argument("--clients", type=int, default=800)
    parser.add_argument("--body-kb", type=int, default=1000, help="declared body size (half of it is sent)")
    parser.add_argument("--hold-s", type=float, default=15.0, help="open configuration: how long clients hold")
    parser.add_argument("--read-timeout-s", type=float, default=READ_TIMEOUT_S,
                        help="guarded configuration: the servers' --read-timeout-s (default: theirs, 30)")
    parser.add_argument("--servers", default="mcp,openenv")
    parser.add_argument("--configs", default="guarded,open")
    args = parser.parse_args(argv)
    if args.clients < 1 or not 1 <= args.body_kb <= 1000 or args.hold_s <= 0 or not 0 < args.read_timeout_s <= 600:
        parser.error("--clients >= 1, --body-kb in [1, 1000], --hold-s > 0, --read-timeout-s in (0, 600]")
    servers = [s for s in args.servers.split(",") if s]
    configs = [c for c in args.configs.split(",") if c]
    if not set(servers) <= {"mcp", "openenv"} or not set(configs) <= {"guarded", "open"} or not servers or not configs:
        parser.error("--servers: mcp,openenv; --configs: guarded,open")
    with tempfile.TemporaryDirectory() as tmp:
        wiki = args.wiki_dir
        if wiki is None:
            from wiki_sim.build import build

            wiki = str(Path(tmp) / "wiki")
            build("default", None, wiki, workers=2, progress=False)
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text(json.dumps({"question": "Which city is the capital of France?", "answer": "Paris"}) + "\n")
        commands = {"mcp": (["mcp", "--wiki", wiki, "--transport", "http"], "/mcp"),
                    "openenv": (["openenv", "--wiki", wiki, "--tasks", str(tasks)], "/step")}
        results = {}
        for name in servers:
            server_args, path = commands[name]
            for config in configs:
                results[f"{name}/{config}"] = flood(server_args, path, args.clients, args.body_kb * 1000, args.hold_s,
                                                    guarded=config == "guarded", read_timeout_s=args.read_timeout_s)
    print(f"{'server/config':<18} {'clients':>7} {'held max':>8} {'cut after s':>11} {'health':>6} "
          f"{'RSS MB before':>13} {'peak':>7} {'after':>7}")
    for key, r in results.items():
        cut = "-" if r["cut_after_s"] is None else f"{r['cut_after_s']:.1f}"
        print(f"{key:<18} {r['connected']:>7} {r['held_max']:>8} {cut:>11} {r['health_in_flood']:>6} "
              f"{r['rss_before_mb']:>13.1f} {r['rss_peak_mb']:>7.1f} {r['rss_after_mb']:>7.1f}")
    checks = {}
    for key, r in results.items():
        if key.endswith("/guarded"):
            checks[key] = (r["held_max"] <= MAX_CONNECTIONS and r["cut_after_s"] is not None
                           and r["cut_after_s"] <= args.read_timeout_s + 5
                           and r["rss_peak_mb"] - r["rss_before_mb"] <= MAX_CONNECTIONS * args.body_kb / 1000 + 64)
    print(json.dumps({"benchmark": "server_flood", "clients": args.clients, "body_kb": args.body_kb,
                      "max_connections": MAX_CONNECTIONS, "read_timeout_s": args.read_timeout_s, "results": results,
                      "targets_met": checks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
