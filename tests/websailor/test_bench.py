"""``websailor bench``: real benchmark subprocesses, their JSON lines collected; failures,
timeouts and skips recorded, not fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from websailor import bench
from websailor.cli import main


def _report(out: Path) -> dict:
    return json.loads((out / "bench.json").read_text(encoding="utf-8"))


def test_every_benchmark_module_is_known():
    # A new benchmark would still run (with no arguments), but --quick could not make it small.
    assert sorted(bench.SPECS) == bench.available()
    assert "env_step" in bench.available() and "__init__" not in bench.available()


def test_quick_run_collects_the_json_line_and_writes_a_table(tmp_path, capsys):
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--only", "rollout_async", "--out", str(out)]) == 0
    report = _report(out)
    assert report["quick"] is True and report["counts"] == {"ok": 1, "failed": 0, "timeout": 0, "skipped": 0}
    [record] = report["benchmarks"]
    assert record["name"] == "rollout_async" and record["status"] == "ok" and record["reason"] is None
    assert record["command"] == "python -m benchmarks.rollout_async --episodes 24 --num-envs 8"
    assert record["result"]["benchmark"] == "rollout_async" and record["result"]["episodes"] == 24
    assert (out / "logs" / "rollout_async.stdout.txt").read_text().rstrip().endswith(
        json.dumps(record["result"])[-40:])
    table = (out / "bench.md").read_text()
    assert "| rollout_async | ok |" in table and "| benchmark | status |" in table
    assert "| rollout_async | ok |" in capsys.readouterr().out


def test_failure_timeout_and_skip_are_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    # hostile gets an option it does not have (argparse exits 2); rollout_async cannot start torch in
    # a tenth of a second; sandbox is skipped. Each is recorded; the exit status says something failed.
    monkeypatch.setitem(bench.SPECS, "hostile", bench.Spec(lambda c: [], lambda c: ["--no-such-option"]))
    out = tmp_path / "bench"
    code = main(["bench", "--quick", "--only", "hostile", "rollout_async", "sandbox", "--skip", "sandbox",
                 "--timeout", "0.1", "--out", str(out)])
    assert code == 1
    records = {r["name"]: r for r in _report(out)["benchmarks"]}
    assert records["hostile"]["status"] in ("failed", "timeout")  # argparse is fast, but 0.1 s is short
    if records["hostile"]["status"] == "failed":
        assert "exit status 2" in records["hostile"]["reason"]
        assert "--no-such-option" in records["hostile"]["reason"]
    assert records["rollout_async"]["status"] == "timeout" and "0.1" in records["rollout_async"]["reason"]
    assert records["sandbox"] == {**records["sandbox"], "status": "skipped", "reason": "--skip"}
    assert "| sandbox | skipped |" in (out / "bench.md").read_text()


def test_failed_benchmark_reason_names_the_error(tmp_path, monkeypatch):
    monkeypatch.setitem(bench.SPECS, "hostile", bench.Spec(lambda c: [], lambda c: ["--cases", "nonsense"]))
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--only", "hostile", "--out", str(out), "--timeout", "120"]) == 1
    [record] = _report(out)["benchmarks"]
    assert record["status"] == "failed" and record["returncode"] == 2
    assert "--cases" in record["reason"] and "nonsense" in record["reason"]


def test_gpu_benchmark_is_skipped_without_cuda(tmp_path, default_wiki):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: gpu_rollout would run")
    out = tmp_path / "bench"
    assert main(["bench", "--only", "gpu_rollout", "--wiki-dir", str(default_wiki), "--out", str(out)]) == 0
    [record] = _report(out)["benchmarks"]
    assert record["status"] == "skipped" and "CUDA" in record["reason"]


def test_simulator_benchmarks_are_skipped_without_a_simulator(tmp_path):
    out = tmp_path / "bench"
    assert main(["bench", "--quick", "--only", "synth,env_step", "--wiki-dir", str(tmp_path / "none"),
                 "--out", str(out)]) == 0
    for record in _report(out)["benchmarks"]:
        assert record["status"] == "skipped" and "setup_wiki.sh" in record["reason"], record


@pytest.mark.parametrize("argv, message", [
    (["--only", "nope"], "--only: unknown benchmark(s) nope; expected some of"),
    (["--skip", "env_step,nope"], "--skip: unknown benchmark(s) nope"),
    (["--only", "visit", "--skip", "visit"], "leave no benchmark to run"),
    (["--timeout", "0"], "--timeout must be > 0"),
])
def test_bad_options_are_one_line_errors(argv, message, tmp_path, capsys):
    assert main(["bench", *argv, "--out", str(tmp_path / "bench")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "bench").exists()


def test_last_json_line_skips_what_is_not_an_object(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text('table\n{"a": 1}\n{"b": 2}\n{broken\n[1, 2]\ntrailing text\n')
    assert bench.last_json_line(path) == {"b": 2}
    assert bench.targets_met({"targets": {"x": True, "y": False}}) is False
    assert bench.targets_met({"all_targets_met": True, "targets": {"x": False}}) is True
    assert bench.targets_met({"ratio": 1.0}) is None
