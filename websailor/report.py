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
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from wiki_sim.common.errors import UserError
from wiki_sim.common.jsonl import atomic_write_text

MAX_VIEWER_TASKS = 40
"""Trajectories shown in the viewer (per policy, the first ones of the held-out split)."""
MAX_TOOL_RESPONSE_CHARS = 4000
"""A tool response longer than this is cut in the viewer (the JSONL keeps it whole)."""
MAX_STEPS_SHOWN = 30
"""Assistant turns shown per trajectory (the JSONL keeps them all)."""
MAX_VIEWER_CHARS = 3_000_000
"""Characters of trajectory HTML embedded in all; the rest is linked (the files next to the report)."""
MAX_LINE_CHARS = 4_000_000
"""A JSONL line longer than this is skipped by the report."""

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


def read_jsonl(path: Path, limit: int | None = None, max_line: int = MAX_LINE_CHARS) -> list[dict[str, Any]]:
    """The first ``limit`` JSON objects of a JSONL file (blank, malformed and over-long lines
    skipped: a report shows what it can, and reads no more of a big file than it shows)."""
    if not path.is_file():
        return []
    out: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        while limit is None or len(out) < limit:
            line = fh.readline(max_line + 1)
            if not line:
                break
            if len(line) > max_line and not line.endswith("\n"):
                while True:  # skip the rest of an over-long line
                    rest = fh.readline(1 << 20)
                    if not rest or rest.endswith("\n"):
                        break
                continue
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


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _num(value: Any, default: float | None = 0.0) -> float | None:
    """A finite number from a field of any type (``default`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value) if math.isfinite(value) else default


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _plain(text: Any) -> str:
    """Text for matplotlib that it never reads as math (``$x^$`` would fail to draw)."""
    return str(text).replace("$", r"\$")


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _img(src: str, alt: str) -> str:
    return f'<figure><img src="{src}" alt="{_esc(alt)}"><figcaption class="muted">{_esc(alt)}</figcaption></figure>'


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return _esc(v)
    if isinstance(v, float):
        return f'<td class="num">{v:.3f}</td>'
    if isinstance(v, int):
        return f'<td class="num">{v}</td>'
    return f"<td>{_esc(v)}</td>"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_fmt(v) for v in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _safe(section: Callable[[], str], name: str) -> str:
    """A section, or a note saying why it could not be drawn (a report shows what it can)."""
    try:
        return section()
    except Exception as exc:  # noqa: BLE001 - any bad input: show the rest of the report
        return f'<h2>{_esc(name)}</h2><p class="bad">This section could not be built: {_esc(type(exc).__name__)}: ' \
               f"{_esc(str(exc)[:300])}</p>"


def _interval(s: Mapping[str, Any], key: str = "success_ci95") -> str:
    ci = s.get(key)
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_num(v, None) is not None for v in ci):
        return f"[{float(ci[0]):.2f}, {float(ci[1]):.2f}]"
    return "-"


# ----------------------------------------------------------------------------- sections


def overview_section(run: Mapping[str, Any]) -> str:
    """Model (name, size), environment id, corpus, tasks."""
    config, stages = _dict(run.get("config")), _dict(run.get("stages"))
    sft = _dict(_dict(stages.get("sft")).get("result"))
    tasks = _dict(_dict(stages.get("tasks")).get("result"))
    sim = _dict(_dict(stages.get("simulator")).get("result"))
    params = _num(sft.get("parameters"), None)
    trainable = _num(sft.get("trainable"), None)
    size = f"{params / 1e6:.1f}M parameters" if params else "size unknown"
    if params and trainable:
        size += f" ({trainable / 1e6:.1f}M trained)"
    rows = [("model", f"{config.get('model', '?')} ({size})"),
            ("environment", "websailor/WikiSim-v0, compact observations (websailor.recipe)"),
            ("corpus", f"{config.get('wiki_dir', '?')} ({sim.get('pages', '?')} pages)"),
            ("tasks", f"{tasks.get('tasks', '?')}: train {tasks.get('train', '?')}, held-out {tasks.get('heldout', '?')} "
                      f"({json.dumps(tasks.get('heldout_per_level') or {})})")]
    return "<h2>Run</h2>" + _table(("what", "value"), rows, "overview")


def config_section(run: Mapping[str, Any]) -> str:
    config, stages = _dict(run.get("config")), _dict(run.get("stages"))
    rows = [(str(k), json.dumps(v, default=str) if not isinstance(v, str) else v) for k, v in sorted(config.items())]
    stage_rows = []
    for name, s in stages.items():
        s = _dict(s)
        seconds = _num(s.get("seconds"), None)
        when = (f"{seconds:.1f}" if seconds >= 0.1 else f"{max(seconds, 0.001):.3f}") if seconds is not None else \
            ("(building this page)" if name == "report" else "-")
        stage_rows.append((str(name), str(s.get("status", "")), when))
    return ("<h2>Configuration</h2>" + _table(("setting", "value"), rows, "config")
            + "<h3>Stages</h3>" + _table(("stage", "status", "seconds"), stage_rows, "stages"))


def comparisons_section(run_dir: Path, summary: Mapping[str, Any]) -> str:
    """The main job's differences (SFT over the pretrained model, GRPO over SFT) with their intervals."""
    from websailor.recipe import comparisons

    rows = [[f"{c['a']} - {c['b']}", f"{c['difference']:+.3f}", f"[{c['low']:+.3f}, {c['high']:+.3f}]",
             "paired, same tasks" if c["paired"] else "unpaired", "-" if c["tasks"] is None else int(c["tasks"]),
             c["verdict"]] for c in comparisons(run_dir / "eval", _dict(summary))]
    if not rows:
        return ""
    return "<h3>Differences</h3>" + _table(["difference", "success", "95% interval", "kind", "tasks", "verdict"],
                                           rows, "differences")


