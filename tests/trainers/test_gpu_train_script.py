"""benchmarks/gpu_train.py: one line and exit 2 without what it needs; ``--dry-run`` runs its whole code path on
CPU (both engines: transformers, and vLLM's stand-in; a tiny model, a simulator it builds, a BPE tokenizer);
``--rollout-engine hf`` on a prepared simulator runs with nothing but torch, transformers (and their
requirements), the project and the packages the script says it carries: everything else installed here is
hidden from it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_train

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--tokenizer", "subword", "--subword-vocab", "400", "--episodes", "2", "--max-new-tokens", "4"]


def test_without_a_gpu_or_vllm_it_says_so_in_one_line(capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    assert gpu_train.main([]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_train: ") and "CUDA" in lines[0] and "--dry-run" in lines[0]
    assert out.out == ""
    if importlib.util.find_spec("vllm") is not None:
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU without vLLM
    assert gpu_train.main(["--rollout-engine", "vllm"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "websailor-gym[vllm]" in lines[0]
    args = gpu_train.parse([])
    assert gpu_train.engines_for(args) == ["hf"]  # auto: the transformers engine alone


def test_dry_run_runs_both_engines_on_cpu(capsys):
    rc = gpu_train.main(["--dry-run", *SMALL, "--pages", "12", "--long-tokens", "64,96"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert lines[0].startswith("measure") and result["benchmark"] == "gpu_train" and result["dry_run"]
    assert result["engines"] == ["hf", "standin-cpu"] and result["engine"] == "hf" and result["tokenizer"] == "subword"
    for engine in ("hf", "vllm"):
        r = result["by_engine"][engine]
        assert r["bare_tokens_per_s"] > 0 and r["rollout_tokens_per_s"] > 0 and r["rollout_turns"] >= 2
        assert r["step_train_tokens"] > 0 and r["step_s"] > 0
        assert 0 <= r["mismatch_abs_mean"] <= r["mismatch_abs_max"] and r["mismatch_within_limit"]
        assert [x["tokens"] for x in r["long"]] == [64, 96] and r["long_finite"]
    assert result["by_engine"]["vllm"]["step_sync_mb"] > 0  # the step pushed weights to the engine
    assert result["rollout_tokens_per_s"] == result["by_engine"]["hf"]["rollout_tokens_per_s"]
    assert result["long_96_s"] >= 0 and set(result["targets"]) >= {"under_8_minutes", "long_updates_finite",
                                                                     "mismatch_within_limit", "rollout_over_bare_0.8"}


def _requirements_closure(names: list[str]) -> set[str]:
    """Installed distributions ``names`` need (their requirements, markers evaluated, no extras), canonical names."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def _hidden_modules() -> list[str]:
    """Top-level modules installed here that a GPU machine with torch, transformers and the carried packages lacks."""
    from packaging.utils import canonicalize_name

    allowed = _requirements_closure(["torch", "transformers"]) | {canonicalize_name(n) for n in gpu_train.CARRIED}
    allowed.add("websailor-gym")  # the project itself (from the repository root)
    hidden = set()
    for module, dists in metadata.packages_distributions().items():
        if module.startswith("_") or module in {"benchmarks", "trainers", "envs", "wiki_sim", "websailor",
                                                  "sailorfog", "tests"}:
            continue
        if not any(canonicalize_name(d) in allowed for d in dists):
            hidden.add(module)
    return sorted(hidden)


def _run_hidden(tmp_path: Path, args: list[str]) -> subprocess.CompletedProcess:
    """``python -m benchmarks.gpu_train ARGS`` in a subprocess (and its children) that sees none of
    :func:`_hidden_modules`: a ``sitecustomize`` puts None in ``sys.modules`` for each, so that an import
    fails and ``importlib.util.find_spec`` (transformers' probes) finds nothing, as on a bare machine."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import json, os, sys\n"
        "for _name in json.loads(os.environ['GPU_TRAIN_HIDDEN']):\n"
        "    sys.modules[_name] = None\n", encoding="utf-8")
    env = dict(os.environ, GPU_TRAIN_HIDDEN=json.dumps(_hidden_modules()),
               PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "benchmarks.gpu_train", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=500)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared")
    assert gpu_train.main(["--prepare", str(out), "--pages", "12"]) == 0
    return out


def test_prepare_builds_the_simulator_and_copies_the_carried_packages(prepared, capsys):
    assert (prepared / "wiki").is_dir() and len((prepared / "tasks.jsonl").read_text().splitlines()) == 12
    deps = prepared / "deps"
    from packaging.utils import canonicalize_name

    copied = {canonicalize_name(d.metadata["Name"]) for d in metadata.distributions(path=[str(deps)])}
    assert copied == {canonicalize_name(n) for n in gpu_train.CARRIED}  # with their metadata
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import gymnasium, whoosh, cloudpickle, cached_property, "
            "farama_notifications as f; print(all(m.__file__.startswith(sys.argv[1]) for m in "
            "(gymnasium, whoosh, cloudpickle, cached_property, f)))")
    found = subprocess.run([sys.executable, "-c", code, str(deps)], capture_output=True, text=True, timeout=120)
    assert found.stdout.strip() == "True", found.stderr  # importable from the copies alone


def test_the_hf_check_needs_only_torch_transformers_and_the_carried_packages(prepared, tmp_path):
    hidden = _hidden_modules()
    for module in ("vllm", "trl", "mwparserfromhell", "wordfreq", "sqlite_utils", "peft", "datasets", "tantivy",
                   "requests_cache", "tenacity", "gguf"):
        assert module in hidden or importlib.util.find_spec(module) is None, module
    done = _run_hidden(tmp_path, ["--dry-run", "--rollout-engine", "hf", *SMALL, "--long-tokens", "64",
                                  "--wiki-dir", str(prepared / "wiki"), "--tasks", str(prepared / "tasks.jsonl")])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["engines"] == ["hf"] and result["template"] == "chatml"  # no TRL: the ChatML fallback
    assert result["rollout_tokens_per_s"] > 0 and result["long_finite"] and result["step_train_tokens"] > 0
    # building a simulator there is one line saying how to bring one instead
    built = _run_hidden(tmp_path, ["--dry-run", "--rollout-engine", "hf", *SMALL])
    lines = built.stderr.strip().splitlines()
    assert built.returncode == 2 and lines[-1].startswith("gpu_train: ") and "--prepare" in lines[-1]
    assert "mwparserfromhell" in lines[-1] and "Traceback" not in built.stderr


def test_websailor_bench_skips_it_without_a_gpu(tmp_path):
    from websailor.cli import main

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the benchmark would run")
    out = tmp_path / "bench"
    assert main(["bench", "--only", "gpu_train", "--out", str(out)]) == 0
    [record] = json.loads((out / "bench.json").read_text())["benchmarks"]
    assert record["name"] == "gpu_train" and record["status"] == "skipped" and "CUDA" in record["reason"]
