"""``websailor report DIR`` on a folder that is not a pipeline run: an eval, SFT or GRPO output folder.

It looks for what such folders hold and renders what it finds into ``DIR/report.html``
(:mod:`websailor.report`'s sections, on these files):

- an evaluation (``websailor eval --out DIR``): ``summary.json`` (``{name: summary}``) and
  ``<name>.trajectories.jsonl``; also ``DIR/eval/`` holding them;
- SFT (``websailor sft train --output-dir DIR``): ``metrics.jsonl`` with ``loss/sft`` and its ``summary.json``;
- GRPO (``websailor grpo --output-dir DIR``): ``metrics.jsonl`` with ``reward/mean`` and the rollout samples
  ``rollouts/step-<n>.jsonl`` (:mod:`trainers.rollout_samples`).

A folder with none of these is a one-line error naming what was looked for.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import atomic_write_text

MAX_ROLLOUT_STEPS = 8
"""Steps of rollout samples shown in the viewer (the last ones)."""
LOOKED_FOR = ("summary.json with evaluation results", "*.trajectories.jsonl", "metrics.jsonl (SFT or GRPO)",
              "rollouts/step-<n>.jsonl")


def _step_number(path: Path) -> int:
    found = re.fullmatch(r"step-(\d+)\.jsonl", path.name)
    return int(found.group(1)) if found else -1


def _is_eval_summary(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(
        isinstance(v, dict) and ("pass@1" in v or "success" in v) for v in value.values())


def find_contents(folder: Path) -> dict[str, Any]:
    """What ``folder`` holds: ``eval_dir`` and ``eval_summary``, ``trajectories`` [(label, path, href)],
    ``sft_metrics``, ``sft_summary``, ``grpo_metrics``, ``rollouts`` (paths)."""
    from websailor.report import _read_json, read_jsonl

    found: dict[str, Any] = {"trajectories": []}
    for eval_dir, prefix in ((folder, ""), (folder / "eval", "eval/")):
        summary = _read_json(eval_dir / "summary.json") if (eval_dir / "summary.json").is_file() else None
        if _is_eval_summary(summary):
            found.setdefault("eval_summary", summary)
            found.setdefault("eval_dir", eval_dir)
        for path in sorted(eval_dir.glob("*.trajectories.jsonl")) if eval_dir.is_dir() else ():
            found["trajectories"].append((path.name[: -len(".trajectories.jsonl")], path, prefix + path.name))
    metrics = folder / "metrics.jsonl"
    if metrics.is_file():
        first = read_jsonl(metrics, limit=5)
        if any("loss/sft" in r for r in first):
            found["sft_metrics"] = metrics
            summary = _read_json(folder / "summary.json") if (folder / "summary.json").is_file() else None
            if isinstance(summary, dict) and "final_loss" in summary:
                found["sft_summary"] = summary
        elif any("reward/mean" in r for r in first):
            found["grpo_metrics"] = metrics
    rollouts = sorted((folder / "rollouts").glob("step-*.jsonl"), key=_step_number) \
        if (folder / "rollouts").is_dir() else []
    if rollouts:
        found["rollouts"] = rollouts
        found["trajectories"] += [(f"GRPO step {_step_number(p)}", p, f"rollouts/{p.name}")
                                  for p in rollouts[-MAX_ROLLOUT_STEPS:]]
    return found


def _kind(found: dict[str, Any]) -> str:
    kinds = [name for key, name in (("eval_summary", "evaluation"), ("sft_metrics", "SFT"),
                                    ("grpo_metrics", "GRPO"), ("rollouts", "GRPO rollouts"))
             if key in found]
    if not kinds and found["trajectories"]:
        kinds = ["trajectories"]
    return ", ".join(dict.fromkeys(kinds))


def contents_section(folder: Path, found: dict[str, Any]) -> str:
    from websailor.report import _table

    rows = []
    if "eval_summary" in found:
        rows.append(("evaluation", f"{found['eval_dir'] / 'summary.json'} ({len(found['eval_summary'])} policies)"))
    for label, path, _ in found["trajectories"]:
        rows.append(("trajectories", f"{path} ({label})"))
    if "sft_metrics" in found:
        rows.append(("SFT metrics", str(found["sft_metrics"])))
    if "grpo_metrics" in found:
        rows.append(("GRPO metrics", str(found["grpo_metrics"])))
    if "rollouts" in found:
        steps = [_step_number(p) for p in found["rollouts"]]
        rows.append(("GRPO rollout samples", f"{folder / 'rollouts'} (steps {min(steps)}-{max(steps)}; the last "
                                             f"{min(len(steps), MAX_ROLLOUT_STEPS)} in the viewer)"))
    return "<h2>Contents</h2>" + _table(("what", "file"), rows, "contents")


def sft_section(summary: dict[str, Any]) -> str:
    from websailor.report import _table

    filters = summary.get("filters") if isinstance(summary.get("filters"), dict) else {}
    rows = [("steps", summary.get("steps")), ("final loss", summary.get("final_loss")),
            ("examples", summary.get("examples")),
            ("trajectories kept / read", f"{filters.get('kept', '?')} / {filters.get('read', '?')}"),
            ("parameters (trained)", f"{summary.get('parameters', '?')} ({summary.get('trainable', '?')})"),
            ("model", summary.get("model_dir"))]
    return "<h2>SFT</h2>" + _table(("what", "value"), [(k, "-" if v is None else v) for k, v in rows], "sft")


def build_folder_report(folder: str | Path) -> Path:
    """Write ``folder/report.html`` from what it holds; :class:`UserError` (one line) when it holds nothing this
    report knows."""
    from websailor.report import (_CSS, _JS, _esc, _safe, curves_section, read_jsonl, results_section,
                                  viewer_section)

    folder = Path(folder)
    found = find_contents(folder)
    kind = _kind(found)
    if not kind:
        raise UserError(f"{folder}: nothing to report: no pipeline run (run.json) and none of "
                        f"{', '.join(LOOKED_FOR)}")
    tasks_by_id: dict[str, Any] = {}
    for _, path, _ in found["trajectories"]:
        for record in read_jsonl(path, limit=2_000):
            task = record.get("task")
            if isinstance(task, dict) and task.get("id") is not None:
                tasks_by_id.setdefault(str(task["id"]), task)
    title = f"websailor-gym {kind}: {folder.resolve().name}"
    body = f"<h1>{_esc(title)}</h1>" + _safe(lambda: contents_section(folder, found), "Contents")
    if "eval_summary" in found:
        body += _safe(lambda: results_section(found["eval_summary"]), "Results")
    if "sft_summary" in found:
        body += _safe(lambda: sft_section(found["sft_summary"]), "SFT")
    if "sft_metrics" in found or "grpo_metrics" in found:
        missing = folder / "no-such-metrics.jsonl"
        body += _safe(lambda: curves_section(folder, found.get("sft_metrics", missing),
                                             found.get("grpo_metrics", missing)), "Learning curves")
    if found["trajectories"]:
        body += _safe(lambda: viewer_section(folder, tasks_by_id, found["trajectories"]), "Trajectories")
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style><script>{_JS}</script></head><body>{body}</body></html>")
    return atomic_write_text(folder / "report.html", page)