def results_section(summary: Mapping[str, Any]) -> str:
    entries = {str(k): _dict(v) for k, v in _dict(summary).items()}
    if not entries:
        return '<h2>Results</h2><p class="muted">No evaluation in this run yet.</p>'
    reasons = sorted({str(r) for s in entries.values() for r in _dict(s.get("terminations"))})
    ks = sorted({int(k) for s in entries.values() for k in [s.get("k")] if isinstance(k, int) and k > 1})
    rows = []
    for name, s in entries.items():
        ends = _dict(s.get("terminations"))
        success = _num(s.get("success"), _num(s.get("pass@1")))
        rows.append([name, str(s.get("model") or "-"), str(s.get("policy") or "-"),
                     int(_num(s.get("episodes"), _num(s.get("num_tasks"))) or 0), success, _interval(s),
                     _num(s.get("well_formed_turns"), None) if "well_formed_turns" in s else "-",
                     _num(s.get("mean_tool_calls"))]
                    + [(_num(s.get(f"pass@{k}"), None) if f"pass@{k}" in s else "-") for k in ks]
                    + [", ".join(f"{r}={int(_num(ends.get(r)) or 0)}" for r in reasons if _num(ends.get(r)))
                       or "-"])
    header = (["policy", "model", "backend", "episodes", "success", "95% interval", "well-formed turns",
               "mean tool calls"] + [f"pass@{k}" for k in ks] + ["terminations"])
    levels = sorted({str(lv) for s in entries.values() for lv in _dict(s.get("per_level"))})
    level_rows = [[lv] + [f"{_num(_dict(_dict(s.get('per_level')).get(lv)).get('success')):.2f} "
                          f"{_interval(_dict(_dict(s.get('per_level')).get(lv)), 'ci95')} "
                          f"(n={int(_num(_dict(_dict(s.get('per_level')).get(lv)).get('episodes')) or 0)})"
                          for s in entries.values()] for lv in levels]
    from websailor.recipe import decoding_text

    out = "<h2>Results</h2>" + _table(header, rows, "results") + f'<p class="muted">{_esc(decoding_text(entries))}</p>'
    if level_rows:
        out += "<h3>Success per level</h3>" + _table(["level", *entries], level_rows, "levels")
    return out


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    points = [(_num(r.get("step"), float(i + 1)), _num(r.get(key), None)) for i, r in enumerate(rows)]
    points = [(x, y) for x, y in points if y is not None]
    return [p[0] for p in points], [p[1] for p in points]


GRPO_PANELS = (("reward/mean", "mean reward"), ("signal", "groups with mixed rewards (share)"),
               ("grad/norm", "gradient norm"), ("policy/entropy", "policy entropy (nats/token)"))


