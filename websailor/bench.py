"""``websailor bench``: run every benchmark under ``benchmarks/`` and collect their results.

Each benchmark runs as ``python -m benchmarks.NAME ...`` in its own process (its own session,
so a timeout kills all it started), from the source checkout this package lives in. Its
stdout and stderr go to ``OUT/logs/NAME.{stdout,stderr}.txt``; its result is the last line of
stdout that is a JSON object (every benchmark prints one last). Written into ``--out``:

- ``bench.json``: per benchmark its status (``ok``, ``failed``, ``timeout`` or ``skipped``),
  the reason when not ``ok``, the command, the seconds it took, whether its targets were met
  (when its JSON says) and its JSON line;
- ``bench.md``: the same as a markdown table.

A benchmark that fails or times out is recorded and the others still run; the exit status is
1 if any failed or timed out. One that cannot run here (no CUDA, no bubblewrap, no simulator,
a missing optional package) is ``skipped`` with the reason. ``--quick`` passes each one small
arguments, so the whole set takes minutes instead of hours (its numbers are then smoke
figures, not measurements).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import atomic_write_text

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / "benchmarks"
MAX_JSON_BYTES = 16 * 1024 * 1024
"""Only this much of a benchmark's stdout (its end) is searched for the JSON line."""


class Context(NamedTuple):
    """What argument builders know: the simulator, a work folder per benchmark, quick or not."""

    wiki_dir: str
    work: Path
    quick: bool


class Spec(NamedTuple):
    """How to run one benchmark: its arguments (full and quick) and why it might not run here."""

    args: Callable[[Context], list[str]]
    quick: Callable[[Context], list[str]]
    needs: Callable[[Context], str | None] = lambda ctx: None
    """Returns the reason it cannot run here, or None."""
    prepare: Callable[[Context], None] | None = None
    """Makes its inputs (in ctx.work) before it runs."""


def _missing(*modules: str, extra: str) -> Callable[[Context], str | None]:
    def check(ctx: Context) -> str | None:
        gone = [m for m in modules if importlib.util.find_spec(m) is None]
        return f"needs {', '.join(gone)}: pip install -e '.[{extra}]'" if gone else None
    return check


def _simulator(ctx: Context) -> str | None:
    if not (Path(ctx.wiki_dir) / "build.json").is_file():
        return f"no simulator in {ctx.wiki_dir}: run `bash setup_wiki.sh` or pass --wiki-dir"
    return None


def _bwrap(ctx: Context) -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if not Path("/usr/bin/python3").is_file():
        return "the sandbox's interpreter /usr/bin/python3 is missing"
    return None


def _no_cuda() -> str | None:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        return "no CUDA device (torch.cuda.is_available() is False): a GPU benchmark"
    return None


def _cuda(ctx: Context) -> str | None:
    return _simulator(ctx) or _no_cuda()


def _gpu(ctx: Context) -> str | None:
    """A GPU alone (the benchmark builds its own simulator; vLLM is measured when present)."""
    return _no_cuda()


def _model_and_simulator(ctx: Context) -> str | None:
    reason = _simulator(ctx)
    if reason:
        return reason
    from trainers.models import DEFAULT_MODEL, resolve_model

    try:
        resolve_model(DEFAULT_MODEL)
    except Exception as exc:  # a one-line reason: the model setup converts is missing
        return str(exc).splitlines()[0]
    return None


MAIN_RUN = REPO / "runs" / "default"
"""The main job's run (README), whose SFT and GRPO models ``paired_eval`` compares."""


def _main_run(ctx: Context) -> str | None:
    if not all((MAIN_RUN / name / "model" / "config.json").is_file() for name in ("sft", "grpo")):
        return f"no finished main job in {MAIN_RUN}: run `websailor pipeline --out runs/default` first"
    return None


def _gpu_backend() -> str:
    return "vllm" if importlib.util.find_spec("vllm") is not None else "transformers"


def _derive_tasks(n: int) -> Callable[[Context], None]:
    def prepare(ctx: Context) -> None:
        ctx.work.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "websailor.cli", "env", "derive-tasks", "--wiki-dir", ctx.wiki_dir,
                        "--out", str(ctx.work / "tasks.jsonl"), "--n", str(n)],
                       check=True, capture_output=True, timeout=600, cwd=REPO, env=_env())
    return prepare


