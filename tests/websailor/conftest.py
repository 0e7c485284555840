"""One small real pipeline run, shared by the pipeline and report tests (built once per session).

Small settings so it takes well under a minute on 2 cores: the tiny config-built model, 12 title
lookups and 4 synthesized tasks (5 held out), 2 SFT steps, one GRPO step of 2 rollouts per task,
short turns. Tests that change a run copy it
first (:func:`copy_run`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SMALL_RUN_ARGS = ["--model", "tiny", "--lookup-tasks", "12", "--heldout", "2", "--synth-tasks", "4",
                  "--synth-heldout", "1", "--sft-steps", "2", "--sft-batch", "2", "--grpo-steps", "1",
                  "--grpo-tasks-per-step", "2", "--group-size", "2", "--probe", "1", "--max-new-tokens", "64",
                  "--max-tool-calls", "2", "--no-progress"]


def small_run_argv(out: Path, wiki: Path, *extra: str) -> list[str]:
    """``websailor pipeline`` arguments of the shared small run, for a run directory ``out``."""
    return ["pipeline", "--out", str(out), "--wiki-dir", str(wiki), *SMALL_RUN_ARGS, *extra]


@pytest.fixture(scope="session")
def small_run(default_wiki: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished ``websailor pipeline`` run directory (do not modify: copy it with ``copy_run``)."""
    from websailor.cli import main

    out = tmp_path_factory.mktemp("pipeline") / "run"
    code = main(small_run_argv(out, default_wiki))
    assert code == 0, f"the small pipeline run failed with exit status {code}"
    return out


def copy_run(run_dir: Path, dest: Path) -> Path:
    """A copy of a run directory that a test may change."""
    shutil.copytree(run_dir, dest, symlinks=True)
    return dest
