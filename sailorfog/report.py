"""``websailor synth-report``: what a synthesized task file covers, beside the released samples.

Counts (summary.json) and PNG plots of topology classes, target orbits and roles, uncertainty kinds,
hops and oracle tool calls, and a side-by-side with the released question files in
``../shared/reference/`` (question length, number of constraints, share of questions with
vague time, partial names and fuzzy quantities). The released files are read in place;
the same text detectors are applied to both sides, so the comparison is like for like.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from wiki_sim.common.errors import UserError

REFERENCE_FILES = ("sailorfog_qa_sample.jsonl", "webshaper_500.jsonl", "webdancer_sample_qa.jsonl")
DEFAULT_REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference"

VAGUE_TIME = re.compile(r"\b(?:early|mid|late)[- ]\d{2,4}s\b|\b\d{2,4}s\b|\bdecade\b|\bcentury\b|\b(?:last|past|recent) "
                        r"(?:few )?years\b|\b(?:first|second) half of\b|\bin recent\b", re.IGNORECASE)
PARTIAL_NAMES = re.compile(r"\b(?:begins|starts|starting|beginning) with\b|\binitials?\b|\bfirst letter\b|"
                           r"\bwhose (?:sur)?name\b", re.IGNORECASE)
FUZZY_QUANTITIES = re.compile(r"\bbetween [\d,.]+ and [\d,.]+|\b(?:more|less|fewer|greater) than [\d,.]+|"
                              r"\b(?:approximately|around|roughly|about|over|under|nearly|almost) [\d,.]+|"
                              r"\ba (?:couple|few|handful|dozen)\b|\bseveral\b|\bdozens\b|\bhundreds\b",
                              re.IGNORECASE)
_CLAUSE = re.compile(r"[.;?!]\s|,\s|\b(?:which|who|whose|that|where|when|while|and|but)\b", re.IGNORECASE)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def count_words(text: str) -> int:
    """Words of a text, counting each CJK character as one word (Chinese and Japanese write no spaces,
    so a whitespace split would count a whole Chinese question as one word)."""
    cjk = len(_CJK.findall(text))
    return cjk + len(_CJK.sub(" ", text).split())


def count_constraints(question: str) -> int:
    """Clauses of a question (sentences, commas, relative pronouns, conjunctions), a proxy for constraints."""
    return 1 + len(_CLAUSE.findall(question.strip().rstrip("?.!")))


def question_stats(questions: Iterable[str]) -> dict[str, Any]:
    """Length, constraint count and the share of each obfuscation style, over questions."""
    qs = [q for q in questions if isinstance(q, str) and q.strip()]
    if not qs:
        return {"questions": 0}
    words = sorted(count_words(q) for q in qs)
    cons = sorted(count_constraints(q) for q in qs)
    share = lambda rx: round(sum(bool(rx.search(q)) for q in qs) / len(qs), 3)  # noqa: E731
    return {"questions": len(qs), "words_median": words[len(words) // 2], "words_mean": round(sum(words) / len(qs), 1),
            "constraints_median": cons[len(cons) // 2], "constraints_mean": round(sum(cons) / len(qs), 2),
            "share_vague_time": share(VAGUE_TIME), "share_partial_names": share(PARTIAL_NAMES),
            "share_fuzzy_quantities": share(FUZZY_QUANTITIES), "_words": words, "_constraints": cons}


def read_questions(path: Path) -> list[str]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                if isinstance(record, dict) and isinstance(record.get("question"), str):
                    out.append(record["question"])
    return out


def task_summary(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over synthesized task records."""
    calls = [t.get("difficulty", {}).get("oracle_tool_calls", 0) for t in tasks]
    solved = [t.get("difficulty", {}).get("heuristic_solved") for t in tasks]
    return {
        "tasks": len(tasks),
        "topology_classes": len({t.get("wl_hash") for t in tasks}),
        "topology": Counter(t.get("wl_hash", "?")[:8] for t in tasks).most_common(),
        "subgraph_nodes": dict(sorted(Counter(len(t.get("subgraph", {}).get("nodes", [])) for t in tasks).items())),
        "target_orbit": dict(sorted(Counter(t.get("target_orbit") for t in tasks).items(), key=str)),
        "target_role": dict(Counter(t.get("target_role", "?") for t in tasks).most_common()),
        "uncertainty": dict(Counter(k for t in tasks for k in t.get("uncertainty", [])).most_common()),
        "hops": dict(sorted(Counter(t.get("hops") for t in tasks).items(), key=str)),
        "oracle_tool_calls": dict(sorted(Counter(calls).items())),
        "oracle_tool_calls_over_5": round(sum(c > 5 for c in calls) / max(1, len(calls)), 3),
        "oracle_tool_calls_over_10": round(sum(c > 10 for c in calls) / max(1, len(calls)), 3),
        "heuristic_solved_share": round(sum(bool(s) for s in solved) / max(1, len(solved)), 3),
        "clues_mean": round(sum(len(t.get("clues", [])) for t in tasks) / max(1, len(tasks)), 2),
    }