def _if_known(name: str, *args: str) -> list[str]:
    """``args`` (an option and its value) if benchmark ``name`` declares that option, else nothing:
    quick settings for options a benchmark gains later, without breaking the versions before."""
    try:
        source = (BENCH_DIR / f"{name}.py").read_text(encoding="utf-8")
    except OSError:
        return []
    return list(args) if f'"{args[0]}"' in source else []


def _search_engines(ctx: Context) -> list[str]:
    engines = ["simulator", "fts5", "fts5-stopwords"]
    if importlib.util.find_spec("tantivy") is not None:
        engines[1:1] = ["simulator-tantivy"]
        engines.append("tantivy")
    if importlib.util.find_spec("bm25s") is not None:
        engines.append("bm25s")
    return ["--engines", ",".join(engines)]


SPECS: dict[str, Spec] = {
    "env_step": Spec(lambda c: ["--wiki-dir", c.wiki_dir],
                     lambda c: ["--wiki-dir", c.wiki_dir, "--episodes", "12", "--rounds", "1", "--num-envs", "2",
                                "--steps", "300"],
                     _simulator),
    "build_memory": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--work", str(c.work)],
                         lambda c: ["--wiki-dir", c.wiki_dir, "--work", str(c.work), "--pages", "1000",
                                    "--memory-mb", "512"], _simulator),
    "gpu_rollout": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--tasks", str(c.work / "tasks.jsonl"),
                                   "--backend", _gpu_backend()],
                        lambda c: ["--wiki-dir", c.wiki_dir, "--tasks", str(c.work / "tasks.jsonl"),
                                   "--backend", _gpu_backend(), "--size", "tiny", "--episodes", "16",
                                   "--num-envs", "8", "--max-new-tokens", "64"],
                        _cuda, _derive_tasks(128)),
    "gpu_train": Spec(lambda c: [],
                      lambda c: ["--size", "tiny", "--episodes", "16", "--max-new-tokens", "64", "--long-tokens", "4096"],
                      _gpu),
    "grpo_dose": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work)],
                      lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work), "--smoke", "--no-progress"],
                      _simulator),
    "grpo_learning": Spec(lambda c: ["--out", str(c.work / "grpo_learning.png")],
                          lambda c: ["--steps", "2", "--out", str(c.work / "grpo_learning.png")]),
    "grpo_step": Spec(lambda c: [],
                      lambda c: ["--batch", "4", "--group", "2", "--completion-tokens", "16", "--steps", "1"],
                      _missing("trl", "datasets", extra="trl")),
    "hostile": Spec(lambda c: [], lambda c: ["--cases", "normal,internal,redirect_internal,echo_key"]),
    "hostile_endpoints": Spec(lambda c: [], lambda c: ["--cases", "healthy,huge_declared,redirect,failing"]),
    "learning": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work)],
                     lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work), "--smoke", "--no-progress"],
                     _simulator),
    "links": Spec(lambda c: [], lambda c: []),
    "live_faults": Spec(lambda c: [], lambda c: ["--calls", "120"],
                        _missing("trafilatura", extra="live")),
    "paired_eval": Spec(lambda c: ["--run-dir", str(MAIN_RUN), "--out-dir", str(c.work)],
                        lambda c: ["--run-dir", str(MAIN_RUN), "--out-dir", str(c.work), "--tasks", "20",
                                   "--samples", "1"], _main_run),
    "parallel_memory": Spec(lambda c: [], lambda c: ["--layers", "2", "--hidden", "64", "--vocab", "1000",
                                                     "--tokens", "64", "--steps", "2"]),
    "retrieval": Spec(lambda c: ["--wiki", c.wiki_dir],
                      lambda c: ["--wiki", c.wiki_dir, "--n", "20", "--variants", "input", "--research-tasks", "2",
                                 "--episodes", "2"], _model_and_simulator),
    "rollout_async": Spec(lambda c: [], lambda c: ["--episodes", "24", "--num-envs", "8"]),
    "rollout_speed": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--threads", "1"],
                          lambda c: ["--wiki-dir", c.wiki_dir, "--threads", "1", "--parallel", "8",
                                     "--max-new-tokens", "16"], _model_and_simulator),
    "server_flood": Spec(lambda c: ["--wiki-dir", c.wiki_dir],
                         lambda c: ["--wiki-dir", c.wiki_dir, "--clients", "100", "--body-kb", "200", "--hold-s", "3",
                                    "--read-timeout-s", "3", "--configs", "guarded"], _simulator),
    "sandbox": Spec(lambda c: [], lambda c: ["--runs", "5", "--callers", "2", "--per-caller", "3", "--rounds", "1"],
                    _bwrap),
    "scale": Spec(lambda c: ["--sentences-from", c.wiki_dir],
                  lambda c: ["--sentences-from", c.wiki_dir, "--quick"], _simulator),
    "search": Spec(_search_engines,
                   lambda c: ["--source", "gensim-sample", "--queries", "8", "--threads", "2",
                              *_if_known("search", "--thread-seconds", "0.3"), *_if_known("search", "--thread-repeats", "1"),
                              *_search_engines(c)]),
    "sft_learning": Spec(lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work)],
                         lambda c: ["--wiki-dir", c.wiki_dir, "--out-dir", str(c.work), "--num-tasks", "8",
                                    "--heldout", "1", "--steps", "10", "--eval-every", "10", "--hidden", "32",
                                    *_if_known("sft_learning", "--episodes", "1"),
                                    *_if_known("sft_learning", "--val", "1"),
                                    *_if_known("sft_learning", "--pretrain-steps", "5")],
                         _simulator),
    "spelling": Spec(lambda c: [], lambda c: ["--words", "30", "--large-terms", "100000"],
                     _missing("tantivy", extra="tantivy")),
    "subgraph_coverage": Spec(lambda c: ["--wiki-dir", c.wiki_dir],
                              lambda c: ["--wiki-dir", c.wiki_dir, "--nodes", "80", "--seeds", "1", "--walks", "2000"],
                              _simulator),
    "synth": Spec(lambda c: ["--wiki", c.wiki_dir],
                  lambda c: ["--wiki", c.wiki_dir, "--attempts", "12", "--graph-nodes", "80", "--n", "100"],
                  _simulator),
    "synth_scale": Spec(lambda c: ["--wiki", c.wiki_dir, "--work", str(c.work)],
                        lambda c: ["--wiki", c.wiki_dir, "--work", str(c.work), "--corpora", "1x", "--attempts", "12",
                                   "--research-n", "0"],
                        _simulator),
    "synth_difficulty": Spec(lambda c: ["--wiki", c.wiki_dir], lambda c: ["--wiki", c.wiki_dir, "--n", "10"],
                             _simulator),
    "update_memory": Spec(lambda c: [], lambda c: ["--tokens", "2048", "--vocab", "16000", "--chunk", "256"]),
    "vector_memory": Spec(lambda c: ["--wiki-dir", c.wiki_dir],
                          lambda c: ["--wiki-dir", c.wiki_dir, "--steps", "400"], _simulator),
    "visit": Spec(lambda c: [], lambda c: ["--n", "20"]),
}
"""Every benchmark this command knows how to call. A module in benchmarks/ that is not here
still runs, with no arguments (so a new benchmark is never silently left out)."""


