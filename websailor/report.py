"""``report.html``: one self-contained page about a pipeline run (no network resources).

It reads only the files the stages wrote into the run directory (see
:mod:`websailor.pipeline`), so ``websailor report RUN_DIR`` can rebuild it at any time, and a
run that stopped early still gets a report of what it has:

- ``run.json``: the configuration and each stage's status and time;
- ``tasks/train.jsonl``, ``tasks/heldout.jsonl``: synthesized tasks (topology classes,
  uncertainty kinds, difficulty);
- ``eval/summary.json`` and ``eval/<policy>.trajectories.jsonl``: success rate, tool calls and
  termination reasons per policy, and the transcripts for the trajectory viewer;
- ``sft/metrics.jsonl``, ``grpo/metrics.jsonl``: learning curves.

Pictures are PNGs drawn with matplotlib and embedded as ``data:`` URIs.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

MAX_VIEWER_TASKS = 40
"""Trajectories shown in the viewer (per policy, the first ones of the held-out split)."""
MAX_TOOL_RESPONSE_CHARS = 4000
"""A tool response longer than this is cut in the viewer (the JSONL keeps it whole)."""

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:1em 2em;
color:#1d2733;background:#fbfcfd}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #dde3ea;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #cfd7e0;padding:.3em .7em;text-align:left}
th{background:#eef2f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #dde3ea;background:white}.muted{color:#6b7785}
.grid{display:flex;flex-wrap:wrap;gap:1em}.grid figure{margin:0;flex:1 1 480px}
details.step{border:1px solid #cfd7e0;border-radius:6px;margin:.4em 0;background:white}
details.step>summary{cursor:pointer;padding:.4em .7em;font-weight:600}
details.step>div{padding:.2em 1em 1em}pre{white-space:pre-wrap;word-break:break-word;background:#f3f6f9;
padding:.6em;border-radius:4px;max-height:28em;overflow:auto}.ok{color:#17803d}.bad{color:#b42318}
.traj{display:none}.traj.shown{display:block}
"""
_JS = """
function showTask(id){document.querySelectorAll('.traj').forEach(function(s){
s.classList.toggle('shown', s.dataset.task===id);});}
document.addEventListener('DOMContentLoaded',function(){var p=document.getElementById('task-picker');
if(p){p.addEventListener('change',function(){showTask(p.value);});showTask(p.value);}});
"""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (blank and malformed lines skipped: a report shows what it can)."""
    if not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _img(src: str, alt: str) -> str:
    return f'<figure><img src="{src}" alt="{_esc(alt)}"><figcaption class="muted">{_esc(alt)}</figcaption></figure>'


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{v:.3f}</td>' if isinstance(v, float) else
        f'<td class="num">{v}</td>' if isinstance(v, int) else f"<td>{_esc(v)}</td>" for v in row) + "</tr>"
        for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# ----------------------------------------------------------------------------- sections


def config_section(run: Mapping[str, Any]) -> str:
    config = run.get("config") or {}
    stages = run.get("stages") or {}
    rows = [(k, json.dumps(v) if not isinstance(v, str) else v) for k, v in sorted(config.items())]
    stage_rows = [(name, s.get("status", ""), float(s.get("seconds", 0.0))) for name, s in stages.items()]
    return ("<h2>Configuration</h2>" + _table(("setting", "value"), rows, "config")
            + "<h3>Stages</h3>" + _table(("stage", "status", "seconds"), stage_rows, "stages"))


def results_section(summary: Mapping[str, Any]) -> str:
    if not summary:
        return '<h2>Results</h2><p class="muted">No evaluation in this run yet.</p>'
    rows, reasons = [], set()
    for s in summary.values():
        reasons.update((s.get("terminations") or {}).keys())
    reasons_sorted = sorted(reasons)
    for name, s in summary.items():
        k = s.get("k", 1)
        rows.append([name, str(s.get("tasks_split", s.get("tasks", ""))), int(s.get("num_tasks", 0)),
                     float(s.get("pass@1", 0.0)), float(s.get(f"pass@{k}", s.get("pass@1", 0.0))),
                     float(s.get("mean_tool_calls", 0.0))]
                    + [int((s.get("terminations") or {}).get(r, 0)) for r in reasons_sorted])
    header = ["policy", "tasks", "n", "success (pass@1)", "pass@k", "mean tool calls"] + \
             [f"ended: {r}" for r in reasons_sorted]
    return "<h2>Results</h2>" + _table(header, rows, "results")


def curves_section(run_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    for stage, keys in (("sft", ("loss/sft", "train/lr")),
                        ("grpo", ("reward/mean", "rollout/length", "policy/entropy", "loss/policy"))):
        rows = read_jsonl(run_dir / stage / "metrics.jsonl")
        present = [k for k in keys if any(isinstance(r.get(k), (int, float)) for r in rows)]
        if not present:
            continue
        fig, axes = plt.subplots(1, len(present), figsize=(3.6 * len(present), 2.8), squeeze=False)
        for ax, key in zip(axes[0], present):
            points = [(r.get("step", i), r[key]) for i, r in enumerate(rows) if isinstance(r.get(key), (int, float))]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3)
            ax.set_title(key, fontsize=10)
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
        fig.suptitle(stage.upper(), fontsize=11)
        figures.append(_img(_png(fig), f"{stage} learning curves: {', '.join(present)}"))
    if not figures:
        return '<h2>Learning curves</h2><p class="muted">No training metrics in this run yet.</p>'
    return '<h2>Learning curves</h2><div class="grid">' + "".join(figures) + "</div>"


def synthesis_section(tasks: Sequence[Mapping[str, Any]]) -> str:
    if not tasks:
        return '<h2>Synthesized tasks</h2><p class="muted">No synthesized tasks in this run yet.</p>'
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topology = Counter(str(t.get("wl_hash", "?"))[:8] for t in tasks)
    kinds = Counter(k for t in tasks for k in t.get("uncertainty") or [])
    calls = Counter(int((t.get("difficulty") or {}).get("oracle_tool_calls", 0)) for t in tasks)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.2))
    for ax, counts, title in ((axes[0], dict(topology.most_common(15)), "topology classes (WL hash)"),
                              (axes[1], dict(kinds.most_common()), "uncertainty kinds"),
                              (axes[2], dict(sorted(calls.items())), "difficulty: oracle tool calls")):
        ax.bar([str(k) for k in counts], list(counts.values()), color="#3b6ea8")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    rows = [("tasks", len(tasks)), ("topology classes", len(topology)),
            ("uncertainty kinds used", len(kinds)),
            ("mean oracle tool calls", round(sum(k * v for k, v in calls.items()) / max(1, len(tasks)), 2))]
    return ("<h2>Synthesized tasks</h2>" + _table(("statistic", "value"), rows, "synthesis")
            + '<div class="grid">' + _img(_png(fig), "synthesis statistics") + "</div>")


def subgraph_picture(subgraph: Mapping[str, Any]) -> str:
    """The task's subgraph as a PNG data URI (target node in red), or "" if it has none."""
    nodes = [n.get("title") for n in subgraph.get("nodes") or [] if isinstance(n, Mapping)]
    if not nodes:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((e.get("source"), e.get("target")) for e in subgraph.get("edges") or []
                         if isinstance(e, Mapping) and e.get("source") in graph and e.get("target") in graph)
    target = subgraph.get("target")
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    pos = nx.spring_layout(graph, seed=0)
    nx.draw_networkx(graph, pos, ax=ax, node_size=420, font_size=7,
                     node_color=["#d9534f" if n == target else "#7fa7d6" for n in graph.nodes],
                     labels={n: (n if len(n) <= 22 else n[:20] + "…") for n in graph.nodes})
    ax.set_axis_off()
    return _png(fig)


