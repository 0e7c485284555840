"""Budget sweep: accuracy against the tool-call and context-length budgets (the form of
WebSailor-V2's Figure 5), written as JSON and plotted to PNG.

Each point is a full evaluation of the same tasks with one budget changed; the other stays as
configured. The caller (:func:`trainers.eval.run_eval`) passes the evaluation in, so this module
imports nothing of :mod:`trainers.eval`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from wiki_sim.common.jsonl import atomic_open, write_json_atomic

BUDGETS = ("max_tool_calls", "max_context_tokens")
"""The config fields a sweep varies, one at a time."""


def run_sweep(evaluate_at: Callable[[str, int], Mapping[str, Any]], config: Any, prefix: Path) -> dict[str, Any]:
    """Evaluate at every budget of ``config.sweep_tool_calls`` and ``config.sweep_context_tokens``;
    ``evaluate_at(budget_name, value)`` returns the evaluation summary with that budget set.
    Writes ``<prefix>.json`` and ``<prefix>.png``; returns the points and file names."""
    points: dict[str, list[dict[str, Any]]] = {name: [] for name in BUDGETS}
    for budget_name, values in zip(BUDGETS, (config.sweep_tool_calls, config.sweep_context_tokens)):
        for value in sorted(set(values or [])):
            summary = evaluate_at(budget_name, value)
            points[budget_name].append({
                "budget": value, "pass@1": summary["pass@1"], f"pass@{config.k}": summary[f"pass@{config.k}"],
                "mean_tool_calls": summary["mean_tool_calls"], "terminations": summary["terminations"]})
            print(f"sweep {budget_name}={value}: pass@1 {summary['pass@1']:.3f}")
    result = {"name": config.results_name, "points": points}
    json_path, png_path = prefix.with_name(prefix.name + ".json"), prefix.with_name(prefix.name + ".png")
    write_json_atomic(json_path, result, indent=2, ensure_ascii=True)
    plot_sweep(result, png_path)
    return {"points": points, "json": str(json_path), "png": str(png_path)}


def plot_sweep(result: Mapping[str, Any], path: Path) -> None:
    """Accuracy (pass@1) against each swept budget, one panel per budget, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, pts) for name, pts in result["points"].items() if pts]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    labels = {"max_tool_calls": "tool-call budget", "max_context_tokens": "context budget (tokens)"}
    for ax, (name, pts) in zip(axes[0], panels):
        xs = [p["budget"] for p in pts]
        ax.plot(xs, [p["pass@1"] for p in pts], marker="o", label="pass@1")
        if len(xs) > 1 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(labels.get(name, name))
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{result['name']}: accuracy vs {labels.get(name, name)}")
    fig.tight_layout()
    try:
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=100)
    finally:
        plt.close(fig)