def available() -> list[str]:
    """The benchmark modules in ``benchmarks/``, by name."""
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))


@dataclass
class BenchConfig:
    """Run every benchmark under benchmarks/ (each `python -m benchmarks.NAME` in a subprocess with a timeout);
    write OUT/bench.json (status, reason, seconds and JSON line per benchmark) and OUT/bench.md (a table).
    Exit status 1 if any benchmark failed or timed out. See benchmarks/README.md."""

    only: list[str] = field(default_factory=list, metadata={"metavar": "NAME"})
    """Run only these benchmarks (names as in benchmarks/, e.g. env_step search; commas work too)."""
    skip: list[str] = field(default_factory=list, metadata={"metavar": "NAME"})
    """Leave these benchmarks out (recorded as skipped)."""
    out: str = field(default="runs/bench", metadata={"metavar": "DIR"})
    """Folder for bench.json, bench.md, each benchmark's logs and its output files."""
    timeout: float = field(default=3600.0, metadata={"metavar": "SECONDS"})
    """Seconds each benchmark may run before it is killed and recorded as timeout."""
    quick: bool = False
    """Small arguments for every benchmark: the whole set in minutes (smoke figures, not measurements)."""
    wiki_dir: str = field(default="data/wiki", metadata={"metavar": "DIR"})
    """The built simulator the benchmarks that need one use."""

    def __post_init__(self) -> None:
        self.only = _names(self.only)
        self.skip = _names(self.skip)
        known = available()
        for flag, names in (("--only", self.only), ("--skip", self.skip)):
            unknown = [n for n in names if n not in known]
            if unknown:
                raise ValueError(f"{flag}: unknown benchmark(s) {', '.join(unknown)}; expected some of "
                                 f"{', '.join(known)}")
        if self.only and not set(self.only) - set(self.skip):
            raise ValueError("--only and --skip leave no benchmark to run")
        if not self.timeout > 0:
            raise ValueError(f"--timeout must be > 0 seconds, got {self.timeout}")
        if not self.out:
            raise ValueError("--out must name a folder, e.g. runs/bench")
        if Path(self.out).exists() and not Path(self.out).is_dir():
            raise ValueError(f"--out {self.out} exists and is not a folder")