def _step_html(index: int, turn: Mapping[str, Any], response: str | None, reward: float | None) -> str:
    from envs.protocol import parse_turn

    parsed = parse_turn(str(turn.get("content", ""))[:200_000])
    if parsed.kind == "answer":
        title = f"Step {index}: answer {parsed.answer!r}"[:160]
    elif parsed.tool_call is not None:
        title = f"Step {index}: {parsed.tool_call.name}({json.dumps(parsed.tool_call.arguments, ensure_ascii=False)})"
        title = title[:160]
    else:
        title = f"Step {index}: (no valid tool call or answer)"
    parts = [f"<h4>Thought</h4><pre>{_esc(parsed.think or '')}</pre>"]
    if parsed.kind != "answer" and parsed.tool_call is None:
        # Nothing parsed: the model's own words are what there is to see.
        raw = str(turn.get("content", ""))
        cut = raw if len(raw) <= MAX_TOOL_RESPONSE_CHARS else raw[:MAX_TOOL_RESPONSE_CHARS] + " …"
        parts.append(f"<h4>Model output (as written)</h4><pre>{_esc(cut)}</pre>")
    if parsed.tool_call is not None:
        call = json.dumps({"name": parsed.tool_call.name, "arguments": parsed.tool_call.arguments},
                          ensure_ascii=False, indent=1)
        parts.append(f"<h4>Tool call</h4><pre>{_esc(call)}</pre>")
    if parsed.kind == "answer":
        parts.append(f"<h4>Answer</h4><pre>{_esc(parsed.answer or '')}</pre>")
    if response is not None:
        cut = response if len(response) <= MAX_TOOL_RESPONSE_CHARS else response[:MAX_TOOL_RESPONSE_CHARS] + " …"
        parts.append(f"<h4>Tool response</h4><pre>{_esc(cut)}</pre>")
    parts.append(f"<p>Reward: <b>{'0' if reward is None else f'{reward:g}'}</b></p>")
    return f'<details class="step"><summary>{_esc(title)}</summary><div>{"".join(parts)}</div></details>'