def curves_section(run_dir: Path, sft_metrics: Path | None = None, grpo_metrics: Path | None = None) -> str:
    """SFT loss and GRPO panels from ``run_dir/sft/metrics.jsonl`` and ``run_dir/grpo/metrics.jsonl`` (or the
    files given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    sft = read_jsonl(sft_metrics or run_dir / "sft" / "metrics.jsonl", limit=100_000)
    xs, ys = _series(sft, "loss/sft")
    if ys:
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        ax.plot(xs, ys, marker="o", markersize=3)
        ax.set(title="SFT loss (assistant tokens)", xlabel="step", ylabel="cross-entropy")
        ax.grid(alpha=0.3)
        figures.append(_img(_png(fig), "SFT learning curves: loss/sft"))
    grpo = read_jsonl(grpo_metrics or run_dir / "grpo" / "metrics.jsonl", limit=100_000)
    for r in grpo:
        groups = _num(r.get("groups/groups"), None)
        if groups:
            r["signal"] = 1.0 - (_num(r.get("groups/all_equal")) or 0.0) / groups
    if any(_series(grpo, k)[1] for k, _ in GRPO_PANELS):
        fig, axes = plt.subplots(2, 2, figsize=(9, 6), sharex=True)
        for ax, (key, label) in zip(axes.flat, GRPO_PANELS):
            xs, ys = _series(grpo, key)
            ax.plot(xs, ys, marker="o", markersize=4)
            ax.set_title(_plain(label), fontsize=11)
            ax.grid(alpha=0.3)
            ax.xaxis.get_major_locator().set_params(integer=True)
            if key in ("reward/mean", "signal"):
                ax.set_ylim(-0.05, 1.05)
        for ax in axes[1]:
            ax.set_xlabel("GRPO step")
        fig.suptitle("GRPO: reward/mean, signal share, grad/norm, policy/entropy", fontsize=12)
        fig.tight_layout()
        figures.append(_img(_png(fig), "GRPO learning curves: reward/mean, signal share, grad/norm, policy/entropy"))
    if not figures:
        return '<h2>Learning curves</h2><p class="muted">No training metrics in this run yet.</p>'
    return '<h2>Learning curves</h2><div class="grid">' + "".join(figures) + "</div>"


def topology_class(task: Mapping[str, Any]) -> str | None:
    """A synthesized task's structural class: node and edge counts of its subgraph and its WL hash
    (None for a task without a subgraph, such as a derived title lookup)."""
    sub = _dict(task.get("subgraph"))
    nodes, edges = sub.get("nodes"), sub.get("edges")
    if not isinstance(nodes, list) or not nodes:
        return None
    cycles = max(0, (len(edges) if isinstance(edges, list) else 0) - len(nodes) + 1)
    return f"{len(nodes)}n/{len(edges) if isinstance(edges, list) else 0}e, {cycles} cycle(s) " \
           f"#{str(task.get('wl_hash', '?'))[:6]}"


def synthesis_section(tasks: Sequence[Mapping[str, Any]]) -> str:
    synth = [t for t in tasks if topology_class(t) is not None]
    if not synth:
        return '<h2>Synthesized tasks</h2><p class="muted">No synthesized tasks in this run.</p>'
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topology = Counter(topology_class(t) for t in synth)
    kinds = Counter(str(k) for t in synth for k in (t.get("uncertainty") if isinstance(t.get("uncertainty"), list)
                                                    else []))
    calls = Counter(int(_num(_dict(t.get("difficulty")).get("oracle_tool_calls")) or 0) for t in synth)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, counts, title in ((axes[0], dict(topology.most_common(15)), "topology classes (subgraph shape, WL hash)"),
                              (axes[1], dict(kinds.most_common(15)), "uncertainty kinds"),
                              (axes[2], dict(sorted(calls.items())), "difficulty: oracle tool calls")):
        ax.bar([_plain(k) for k in counts], list(counts.values()), color="#3b6ea8")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    rows = [("synthesized tasks", len(synth)), ("topology classes", len(topology)),
            ("uncertainty kinds used", len(kinds)),
            ("mean oracle tool calls", round(sum(k * v for k, v in calls.items()) / max(1, len(synth)), 2))]
    return ("<h2>Synthesized tasks</h2>" + _table(("statistic", "value"), rows, "synthesis")
            + '<div class="grid">' + _img(_png(fig), "synthesis statistics") + "</div>")


def subgraph_picture(subgraph: Mapping[str, Any]) -> str:
    """The task's subgraph as a PNG data URI (target node in red), or "" if it has none."""
    nodes = [str(n.get("title")) for n in subgraph.get("nodes") or [] if isinstance(n, Mapping)][:40]
    if not nodes:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((str(e.get("source")), str(e.get("target"))) for e in subgraph.get("edges") or []
                         if isinstance(e, Mapping) and str(e.get("source")) in graph and str(e.get("target")) in graph)
    target = str(subgraph.get("target"))
    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    pos = nx.spring_layout(graph, seed=0)
    nx.draw_networkx(graph, pos, ax=ax, node_size=420, font_size=7,
                     node_color=["#d9534f" if n == target else "#7fa7d6" for n in graph.nodes],
                     labels={n: _plain(n if len(n) <= 22 else n[:20] + "…") for n in graph.nodes})
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
    parts = [f"<h4>Thought</h4><pre>{_esc((parsed.think or '')[:MAX_TOOL_RESPONSE_CHARS])}</pre>"]
    if parsed.kind != "answer" and parsed.tool_call is None:
        # Nothing parsed: the model's own words are what there is to see.
        raw = str(turn.get("content", ""))
        cut = raw if len(raw) <= MAX_TOOL_RESPONSE_CHARS else raw[:MAX_TOOL_RESPONSE_CHARS] + " …"
        parts.append(f"<h4>Model output (as written)</h4><pre>{_esc(cut)}</pre>")
    if parsed.tool_call is not None:
        call = json.dumps({"name": parsed.tool_call.name, "arguments": parsed.tool_call.arguments},
                          ensure_ascii=False, indent=1)[:MAX_TOOL_RESPONSE_CHARS]
        parts.append(f"<h4>Tool call</h4><pre>{_esc(call)}</pre>")
    if parsed.kind == "answer":
        parts.append(f"<h4>Answer</h4><pre>{_esc((parsed.answer or '')[:MAX_TOOL_RESPONSE_CHARS])}</pre>")
    if response is not None:
        cut = response if len(response) <= MAX_TOOL_RESPONSE_CHARS else response[:MAX_TOOL_RESPONSE_CHARS] + " …"
        parts.append(f"<h4>Tool response</h4><pre>{_esc(cut)}</pre>")
    parts.append(f"<p>Reward: <b>{'-' if reward is None else f'{reward:g}'}</b></p>")
    return f'<details class="step"><summary>{_esc(title)}</summary><div>{"".join(parts)}</div></details>'