def _names(values: list[str] | tuple[str, ...] | None) -> list[str]:
    names: list[str] = []
    for value in values or []:
        names.extend(n.strip() for n in str(value).split(",") if n.strip())
    return list(dict.fromkeys(names))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def last_json_line(path: Path) -> dict[str, Any] | None:
    """The last line of ``path`` that is a JSON object (searched in its last MAX_JSON_BYTES)."""
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - MAX_JSON_BYTES))
        lines = fh.read().decode("utf-8", errors="replace").splitlines()
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def targets_met(result: dict[str, Any] | None) -> bool | None:
    """Whether the benchmark's own targets were met, when its JSON says (``all_targets_met`` or a
    ``targets`` mapping of booleans); None when it does not say."""
    if not result:
        return None
    if isinstance(result.get("all_targets_met"), bool):
        return result["all_targets_met"]
    targets = result.get("targets")
    if isinstance(targets, dict) and targets and all(isinstance(v, bool) for v in targets.values()):
        return all(targets.values())
    return None


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b|error:|.*: error: )")


def _why(path: Path) -> str:
    """The line of a benchmark's stderr that says why it failed: the last error line (a traceback's
    last line, an argparse error), else its last line."""
    if not path.is_file():
        return ""
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - 65536))
        text = fh.read().decode("utf-8", errors="replace")
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in kept if _ERROR_LINE.match(line)]
    return (errors or kept or [""])[-1][:500]


def _exit_reason(returncode: int, stderr_path: Path) -> str:
    if returncode < 0:
        try:
            how = f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"killed by signal {-returncode}"
    else:
        how = f"exit status {returncode}"
    why = _why(stderr_path)
    return f"{how}: {why}" if why else how