def _bar(ax: Any, counts: dict, title: str) -> None:
    keys = list(counts)
    ax.bar([str(k) for k in keys], [counts[k] for k in keys], color="#4477aa")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)


def plot(summary: dict[str, Any], ours: dict[str, Any], refs: dict[str, dict[str, Any]], out_dir: Path) -> list[str]:
    """Write the PNG plots; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    panels = [("topology.png", dict(summary["topology"][:30]), "tasks per topology class (WL hash)"),
              ("orbits.png", summary["target_orbit"], "tasks per target orbit index"),
              ("roles.png", summary["target_role"], "tasks per answer role (degree d, eccentricity e)"),
              ("uncertainty.png", summary["uncertainty"], "tasks per uncertainty kind"),
              ("hops.png", summary["hops"], "tasks per answer eccentricity (hops)"),
              ("tool_calls.png", summary["oracle_tool_calls"], "tasks per oracle tool-call count")]
    for name, counts, title in panels:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        _bar(ax, counts, title)
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=80)
        plt.close(fig)
        files.append(name)
    sides = {"ours": ours, **refs}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name, stats in sides.items():
        if stats.get("questions"):
            axes[0].hist(stats["_words"], bins=20, alpha=0.5, density=True, label=name)
            axes[1].hist(stats["_constraints"], bins=15, alpha=0.5, density=True, label=name)
    axes[0].set_title("question length (words)")
    axes[1].set_title("constraints (clauses)")
    kinds = ["share_vague_time", "share_partial_names", "share_fuzzy_quantities"]
    width = 0.8 / max(1, len(sides))
    for i, (name, stats) in enumerate(sides.items()):
        axes[2].bar([k + i * width for k in range(3)], [stats.get(k, 0) for k in kinds], width, label=name)
    axes[2].set_xticks([k + 0.4 - width / 2 for k in range(3)], ["vague time", "partial names", "fuzzy qty"])
    axes[2].set_title("share of questions")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "reference_comparison.png", dpi=80)
    plt.close(fig)
    return files + ["reference_comparison.png"]


@dataclass
class ReportConfig:
    """Counts and PNG plots of a synthesized task file, and a side-by-side with the released samples."""

    tasks: str = field(metadata={"positional": True})
    """Task JSONL (from `websailor synth`)."""
    out_dir: str | None = None
    """Directory for summary.json and the plots (default: TASKS without .jsonl, plus _report)."""
    reference_dir: str | None = None
    """Released samples to compare with (default: ../shared/reference beside the project; skipped if absent)."""

    def __post_init__(self) -> None:
        if not Path(self.tasks).is_file():
            raise ValueError(f"task file not found: {self.tasks}")


def run_report(config: ReportConfig) -> dict[str, Any]:
    from wiki_sim.common.jsonl import iter_jsonl

    tasks = [r for _, r in iter_jsonl(config.tasks)]
    if not tasks:
        raise UserError(f"{config.tasks}: no tasks in the file")
    out_dir = Path(config.out_dir or str(Path(config.tasks).with_suffix("")) + "_report")
    out_dir.mkdir(parents=True, exist_ok=True)
    ref_dir = Path(config.reference_dir) if config.reference_dir else DEFAULT_REFERENCE
    refs = {name.split(".")[0]: question_stats(read_questions(ref_dir / name))
            for name in REFERENCE_FILES if (ref_dir / name).is_file()}
    ours = question_stats(t.get("question", "") for t in tasks)
    summary = task_summary(tasks)
    files = plot(summary, ours, refs, out_dir)
    public = lambda s: {k: v for k, v in s.items() if not k.startswith("_")}  # noqa: E731
    report = {"summary": summary, "questions": {"ours": public(ours), **{k: public(v) for k, v in refs.items()}},
              "plots": files, "reference_dir": str(ref_dir.resolve()) if refs else None}
    (out_dir / "summary.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"websailor synth-report: wrote {out_dir / 'summary.json'} and {len(files)} plot(s) in {out_dir}",
          file=sys.stderr)
    print(json.dumps({"out_dir": str(out_dir), "tasks": len(tasks), "plots": len(files),
                      "references": sorted(refs)}, sort_keys=True))
    return report