def trajectory_html(record: Mapping[str, Any], task: Mapping[str, Any] | None) -> str:
    """One trajectory: question, subgraph picture, each assistant step with its response
    (at most :data:`MAX_STEPS_SHOWN`)."""
    messages = [m for m in record.get("messages") or [] if isinstance(m, Mapping)] \
        if isinstance(record.get("messages"), list) else []
    rtask = _dict(record.get("task"))
    question = rtask.get("question") or (task or {}).get("question", "")
    answer = rtask.get("answer") or (task or {}).get("answer", "")
    correct = record.get("is_correct") is True
    head = (f"<p><b>Question:</b> {_esc(str(question)[:2000])}</p><p><b>Gold answer:</b> {_esc(str(answer)[:500])} · "
            f"<b>Policy:</b> {_esc(str(record.get('policy', ''))[:200])} · "
            f'<b>Result:</b> <span class="{"ok" if correct else "bad"}">{"correct" if correct else "wrong"}</span> · '
            f"<b>Ended by:</b> {_esc(str(record.get('termination', ''))[:200])} · "
            f"<b>Tool calls:</b> {_esc(str(record.get('num_tool_calls', 0))[:20])}</p>")
    if task and isinstance(task.get("subgraph"), Mapping):
        try:
            picture = subgraph_picture(task["subgraph"])
        except Exception:  # noqa: BLE001 - a picture that cannot be drawn is left out
            picture = ""
        if picture:
            head += _img(picture, "the task's subgraph (answer in red)")
    steps = []
    assistant_turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    for n, i in enumerate(assistant_turns[:MAX_STEPS_SHOWN], 1):
        nxt = messages[i + 1] if i + 1 < len(messages) and messages[i + 1].get("role") == "user" else None
        reward = _num(record.get("reward"), None) if n == len(assistant_turns) else None
        steps.append(_step_html(n, messages[i], str(nxt.get("content", "")) if nxt else None, reward))
    if len(assistant_turns) > MAX_STEPS_SHOWN:
        steps.append(f'<p class="muted">{len(assistant_turns) - MAX_STEPS_SHOWN} more steps in the trajectory file.</p>')
    return head + "".join(steps)