def run_one(name: str, config: BenchConfig, out: Path) -> dict[str, Any]:
    """Run one benchmark; its record for bench.json."""
    ctx = Context(wiki_dir=str(Path(config.wiki_dir).resolve()), work=(out / name).resolve(), quick=config.quick)
    spec = SPECS.get(name)
    args = ((spec.quick if config.quick else spec.args)(ctx)) if spec else []
    command = [sys.executable, "-m", f"benchmarks.{name}", *args]
    record: dict[str, Any] = {"name": name, "status": "", "reason": None, "seconds": 0.0,
                              "command": " ".join(["python", "-m", f"benchmarks.{name}", *args]),
                              "targets_met": None, "result": None}
    if name in config.skip:
        return {**record, "status": "skipped", "reason": "--skip"}
    reason = spec.needs(ctx) if spec else None
    if reason:
        return {**record, "status": "skipped", "reason": reason}
    ctx.work.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = logs / f"{name}.stdout.txt", logs / f"{name}.stderr.txt"
    start = time.perf_counter()
    try:
        if spec and spec.prepare:
            spec.prepare(ctx)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        detail = detail.decode("utf-8", "replace").strip().splitlines()[-1:] if isinstance(detail, bytes) else []
        return {**record, "status": "failed", "seconds": round(time.perf_counter() - start, 2),
                "reason": f"preparing its inputs failed: {exc}" + (f" ({detail[0]})" if detail else "")}
    with stdout_path.open("wb") as so, stderr_path.open("wb") as se:
        proc = subprocess.Popen(command, stdout=so, stderr=se, stdin=subprocess.DEVNULL, cwd=REPO, env=_env(),
                                start_new_session=True)
        try:
            returncode = proc.wait(timeout=config.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            returncode = None
        except BaseException:  # Ctrl-C: take the benchmark's whole process group down with us
            _kill_group(proc)
            raise
    record["seconds"] = round(time.perf_counter() - start, 2)
    record["returncode"] = returncode
    record["log"] = str(stdout_path)
    result = last_json_line(stdout_path)
    record["result"] = result
    record["targets_met"] = targets_met(result)
    if returncode is None:
        record.update(status="timeout", reason=f"killed after --timeout {config.timeout:g} s")
    elif returncode != 0:
        record.update(status="failed", reason=_exit_reason(returncode, stderr_path))
    elif result is None:
        record.update(status="failed", reason="no JSON line on stdout (every benchmark prints one last)")
    else:
        record["status"] = "ok"
    return record


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _headline(result: dict[str, Any] | None) -> str:
    """A few of the JSON line's top-level numbers, for the table."""
    if not result:
        return ""
    numbers = [(k, v) for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    # Results first (ratios, rates, latencies), then whatever else is numeric (mostly the inputs).
    measured = ("ratio", "over", "per_s", "per_min", "speedup", "recall", "rate", "_ms", "hit")
    numbers.sort(key=lambda kv: not any(m in kv[0] for m in measured))
    return ", ".join(f"{k}={v}" for k, v in numbers[:4])


def markdown(report: dict[str, Any]) -> str:
    """``bench.md``: one row per benchmark."""
    lines = [f"# Benchmarks ({'quick' if report['quick'] else 'full'} run, {report['started_at']})", "",
             "| benchmark | status | seconds | targets met | notes |", "|---|---|---:|---|---|"]
    for r in report["benchmarks"]:
        met = {True: "yes", False: "no", None: "-"}[r["targets_met"]]
        notes = r["reason"] or _headline(r["result"])
        lines.append(f"| {r['name']} | {r['status']} | {r['seconds']:.1f} | {met} | "
                     f"{str(notes).replace('|', '/')} |")
    counts = report["counts"]
    lines += ["", ", ".join(f"{k}: {v}" for k, v in counts.items()), ""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def run_bench(config: BenchConfig) -> int:
    if not BENCH_DIR.is_dir():
        raise UserError(f"websailor bench runs the benchmarks of a source checkout; {BENCH_DIR} is missing")
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in available() if not config.only or n in config.only]
    report: dict[str, Any] = {"quick": config.quick, "timeout_s": config.timeout, "wiki_dir": config.wiki_dir,
                              "python": sys.executable, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "benchmarks": [], "counts": {"ok": 0, "failed": 0, "timeout": 0, "skipped": 0}}
    for i, name in enumerate(names, 1):
        print(f"==> [{i}/{len(names)}] {name}", flush=True)
        record = run_one(name, config, out)
        report["benchmarks"].append(record)
        print(f"    {record['status']} in {record['seconds']:.1f} s"
              + (f": {record['reason']}" if record["reason"] else ""), flush=True)
        report["counts"] = {s: sum(r["status"] == s for r in report["benchmarks"])
                            for s in ("ok", "failed", "timeout", "skipped")}
        _write(out / "bench.json", json.dumps(report, indent=2, default=str) + "\n")  # after each, for a long run
    _write(out / "bench.md", markdown(report))
    print()
    print(markdown(report))
    print(f"wrote {out / 'bench.json'} and {out / 'bench.md'}")
    return 1 if report["counts"]["failed"] or report["counts"]["timeout"] else 0