def trajectory_html(record: Mapping[str, Any], task: Mapping[str, Any] | None) -> str:
    """One trajectory: question, subgraph picture, each assistant step with its response."""
    messages = [m for m in record.get("messages") or [] if isinstance(m, Mapping)]
    question = (record.get("task") or {}).get("question") or (task or {}).get("question", "")
    answer = (record.get("task") or {}).get("answer") or (task or {}).get("answer", "")
    correct = bool(record.get("is_correct"))
    head = (f"<p><b>Question:</b> {_esc(question)}</p><p><b>Gold answer:</b> {_esc(answer)} · "
            f"<b>Policy:</b> {_esc(record.get('policy', ''))} · "
            f'<b>Result:</b> <span class="{"ok" if correct else "bad"}">{"correct" if correct else "wrong"}</span> · '
            f"<b>Ended by:</b> {_esc(record.get('termination', ''))} · "
            f"<b>Tool calls:</b> {_esc(record.get('num_tool_calls', 0))}</p>")
    picture = subgraph_picture((task or {}).get("subgraph") or {}) if task else ""
    if picture:
        head += _img(picture, "the task's subgraph (answer in red)")
    steps = []
    assistant_turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    for n, i in enumerate(assistant_turns, 1):
        nxt = messages[i + 1] if i + 1 < len(messages) and messages[i + 1].get("role") == "user" else None
        reward = float(record.get("reward", 0.0)) if n == len(assistant_turns) else None
        steps.append(_step_html(n, messages[i], str(nxt.get("content", "")) if nxt else None, reward))
    return head + "".join(steps)


def viewer_section(run_dir: Path, tasks_by_id: Mapping[str, Mapping[str, Any]]) -> str:
    files = sorted((run_dir / "eval").glob("*.trajectories.jsonl"))
    options, sections = [], []
    for path in files:
        policy = path.name[: -len(".trajectories.jsonl")]
        for record in read_jsonl(path)[:MAX_VIEWER_TASKS]:
            task_id = str((record.get("task") or {}).get("id") or record.get("id") or len(options))
            key = f"{policy}/{task_id}"
            mark = "✓" if record.get("is_correct") else "✗"
            label = f"{policy} · {mark} · {(record.get('task') or {}).get('question', '')[:80]}"
            options.append(f'<option value="{_esc(key)}">{_esc(label)}</option>')
            sections.append(f'<section class="traj" data-task="{_esc(key)}">'
                            f"{trajectory_html(record, tasks_by_id.get(task_id))}</section>")
    if not sections:
        return '<h2>Trajectories</h2><p class="muted">No trajectories in this run yet.</p>'
    return ('<h2>Trajectories</h2><p><label for="task-picker">Task: </label>'
            f'<select id="task-picker">{"".join(options)}</select></p>' + "".join(sections))


def build_report(run_dir: str | os.PathLike) -> Path:
    """Write ``RUN_DIR/report.html`` (atomically) from the run's files; returns its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a run directory (run `websailor pipeline --out {run_dir}` first)")
    run = _read_json(run_dir / "run.json") or {}
    tasks = read_jsonl(run_dir / "tasks" / "train.jsonl") + read_jsonl(run_dir / "tasks" / "heldout.jsonl")
    tasks_by_id = {str(t.get("id")): t for t in tasks}
    summary = _read_json(run_dir / "eval" / "summary.json") or {}
    title = f"websailor-gym run: {run_dir.name}"
    body = (f"<h1>{_esc(title)}</h1><p class='muted'>{_esc(run.get('finished_at') or run.get('started_at') or '')}</p>"
            + results_section(summary) + curves_section(run_dir) + synthesis_section(tasks)
            + viewer_section(run_dir, tasks_by_id) + config_section(run))
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{_CSS}</style><script>{_JS}</script></head><body>{body}</body></html>")
    out = run_dir / "report.html"
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out