def _spread(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records interleaved across task levels, so that the viewer's first ones show every level."""
    by_level: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_level.setdefault(str(_dict(r.get("task")).get("level", "")), []).append(r)
    queues = list(by_level.values())
    return [q[i] for i in range(max((len(q) for q in queues), default=0)) for q in queues if i < len(q)]


def viewer_section(run_dir: Path, tasks_by_id: Mapping[str, Mapping[str, Any]],
                   files: Sequence[tuple[str, Path, str]] | None = None) -> str:
    """The trajectory viewer: the first :data:`MAX_VIEWER_TASKS` trajectories of each policy, at most
    :data:`MAX_VIEWER_CHARS` of HTML in all; links to the trajectory files for the rest. ``files``: (label,
    path, link relative to the report) of each trajectory file; default: ``run_dir/eval/*.trajectories.jsonl``."""
    if files is None:
        files = [(path.name[: -len(".trajectories.jsonl")], path, f"eval/{path.name}")
                 for path in sorted((run_dir / "eval").glob("*.trajectories.jsonl"))]
    options, sections, links, used, left_out = [], [], [], 0, 0
    for policy, path, href in files:
        links.append(f'<a href="{_esc(href)}">{_esc(href)}</a>')
        for record in _spread(read_jsonl(path, limit=10 * MAX_VIEWER_TASKS))[:MAX_VIEWER_TASKS]:
            if used >= MAX_VIEWER_CHARS:
                left_out += 1
                continue
            rtask = _dict(record.get("task"))
            task_id = str(rtask.get("id") or record.get("id") or len(options))
            key = f"{policy}/{task_id}"
            mark = "✓" if record.get("is_correct") is True else "✗"
            label = f"{policy} · {mark} · {str(rtask.get('question', ''))[:80]}"
            try:
                body = trajectory_html(record, tasks_by_id.get(task_id))
            except Exception as exc:  # noqa: BLE001 - one bad record does not sink the viewer
                body = f'<p class="bad">This trajectory could not be shown ({_esc(type(exc).__name__)}).</p>'
            used += len(body)
            options.append(f'<option value="{_esc(key)}">{_esc(label)}</option>')
            sections.append(f'<section class="traj" data-task="{_esc(key)}">{body}</section>')
    if not sections:
        return '<h2>Trajectories</h2><p class="muted">No trajectories in this run yet.</p>'
    note = (f'<p class="muted">Shown: the first {MAX_VIEWER_TASKS} trajectories of each policy'
            + (f" ({left_out} more left out to keep this page small)" if left_out else "")
            + ". All of them: " + ", ".join(links) + " (next to this report).</p>")
    return ('<h2>Trajectories</h2>' + note + '<p><label for="task-picker">Task: </label>'
            f'<select id="task-picker">{"".join(options)}</select></p>' + "".join(sections))


def build_report(run_dir: str | os.PathLike) -> Path:
    """Write ``RUN_DIR/report.html`` (atomically) from the run's files; returns its path. A section
    whose input is damaged says so; the others are still built."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a run directory (run `websailor pipeline --out {run_dir}` first)")
    run = _dict(_read_json(run_dir / "run.json"))
    tasks = read_jsonl(run_dir / "tasks" / "train.jsonl", limit=20_000) + \
        read_jsonl(run_dir / "tasks" / "heldout.jsonl", limit=20_000)
    tasks_by_id = {str(t.get("id")): t for t in tasks}
    summary = _dict(_read_json(run_dir / "eval" / "summary.json"))
    title = f"websailor-gym run: {run_dir.name}"
    when = run.get("finished_at") or run.get("started_at") or ""
    body = (f"<h1>{_esc(title)}</h1><p class='muted'>{_esc(str(when)[:100])}</p>"
            + _safe(lambda: overview_section(run), "Run") + _safe(lambda: results_section(summary), "Results")
            + _safe(lambda: comparisons_section(run_dir, summary), "Differences")
            + _safe(lambda: curves_section(run_dir), "Learning curves")
            + _safe(lambda: synthesis_section(tasks), "Synthesized tasks")
            + _safe(lambda: viewer_section(run_dir, tasks_by_id), "Trajectories")
            + _safe(lambda: config_section(run), "Configuration"))
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{_CSS}</style><script>{_JS}</script></head><body>{body}</body></html>")
    return atomic_write_text(run_dir / "report.html", page)
